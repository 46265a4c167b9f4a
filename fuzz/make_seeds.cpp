// Writes the seed corpora of the fuzz targets, one directory per target under <out>, from files
// the library writes: event files (TFRecord framing of Event protos), checkpoints
// (write_checkpoint_files), state files (checkpoint_state_to_text) and IDX files. Event files
// given after <out> (e.g. other writers' files) are added to the event reader's corpus.
//
//   make_seeds <out> [event file...]
// First, on its own: clang 14 with libstdc++ 12 needs c10::IValue complete before <ATen/ATen.h>.
#include <ATen/core/ivalue.h>

#include <zlib.h>

#include <ATen/ATen.h>
#include <torch/optim/adam.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "checkpoint/format/safetensors/safetensors_file.h"
#include "checkpoint/format/trainhooks/sidecar.h"
#include "checkpoint/format/trainhooks/trainhooks_format.h"
#include "optimizer_state.h"
#include "proto/event.pb.h"
#include "summary/record_io.h"
#include "trainhooks/checkpoint/checkpoint_state.h"

namespace fs = std::filesystem;
namespace th = trainhooks;

namespace {

void write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string u16(size_t n) {
  return std::string{static_cast<char>(n & 0xff), static_cast<char>(n >> 8)};
}

// ---- event files ----------------------------------------------------------------------------

std::vector<std::string> sample_events() {
  namespace pb = th::proto;
  std::vector<std::string> out;
  auto add = [&](const pb::Event& e) { out.push_back(e.SerializeAsString()); };
  pb::Event version;
  version.set_wall_time(1700000000.5);
  version.set_file_version("brain.Event:2");
  add(version);

  pb::Event start;
  start.set_step(1);
  start.mutable_session_log()->set_status(pb::SessionLog::START);
  add(start);

  pb::Event scalars;
  scalars.set_step(2);
  auto* v = scalars.mutable_summary()->add_value();
  v->set_tag("loss");
  v->set_simple_value(0.25f);
  v = scalars.mutable_summary()->add_value();  // TF2 style: a rank-0 tensor
  v->set_tag("accuracy");
  v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("scalars");
  v->mutable_tensor()->set_dtype(pb::DT_FLOAT);
  const float acc = 0.5f;
  v->mutable_tensor()->set_tensor_content(std::string(reinterpret_cast<const char*>(&acc), 4));
  v = scalars.mutable_summary()->add_value();
  v->set_tag("lr");
  v->mutable_tensor()->set_dtype(pb::DT_DOUBLE);
  v->mutable_tensor()->add_double_val(0.001);
  add(scalars);

  pb::Event histo;
  histo.set_step(3);
  v = histo.mutable_summary()->add_value();
  v->set_tag("weights");
  auto* h = v->mutable_histo();
  h->set_min(-1);
  h->set_max(1);
  h->set_num(4);
  h->set_sum(0);
  h->set_sum_squares(2);
  for (double l : {-0.5, 0.0, 0.5, 1.0}) h->add_bucket_limit(l);
  for (double c : {1.0, 1.0, 1.0, 1.0}) h->add_bucket(c);
  add(histo);

  pb::Event image_text;
  image_text.set_step(4);
  v = image_text.mutable_summary()->add_value();
  v->set_tag("image");
  v->mutable_image()->set_height(1);
  v->mutable_image()->set_width(1);
  v->mutable_image()->set_colorspace(1);
  v->mutable_image()->set_encoded_image_string(std::string("\x89PNG\r\n\x1a\n", 8));
  v = image_text.mutable_summary()->add_value();
  v->set_tag("notes");
  v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  v->mutable_tensor()->set_dtype(pb::DT_STRING);
  v->mutable_tensor()->add_string_val("hello");
  v->mutable_tensor()->add_string_val("world");
  add(image_text);

  pb::Event stop;
  stop.set_step(5);
  stop.mutable_session_log()->set_status(pb::SessionLog::CHECKPOINT);
  stop.mutable_session_log()->set_checkpoint_path("runs/model.ckpt-5");
  add(stop);
  return out;
}

void event_seeds(const fs::path& dir, const std::vector<std::string>& extra_files) {
  const std::vector<std::string> events = sample_events();
  std::string framed;  // mode 1: (u16 length, payload) chunks
  std::string file;    // mode 0: the file
  for (const auto& e : events) {
    framed += u16(e.size()) + e;
    th::summary::append_record(file, e);
  }
  write(dir / "generated-chunks", "\x01" + framed);
  write(dir / "generated-file", std::string(1, '\0') + file);
  write(dir / "generated-file-skip-corrupt", "\x02" + file);
  std::string torn = file.substr(0, file.size() - 7);  // a writer killed mid-record
  write(dir / "generated-torn-tail", std::string(1, '\0') + torn);
  std::string flipped = file;
  flipped[flipped.size() / 2] ^= 0x40;
  write(dir / "generated-corrupt-skip", "\x02" + flipped);
  int i = 0;
  for (const auto& path : extra_files) {
    const std::string bytes = read(path);
    write(dir / ("external-" + std::to_string(i)), std::string(1, '\0') + bytes);
    write(dir / ("external-" + std::to_string(i) + "-skip-corrupt"), "\x02" + bytes);
    ++i;
  }
}

// ---- checkpoints ------------------------------------------------------------------------------

void checkpoint_seeds(const fs::path& trainstate_dir, const fs::path& variables_dir,
                      const fs::path& scratch) {
  fs::create_directories(scratch);
  at::manual_seed(1);
  at::Tensor w = at::randn({2, 3}).requires_grad_();
  at::Tensor b = at::zeros({3}).requires_grad_();
  torch::optim::Adam adam({w, b}, torch::optim::AdamOptions(0.01));
  (w.sum() + b.sum()).backward();
  adam.step();

  for (int variant = 0; variant < 2; ++variant) {
    th::internal::CheckpointContents c;
    c.path = (scratch / ("model.ckpt-" + std::to_string(variant + 1))).string();
    c.variables = {{"w", w.detach().clone()}, {"b", b.detach().clone()}};
    c.global_step = 7 + variant;
    c.wall_time = 1700000000.25;
    th::internal::OptimizerState state;
    size_t bytes = 0;
    if (variant == 0) {
      state.encoded = *th::internal::encode_optimizer(adam, /*copy=*/true, bytes);
    } else {
      state.archive = "not a real archive";  // format 1 style: opaque bytes
    }
    state.lrs = {0.01};
    c.optimizers.emplace("train", std::move(state));
    c.cpu_rng = at::arange(16, at::kByte);
    c.inputs.emplace("train_input", th::InputPosition{.epoch = 1, .offset = 5});
    c.state.emplace("provider", "opaque provider bytes");
    th::internal::write_checkpoint_files(c);
    // A seed the reader rejects explores nothing beyond its first error.
    const auto decoded = th::internal::decode_checkpoint(c.path);
    if (decoded.global_step != 7 + variant || decoded.variables.size() != 2 ||
        decoded.optimizers.size() != 1 || decoded.inputs.size() != 1)
      throw std::runtime_error("the checkpoint written does not decode to what was written");

    const std::string sidecar = read(th::internal::sidecar_path(c.path));
    const std::string name = "generated-" + std::to_string(variant);
    write(trainstate_dir / (name + "-file"), std::string(1, '\0') + sidecar);
    write(trainstate_dir / (name + "-payload"),
          "\x01" + sidecar.substr(th::internal::kSidecarHeaderSize));
    write(variables_dir / name, read(c.path));
  }
}

// ---- safetensors files
// ---------------------------------------------------------------------------

// Several dtypes (so the data order is the dtype order), a 0-d and an empty tensor, and metadata.
void safetensors_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  const std::vector<std::pair<std::string, at::Tensor>> tensors = {
      {"net/weight", at::arange(6, at::kFloat).reshape({2, 3})},
      {"net/bias", at::tensor({1.5, -2.0}, at::kDouble)},
      {"steps", at::tensor(int64_t{7})},
      {"mask", at::arange(3) % 2 == 0},
      {"empty", at::zeros({0, 4}, at::kHalf)},
      {"codes", at::arange(5, at::kByte)}};
  write(dir / "generated-tensors",
        th::internal::safetensors_bytes(tensors, {{"format", "pt"}, {"global_step", "7"}}));
  write(dir / "generated-no-metadata", th::internal::safetensors_bytes({tensors[0]}, {}));
  write(dir / "generated-empty", th::internal::safetensors_bytes({}, {}));
}

