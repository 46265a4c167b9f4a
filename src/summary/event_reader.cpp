#include "trainhooks/summary/event_reader.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <unordered_map>

#include <fmt/format.h>
#include <google/protobuf/unknown_field_set.h>

#include "proto/event.pb.h"
#include "summary/hparams_content.h"
#include "summary/record_io.h"
#include "trainhooks/summary/restart_filter.h"

namespace trainhooks::summary {
namespace {

namespace fs = std::filesystem;

template <typename T>
std::optional<T> content_value(const std::string& content) {
  if (content.size() < sizeof(T)) return std::nullopt;
  T v;
  std::memcpy(&v, content.data(), sizeof v);  // TensorFlow stores little-endian host bytes
  return v;
}

// The single element of a numeric tensor, from tensor_content or the typed field.
std::optional<double> scalar_of(const proto::TensorProto& t) {
  const std::string& c = t.tensor_content();
  auto pick = [&](auto from_content, auto from_field) -> std::optional<double> {
    if (!c.empty()) {
      if (auto v = from_content()) return static_cast<double>(*v);
      return std::nullopt;
    }
    return from_field();
  };
  auto half = [](uint16_t bits) {
    return static_cast<double>(c10::Half(bits, c10::Half::from_bits()));
  };
  auto bfloat = [](uint16_t bits) {
    return static_cast<double>(c10::BFloat16(bits, c10::BFloat16::from_bits()));
  };
  using Opt = std::optional<double>;
  switch (t.dtype()) {
    case proto::DT_FLOAT:
      return pick([&] { return content_value<float>(c); },
                  [&] { return t.float_val_size() ? Opt(t.float_val(0)) : Opt(); });
    case proto::DT_DOUBLE:
      return pick([&] { return content_value<double>(c); },
                  [&] { return t.double_val_size() ? Opt(t.double_val(0)) : Opt(); });
    case proto::DT_HALF:
      return pick(
          [&] {
            auto b = content_value<uint16_t>(c);
            return b ? Opt(half(*b)) : Opt();
          },
          [&] {
            return t.half_val_size() ? Opt(half(static_cast<uint16_t>(t.half_val(0)))) : Opt();
          });
    case proto::DT_BFLOAT16:
      return pick(
          [&] {
            auto b = content_value<uint16_t>(c);
            return b ? Opt(bfloat(*b)) : Opt();
          },
          [&] {
            return t.half_val_size() ? Opt(bfloat(static_cast<uint16_t>(t.half_val(0)))) : Opt();
          });
    case proto::DT_INT32:
      return pick([&] { return content_value<int32_t>(c); },
                  [&] { return t.int_val_size() ? Opt(t.int_val(0)) : Opt(); });
    case proto::DT_INT16:
      return pick([&] { return content_value<int16_t>(c); },
                  [&] { return t.int_val_size() ? Opt(t.int_val(0)) : Opt(); });
    case proto::DT_INT8:
      return pick([&] { return content_value<int8_t>(c); },
                  [&] { return t.int_val_size() ? Opt(t.int_val(0)) : Opt(); });
    case proto::DT_UINT8:
      return pick([&] { return content_value<uint8_t>(c); },
                  [&] { return t.int_val_size() ? Opt(t.int_val(0)) : Opt(); });
    case proto::DT_UINT16:
      return pick([&] { return content_value<uint16_t>(c); },
                  [&] { return t.int_val_size() ? Opt(t.int_val(0)) : Opt(); });
    case proto::DT_INT64:
      return pick(
          [&] { return content_value<int64_t>(c); },
          [&] { return t.int64_val_size() ? Opt(static_cast<double>(t.int64_val(0))) : Opt(); });
    case proto::DT_UINT32:
      return pick([&] { return content_value<uint32_t>(c); },
                  [&] { return t.uint32_val_size() ? Opt(t.uint32_val(0)) : Opt(); });
    case proto::DT_UINT64:
      return pick(
          [&] { return content_value<uint64_t>(c); },
          [&] { return t.uint64_val_size() ? Opt(static_cast<double>(t.uint64_val(0))) : Opt(); });
    case proto::DT_BOOL:
      return pick([&] { return content_value<uint8_t>(c); },
                  [&] { return t.bool_val_size() ? Opt(t.bool_val(0) ? 1.0 : 0.0) : Opt(); });
    default:
      return std::nullopt;
  }
}

int64_t num_elements(const proto::TensorShapeProto& shape) {
  int64_t n = 1;
  for (const auto& d : shape.dim()) n *= d.size();
  return n;
}

// The length-delimited fields `field` of a message, or nullopt when it does not parse.
std::optional<std::vector<std::string>> message_fields(const std::string& bytes, int field) {
  google::protobuf::UnknownFieldSet fields;
  if (!fields.ParseFromString(bytes)) return std::nullopt;
  std::vector<std::string> out;
  for (int i = 0; i < fields.field_count(); ++i) {
    const auto& f = fields.field(i);
    if (f.number() != field) continue;
    if (f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) return std::nullopt;
    out.push_back(f.length_delimited());
  }
  return out;
}

// A custom_scalars Layout{repeated Category category = 1}, Category{string title = 1;
// repeated Chart chart = 2}; nullopt when the bytes are not one.
std::optional<LayoutValue> decode_layout(const std::string& bytes) {
  auto categories = message_fields(bytes, 1);
  if (!categories) return std::nullopt;
  LayoutValue layout;
  for (const std::string& category : *categories) {
    auto titles = message_fields(category, 1);
    auto charts = message_fields(category, 2);
    if (!titles || !charts) return std::nullopt;
    layout.categories.push_back(titles->empty() ? std::string() : titles->back());
    layout.charts += static_cast<int64_t>(charts->size());
  }
  return layout;
}

void decode_tensor(const proto::TensorProto& t, EventValue& out) {
  const std::string& plugin = out.plugin_name;
  if (plugin == "custom_scalars" && t.string_val_size() == 1) {
    if (auto layout = decode_layout(t.string_val(0))) {
      out.kind = ValueKind::kLayout;
      out.layout = std::move(layout);
      return;
    }
  }
  if (plugin == "text" || t.dtype() == proto::DT_STRING) {
    out.kind = ValueKind::kText;
    for (int i = 0; i < t.string_val_size(); ++i) {
      if (i > 0) out.text += '\n';
      out.text += t.string_val(i);
    }
    return;
  }
  if ((plugin == "scalars" || plugin.empty()) && num_elements(t.tensor_shape()) == 1) {
    if (auto v = scalar_of(t)) {
      out.kind = ValueKind::kScalar;
      out.scalar = *v;
      return;
    }
  }
  if (plugin == "histograms") {
    out.kind = ValueKind::kHistogram;
  } else if (plugin == "images") {
    out.kind = ValueKind::kImage;
  } else if (plugin == "audio") {
    out.kind = ValueKind::kAudio;
  } else {
    out.kind = ValueKind::kTensor;
  }
}

}  // namespace

bool is_event_file_name(const std::string& filename) {
  return filename.find("tfevents") != std::string::npos;
}

struct EventReader::Impl {
  ReadOptions options;
  std::vector<fs::path> files;
  size_t index = 0;
  std::unique_ptr<RecordFileReader> current;
  fs::path current_path;
  std::unordered_map<std::string, std::string> plugin_of_tag;
  int64_t corrupt = 0;
  std::vector<PartialRecord> partial;
  // A corrupt tail stays where it is; report it once, not on every later call.
  std::optional<std::pair<fs::path, uint64_t>> last_reported;
  std::string record;
  proto::Event event;

  Event decode(uint64_t offset);
  void corrupt_record(const fs::path& file, uint64_t offset, const std::string& what);
  void not_an_event_file(const std::string& what);
  void note_end();
};

void EventReader::Impl::not_an_event_file(const std::string& what) {
  throw EventFileError(
      fmt::format("{} is not an event file: its first record {}", current_path.string(), what),
      current_path, 0);
}

void EventReader::Impl::note_end() {
  std::error_code ec;
  const uint64_t size = fs::file_size(current_path, ec);
  const uint64_t offset = current->offset();
  std::erase_if(partial, [&](const PartialRecord& p) { return p.file == current_path; });
  if (!ec && size > offset) {
    partial.push_back({.file = current_path, .offset = offset, .bytes = size - offset});
  }
}

void EventReader::Impl::corrupt_record(const fs::path& file, uint64_t offset,
                                       const std::string& what) {
  std::string message =
      fmt::format("Corrupt record in {} at byte offset {}: {}", file.string(), offset, what);
  if (!options.skip_corrupt) throw EventFileError(message, file, offset);
  if (last_reported && last_reported->first == file && last_reported->second == offset) return;
  last_reported.emplace(file, offset);
  ++corrupt;
  options.env.warning(message + "; skipped");
}

Event EventReader::Impl::decode(uint64_t offset) {
  Event out;
  out.wall_time = event.wall_time();
  out.step = event.step();
  out.offset = offset;
  switch (event.what_case()) {
    case proto::Event::kFileVersion:
      out.file_version = event.file_version();
      break;
    case proto::Event::kGraphDef:
      out.graph_def = true;
      out.graph_def_data = event.graph_def();
      break;
    case proto::Event::kMetaGraphDef:
      out.meta_graph_def = true;
      break;
    case proto::Event::kSessionLog: {
      const auto& log = event.session_log();
      out.session_log = SessionLogValue{.status = static_cast<SessionStatus>(log.status()),
                                        .checkpoint_path = log.checkpoint_path(),
                                        .msg = log.msg()};
      break;
    }
    case proto::Event::kSummary:
      for (const auto& v : event.summary().value()) {
        EventValue value;
        value.tag = v.tag();
        if (v.has_metadata() && !v.metadata().plugin_data().plugin_name().empty()) {
          plugin_of_tag[v.tag()] = v.metadata().plugin_data().plugin_name();
        }
        if (auto it = plugin_of_tag.find(v.tag()); it != plugin_of_tag.end()) {
          value.plugin_name = it->second;
        }
        // The HParams plugin's data is in the value's own metadata, not in its tensor.
        if (value.plugin_name == "hparams" && v.has_metadata()) {
          if (auto hparams = decode_hparams_content(v.metadata().plugin_data().content())) {
            value.kind = ValueKind::kHParams;
            value.hparams = std::move(hparams);
            out.values.push_back(std::move(value));
            continue;
          }
        }
        switch (v.value_case()) {
          case proto::Summary::Value::kSimpleValue:
            value.kind = ValueKind::kScalar;
            value.scalar = v.simple_value();
            break;
          case proto::Summary::Value::kHisto: {
            const auto& h = v.histo();
            value.kind = ValueKind::kHistogram;
            value.histogram =
                HistogramValue{.min = h.min(),
                               .max = h.max(),
                               .num = h.num(),
                               .sum = h.sum(),
                               .sum_squares = h.sum_squares(),
                               .bucket_limits = {h.bucket_limit().begin(), h.bucket_limit().end()},
                               .buckets = {h.bucket().begin(), h.bucket().end()}};
            break;
          }
          case proto::Summary::Value::kObsoleteOldStyleHistogram:
            value.kind = ValueKind::kHistogram;
            break;
          case proto::Summary::Value::kImage: {
            const auto& i = v.image();
            value.kind = ValueKind::kImage;
            value.image = ImageValue{.height = i.height(),
                                     .width = i.width(),
                                     .colorspace = i.colorspace(),
                                     .encoded = i.encoded_image_string()};
            break;
          }
          case proto::Summary::Value::kAudio:
            value.kind = ValueKind::kAudio;
            break;
          case proto::Summary::Value::kTensor:
            decode_tensor(v.tensor(), value);
            break;
          case proto::Summary::Value::VALUE_NOT_SET:
            break;
        }
        out.values.push_back(std::move(value));
      }
      break;
    default:
      break;
  }
  return out;
}

EventReader::EventReader(const fs::path& path, ReadOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->options.env = impl_->options.env.or_else(Env::system());
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      if (entry.is_regular_file(ec) && is_event_file_name(entry.path().filename().string())) {
        impl_->files.push_back(entry.path());
      }
    }
    if (ec) {
      throw EventFileError(fmt::format("Cannot list {}: {}", path.string(), ec.message()), path, 0);
    }
    std::sort(impl_->files.begin(), impl_->files.end(),
              [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });
  } else if (fs::exists(path, ec)) {
    impl_->files.push_back(path);
  } else {
    throw EventFileError(fmt::format("No such file or directory: {}", path.string()), path, 0);
  }
}