// ---- state files and IDX files ------------------------------------------------------------------

void state_seeds(const fs::path& dir) {
  th::CheckpointState s;
  s.model_checkpoint_path = "model.ckpt-200";
  s.all_model_checkpoint_paths = {"model.ckpt-100", "model.ckpt-200"};
  s.all_model_checkpoint_timestamps = {1700000000.5, 1700000600.25};
  s.last_preserved_timestamp = 1699990000;
  write(dir / "generated-relative", th::checkpoint_state_to_text(s));
  s.model_checkpoint_path = "/runs/exp 1/model.ckpt-200\n\"quoted\"";
  s.all_model_checkpoint_paths = {"/runs/exp 1/model.ckpt-200\n\"quoted\""};
  s.all_model_checkpoint_timestamps = {1e300};
  s.last_preserved_timestamp = 0;
  write(dir / "generated-escapes", th::checkpoint_state_to_text(s));
  write(dir / "handwritten",
        "# TensorFlow writes this file\nmodel_checkpoint_path: 'a/b'\n"
        "all_model_checkpoint_paths: \"a/b\"; all_model_checkpoint_timestamps: 1.5e9,\n");
}

std::string gzip(const std::string& data) {
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2");
  std::string out(deflateBound(&z, data.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("deflate");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void idx_seeds(const fs::path& dir) {
  std::string images("\x00\x00\x08\x03\x00\x00\x00\x03\x00\x00\x00\x02\x00\x00\x00\x02", 16);
  for (int i = 0; i < 12; ++i) images += static_cast<char>(i * 20);
  std::string labels("\x00\x00\x08\x01\x00\x00\x00\x03\x07\x00\x09", 11);
  auto seed = [](const std::string& im, const std::string& lb, bool make_labels) {
    return u16(im.size() | (make_labels ? 0x8000 : 0)) + im + lb;
  };
  write(dir / "generated-plain", seed(images, labels, false));
  write(dir / "generated-gzip", seed(gzip(images), gzip(labels), false));
  write(dir / "generated-two-members",
        seed(gzip(images.substr(0, 10)) + gzip(images.substr(10)), labels, false));
  write(dir / "generated-made-labels", seed(images, "", true));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: make_seeds <out> [event file...]\n";
    return 2;
  }
  const fs::path out = argv[1];
  try {
    event_seeds(out / "event_reader", std::vector<std::string>(argv + 2, argv + argc));
    checkpoint_seeds(out / "trainstate", out / "checkpoint_variables", out / "scratch");
    state_seeds(out / "checkpoint_state");
    safetensors_seeds(out / "safetensors");
    idx_seeds(out / "idx");
    fs::remove_all(out / "scratch");
  } catch (const std::exception& e) {
    std::cerr << "make_seeds: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