EventReader::~EventReader() = default;
EventReader::EventReader(EventReader&&) noexcept = default;
EventReader& EventReader::operator=(EventReader&&) noexcept = default;

std::optional<Event> EventReader::next() {
  Impl& s = *impl_;
  while (s.index < s.files.size()) {
    if (!s.current) {
      s.current = std::make_unique<RecordFileReader>(s.files[s.index]);
      s.current_path = s.files[s.index];
    }
    const uint64_t offset = s.current->offset();
    switch (s.current->read(s.record)) {
      case RecordFileReader::Status::kRecord:
        if (!s.event.ParseFromString(s.record)) {
          if (offset == 0 && !s.options.skip_corrupt) {
            s.not_an_event_file("is not an Event message");
          }
          s.corrupt_record(s.current_path, offset, "the record is not an Event message");
          continue;
        }
        if (offset == 0 && !s.options.skip_corrupt &&
            s.event.what_case() == proto::Event::WHAT_NOT_SET && s.event.wall_time() == 0 &&
            s.event.step() == 0 &&
            s.event.GetReflection()->GetUnknownFields(s.event).field_count() > 0) {
          // Another kind of TFRecord file (tf.Example records parse with unknown fields only).
          s.not_an_event_file("has none of an Event's fields");
        }
        return s.decode(offset);
      case RecordFileReader::Status::kCorrupt:
        if (offset == 0 && !s.options.skip_corrupt) {
          s.not_an_event_file(fmt::format("fails its checks ({})", s.current->error()));
        }
        s.corrupt_record(s.current_path, offset, s.current->error());
        if (s.current->skip_corrupt() != 0) continue;
        if (offset == 0) {
          s.not_an_event_file(
              fmt::format("fails its checks ({}) and no valid record follows", s.current->error()));
        }
        break;  // nothing valid follows: treat as this file's end
      case RecordFileReader::Status::kEnd:
        s.note_end();
        break;
    }
    // The last file stays open so that a later call sees records appended meanwhile.
    if (s.index + 1 == s.files.size()) return std::nullopt;
    ++s.index;
    s.current.reset();
  }
  return std::nullopt;
}

const std::vector<fs::path>& EventReader::files() const { return impl_->files; }
const fs::path& EventReader::current_file() const { return impl_->current_path; }
int64_t EventReader::corrupt_records() const { return impl_->corrupt; }
const std::vector<PartialRecord>& EventReader::partial_records() const { return impl_->partial; }

std::vector<Event> read_events(const fs::path& path, const ReadOptions& options) {
  EventReader reader(path, options);
  if (options.purge_orphaned_data) {
    RestartFilter filter;
    while (auto e = reader.next()) filter.add(std::move(*e));
    return std::move(filter.events());
  }
  std::vector<Event> events;
  while (auto e = reader.next()) events.push_back(std::move(*e));
  return events;
}

}  // namespace trainhooks::summary
