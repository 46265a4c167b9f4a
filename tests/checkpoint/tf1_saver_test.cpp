#include "trainhooks/checkpoint/tf1_saver.h"

#include <ATen/core/Tensor.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/format/trainhooks/pickle_stream.h"
#include "checkpoint/saver_test_model.h"
#include "test_util.h"
#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/checkpoint/checkpoint_reader.h"
#include "trainhooks/checkpoint/checkpoint_state.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/input.h"
#include "trainhooks/optimizers.h"
#include "trainhooks/session.h"

namespace th = trainhooks;
namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace tf1_saver_test {

using namespace th::testing::saver_fixture;

TEST_F(SaverTest, SaveWritesNamedFilesAndTheStateFile) {
  Model m;
  th::Session s(m.g);
  V1Saver saver(m.g, options());
  const std::string prefix = dir.file("model.ckpt");
  EXPECT_EQ(saver.save(s, prefix, 0), prefix + "-0");
  fe.clock->advance(10.5);
  m.steps(s, 2);
  EXPECT_EQ(saver.save(s, prefix, m.g.global_step_value()), prefix + "-2");
  for (const char* f :
       {"model.ckpt-0", "model.ckpt-0.trainstate", "model.ckpt-2", "model.ckpt-2.trainstate"}) {
    EXPECT_TRUE(fs::is_regular_file(dir.file(f))) << f;
  }
  EXPECT_EQ(read_bytes(dir.file("checkpoint")),
            "model_checkpoint_path: \"model.ckpt-2\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-0\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-2\"\n"
            "all_model_checkpoint_timestamps: 1000000000.0\n"
            "all_model_checkpoint_timestamps: 1000000010.5\n");
  EXPECT_THAT(saver.last_checkpoints(dir.path()), ElementsAre(prefix + "-0", prefix + "-2"));
  EXPECT_EQ(th::latest_checkpoint(dir.path()), prefix + "-2");
  // No temporary files are left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 5);
}

TEST_F(SaverTest, SaveWithoutAStepUsesThePrefixAndSameStepReplacesItsEntry) {
  Model m;
  th::Session s(m.g);
  V1Saver saver(m.g, options());
  const std::string prefix = dir.file("model.ckpt");
  EXPECT_EQ(saver.save(s, prefix, std::nullopt), prefix);
  saver.save(s, prefix, 1);
  saver.save(s, prefix, 2);
  saver.save(s, prefix, 1);
  EXPECT_THAT(saver.last_checkpoints(dir.path()),
              ElementsAre(prefix, prefix + "-2", prefix + "-1"));
  auto state = th::get_checkpoint_state(dir.path());
  ASSERT_TRUE(state);
  EXPECT_EQ(state->model_checkpoint_path, prefix + "-1");
  EXPECT_THAT(state->all_model_checkpoint_paths, ElementsAre(prefix, prefix + "-2", prefix + "-1"));
}

TEST_F(SaverTest, MaxToKeepDeletesTheOldestAndRewritesTheStateFile) {
  Model m;
  th::Session s(m.g);
  V1Saver saver(m.g, options(2));
  const std::string prefix = dir.file("model.ckpt");
  for (int step = 0; step < 4; ++step) saver.save(s, prefix, step);
  for (int step : {0, 1}) {
    EXPECT_FALSE(fs::exists(prefix + "-" + std::to_string(step)));
    EXPECT_FALSE(fs::exists(prefix + "-" + std::to_string(step) + ".trainstate"));
  }
  for (int step : {2, 3})
    EXPECT_TRUE(V1Saver::checkpoint_exists(prefix + "-" + std::to_string(step)));
  auto state = th::get_checkpoint_state(dir.path());
  EXPECT_THAT(state->all_model_checkpoint_paths, ElementsAre(prefix + "-2", prefix + "-3"));
  EXPECT_EQ(state->all_model_checkpoint_timestamps.size(), 2u);
}

// TF's saver_test.py MaxToKeepTest.testNoMaxToKeep: max_to_keep 0 keeps every checkpoint, tracks
// none (last_checkpoints stays empty), and the state file lists the newest alone.
TEST_F(SaverTest, NoMaxToKeep) {
  Model m;
  th::Session s(m.g);
  V1Saver saver(m.g, options(0));
  const std::string prefix = dir.file("model.ckpt");
  EXPECT_TRUE(saver.last_checkpoints(dir.path()).empty());
  for (int step = 0; step < 7; ++step) {
    saver.save(s, prefix, step);
    EXPECT_TRUE(saver.last_checkpoints(dir.path()).empty());
  }
  for (int step = 0; step < 7; ++step)
    EXPECT_TRUE(V1Saver::checkpoint_exists(prefix + "-" + std::to_string(step)));
  auto state = th::get_checkpoint_state(dir.path());
  EXPECT_EQ(state->model_checkpoint_path, prefix + "-6");
  EXPECT_EQ(state->all_model_checkpoint_paths, std::vector<std::string>{prefix + "-6"});
}

TEST_F(SaverTest, HoursRuleKeepsOneCheckpointPerPeriod) {
  Model m;
  th::Session s(m.g);
  auto o = options(2);
  o.keep_checkpoint_every_n_hours = 1;
  V1Saver saver(m.g, o);  // created at T: the first kept one must be written after T + 3600
  const std::string prefix = dir.file("model.ckpt");
  const double t0 = fe.clock->wall_seconds();
  auto save_at = [&](int step, double t) {
    fe.clock->advance(t0 + t - fe.clock->wall_seconds());
    saver.save(s, prefix, step);
  };
  save_at(1, 1000);
  save_at(2, 4000);
  save_at(3, 5000);  // drops 1 (written before T + 3600): deleted
  save_at(4, 6000);  // drops 2 (written after T + 3600): kept; the next one after T + 7200
  save_at(5, 8000);  // drops 3 (written before T + 7200): deleted
  EXPECT_FALSE(fs::exists(prefix + "-1"));
  EXPECT_TRUE(V1Saver::checkpoint_exists(prefix + "-2"));
  EXPECT_FALSE(fs::exists(prefix + "-3"));
  EXPECT_EQ(read_bytes(dir.file("checkpoint")),
            "model_checkpoint_path: \"model.ckpt-5\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-4\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-5\"\n"
            "all_model_checkpoint_timestamps: 1000006000.0\n"
            "all_model_checkpoint_timestamps: 1000008000.0\n"
            "last_preserved_timestamp: 1000004000.0\n");
}

TEST_F(SaverTest, RetentionContinuesWhenANewSaverReadsTheStateFile) {
  Model m;
  th::Session s(m.g);
  const std::string prefix = dir.file("model.ckpt");
  {
    V1Saver first(m.g, options(2));
    first.save(s, prefix, 1);
    fe.clock->advance(1);
    first.save(s, prefix, 2);
  }
  fe.clock->advance(1);
  V1Saver second(m.g, options(2));
  second.save(s, prefix, 3);
  EXPECT_FALSE(fs::exists(prefix + "-1"));
  EXPECT_TRUE(V1Saver::checkpoint_exists(prefix + "-2"));
  EXPECT_THAT(second.last_checkpoints(dir.path()), ElementsAre(prefix + "-2", prefix + "-3"));
  auto state = th::get_checkpoint_state(dir.path());
  EXPECT_THAT(state->all_model_checkpoint_timestamps, ElementsAre(1000000001.0, 1000000002.0));
}

TEST_F(SaverTest, LatestCheckpointNeedsTheListedFiles) {
  Model m;
  th::Session s(m.g);
  EXPECT_EQ(th::latest_checkpoint(dir.path(), fe.env()), std::nullopt);
  const std::string path = V1Saver(m.g, options()).save(s, dir.file("model.ckpt"), 3);
  EXPECT_EQ(th::latest_checkpoint(dir.path(), fe.env()), path);
  fs::remove(path + ".trainstate");
  EXPECT_EQ(th::latest_checkpoint(dir.path(), fe.env()), std::nullopt);
  EXPECT_THAT(fe.log->messages(th::LogLevel::kError),
              ElementsAre("Couldn't match files for checkpoint " + path));
  fs::remove(path);
  EXPECT_EQ(th::latest_checkpoint(dir.path(), fe.env()), std::nullopt);
}

TEST_F(SaverTest, RestoreLatestFallsBackFromATruncatedCheckpoint) {
  Model m;
  th::Session s(m.g);
  V1Saver saver(m.g, options());
  const std::string prefix = dir.file("model.ckpt");
  m.steps(s, 1);
  const auto at_1 = m.values();
  saver.save(s, prefix, 1);
  m.steps(s, 1);
  saver.save(s, prefix, 2);
  m.steps(s, 3);
  const std::string bytes = read_bytes(prefix + "-2");
  write_bytes(prefix + "-2", bytes.substr(0, bytes.size() / 2));

  V1Saver restorer(m.g, options());
  EXPECT_EQ(restorer.restore_latest(s, dir.path()), prefix + "-1");
  expect_same(m.values(), at_1);
  EXPECT_EQ(m.g.global_step_value(), 1);
  EXPECT_THAT(warnings(),
              ElementsAre(AllOf(HasSubstr("Checkpoint " + prefix + "-2 cannot be restored"),
                                HasSubstr("truncated"), HasSubstr("Falling back"))));
  EXPECT_THAT(fe.log->messages(), ElementsAre("Restoring parameters from " + prefix + "-2",
                                              "Restoring parameters from " + prefix + "-1"));
  // Retention goes on with what the state file listed.
  EXPECT_THAT(restorer.last_checkpoints(dir.path()), ElementsAre(prefix + "-1", prefix + "-2"));
}

TEST_F(SaverTest, RestoreLatestFallsBackFromAMissingCheckpoint) {
  Model m;
  th::Session s(m.g);
  V1Saver saver(m.g, options());
  const std::string prefix = dir.file("model.ckpt");
  saver.save(s, prefix, 1);
  saver.save(s, prefix, 2);
  fs::remove(prefix + "-2.trainstate");
  EXPECT_EQ(saver.restore_latest(s, dir.path()), prefix + "-1");
  EXPECT_THAT(warnings(), ElementsAre(HasSubstr("does not exist")));
}

TEST_F(SaverTest, RestoreLatestRefusesToStartAfreshWhenNothingListedIsUsable) {
  Model m;
  th::Session s(m.g);
  V1Saver saver(m.g, options());
  const std::string prefix = dir.file("model.ckpt");
  saver.save(s, prefix, 1);
  saver.save(s, prefix, 2);
  for (const char* f : {"model.ckpt-1", "model.ckpt-2.trainstate"}) {
    const std::string bytes = read_bytes(dir.file(f));
    write_bytes(dir.file(f), bytes.substr(0, bytes.size() - 1));
  }
  m.steps(s, 2);
  const auto before = m.values();
  EXPECT_THAT(message_of<th::DataLossError>([&] { saver.restore_latest(s, dir.path()); }),
              AllOf(HasSubstr("None of the 2 checkpoint(s)"), HasSubstr(dir.file("checkpoint"))));
  EXPECT_EQ(warnings().size(), 2u);
  expect_same(m.values(), before);
  EXPECT_EQ(m.g.global_step_value(), 2);
}

TEST_F(SaverTest, RestoreLatestWithNoStateFileIsNullopt) {
  Model m;
  th::Session s(m.g);
  EXPECT_EQ(V1Saver(m.g, options()).restore_latest(s, dir.path()), std::nullopt);
  write_bytes(dir.file("checkpoint"), "not a checkpoint state\n");
  EXPECT_THROW(V1Saver(m.g, options()).restore_latest(s, dir.path()), th::DataLossError);
}

TEST_F(SaverTest, EveryFlippedByteIsDataLossAndChangesNothing) {
  Model m;
  th::Session s(m.g);
  V1Saver saver(m.g, options());
  const std::string path = saver.save(s, dir.file("model.ckpt"), 0);
  m.steps(s, 2);
  const auto before = m.values();
  for (const std::string& file : {path, path + ".trainstate"}) {
    const std::string good = read_bytes(file);
    ASSERT_GT(good.size(), 100u);
    int checked = 0;
    for (size_t i = 0; i < good.size(); i += (i < 64 || i + 64 > good.size()) ? 1 : 13) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ 0x20);
      write_bytes(file, bad);
      const std::string msg = message_of<th::DataLossError>([&] { saver.restore(s, path); });
      ASSERT_THAT(msg, HasSubstr("'" + file + "'")) << "byte " << i;
      ++checked;
    }
    write_bytes(file, good);
    EXPECT_GT(checked, 100);
  }
  expect_same(m.values(), before);
  EXPECT_EQ(m.g.global_step_value(), 2);
  saver.restore(s, path);  // intact again
  EXPECT_EQ(m.g.global_step_value(), 0);
}

TEST_F(SaverTest, TruncatedOrExtendedFilesAreDataLoss) {
  Model m;
  th::Session s(m.g);
  V1Saver saver(m.g, options());
  const std::string path = saver.save(s, dir.file("model.ckpt"), 0);
  for (const std::string& file : {path, path + ".trainstate"}) {
    const std::string good = read_bytes(file);
    for (size_t keep : {size_t{0}, size_t{10}, good.size() - 1}) {
      write_bytes(file, good.substr(0, keep));
      EXPECT_THAT(message_of<th::DataLossError>([&] { saver.restore(s, path); }), HasSubstr(file));
    }
    write_bytes(file, good + "x");
    EXPECT_THAT(message_of<th::DataLossError>([&] { saver.restore(s, path); }), HasSubstr(file));
    write_bytes(file, good);
  }
  fs::remove(path);
  EXPECT_THAT(message_of<th::NotFoundError>([&] { saver.restore(s, path); }), HasSubstr(path));
}

TEST_F(SaverTest, BadArgumentsAreNamed) {
  Model m;
  th::Session s(m.g);
  V1Saver saver(m.g, options());
  for (double hours : {0.0, -1.0, std::nan("")}) {
    auto o = options();
    o.keep_checkpoint_every_n_hours = hours;
    EXPECT_THAT(message_of<th::InvalidArgument>([&] { V1Saver(m.g, o); }),
                HasSubstr("keep_checkpoint_every_n_hours"));
  }
  EXPECT_THAT(message_of<th::InvalidArgument>([&] { saver.save(s, "", 1); }),
              HasSubstr("save_path_prefix"));
  EXPECT_THAT(message_of<th::InvalidArgument>([&] { saver.save(s, dir.path() + "/", 1); }),
              HasSubstr("save_path_prefix"));
  EXPECT_THAT(message_of<th::InvalidArgument>([&] { saver.save(s, dir.file("model.ckpt"), -1); }),
              HasSubstr("global_step -1"));
  EXPECT_THAT(
      message_of<th::InvalidArgument>([&] { saver.save(s, dir.file("checkpoint"), std::nullopt); }),
      HasSubstr("collides"));
  th::Graph other;
  other.variable("w", torch::ones({1}));
  th::Session other_session(other);
  EXPECT_THROW(saver.save(other_session, dir.file("model.ckpt"), 1), th::InvalidArgument);
  EXPECT_THROW(saver.restore(other_session, dir.file("model.ckpt-1")), th::InvalidArgument);
  EXPECT_THAT(message_of<th::NotFoundError>([&] { saver.restore(s, dir.file("nothing-1")); }),
              HasSubstr(dir.file("nothing-1")));
}

TEST_F(SaverTest, WriteErrorsNameThePath) {
  Model m;
  th::Session s(m.g);
  V1Saver saver(m.g, options());
  const std::string missing = dir.file("no/such/dir/model.ckpt");
  EXPECT_THAT(message_of<th::NotFoundError>([&] { saver.save(s, missing, 1); }),
              HasSubstr("Parent directory of " + missing + " doesn't exist, can't save."));
  // A directory that refuses new files even to root.
  const std::string refusing = "/proc/self/model.ckpt";
  EXPECT_THAT(message_of<th::Error>([&] { saver.save(s, refusing, 1); }),
              HasSubstr("Cannot write checkpoint file '/proc/self/model.ckpt-1'"));
  if (::geteuid() != 0) {
    fs::create_directories(dir.file("ro"));
    fs::permissions(dir.file("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THAT(message_of<th::Error>([&] { saver.save(s, dir.file("ro/model.ckpt"), 1); }),
                HasSubstr(dir.file("ro/model.ckpt-1")));
    fs::permissions(dir.file("ro"), fs::perms::owner_all);
  }
  EXPECT_FALSE(fs::exists(dir.file("checkpoint")));
}

TEST_F(SaverTest, RelativePathsMakeAMovableDirectoryAndTheOptionOffWritesThemAsGiven) {
  Model m;
  th::Session s(m.g);
  V1Saver(m.g, options()).save(s, dir.file("model.ckpt"), 4);
  EXPECT_EQ(
      read_bytes(dir.file("checkpoint")),
      "model_checkpoint_path: \"model.ckpt-4\"\nall_model_checkpoint_paths: \"model.ckpt-4\"\n"
      "all_model_checkpoint_timestamps: 1000000000.0\n");
  th::testing::TempDir moved;
  const std::string target = moved.file("copy");
  fs::copy(dir.path(), target, fs::copy_options::recursive);
  EXPECT_EQ(th::latest_checkpoint(target), target + "/model.ckpt-4");

  // TensorFlow 1's Saver's rule: as given.
  auto o = options();
  o.save_relative_paths = false;
  V1Saver(m.g, o).save(s, target + "/model.ckpt", 5);
  EXPECT_EQ(read_bytes(target + "/checkpoint"),
            "model_checkpoint_path: \"" + target + "/model.ckpt-5\"\n" +
                "all_model_checkpoint_paths: \"" + target + "/model.ckpt-4\"\n" +
                "all_model_checkpoint_paths: \"" + target + "/model.ckpt-5\"\n" +
                "all_model_checkpoint_timestamps: 1000000000.0\n" +
                "all_model_checkpoint_timestamps: 1000000000.0\n");
}

// The variables file is what Python's torch.load reads; the sidecar's payload too, after its
// header.
TEST_F(SaverTest, PythonTorchLoadReadsTheCheckpoint) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 with torch is not available; skipping the Python "
                    "interoperability check";
  }
  th::Graph g;
  auto net = torch::nn::Linear(3, 2);
  {
    torch::NoGradGuard no_grad;
    net->weight.copy_(torch::arange(6, torch::kFloat).reshape({2, 3}) * 0.25);
    net->bias.copy_(torch::tensor({-1.5f, 2.0f}));
  }
  g.add_module("net", net);
  g.variable("scale", torch::tensor({3}, torch::kLong), {.trainable = false});
  auto loss = g.op("loss", [=](th::Run& r) { return net->weight.sum(); });
  auto train = g.minimize("train", loss, th::sgd(0.1, {.momentum = 0.5}));
  th::Session s(g);
  s.run({train});  // a momentum buffer for the weight (d loss / d weight = 1), none for the bias
  {
    torch::NoGradGuard no_grad;
    net->weight.copy_(torch::arange(6, torch::kFloat).reshape({2, 3}) * 0.25);
  }
  g.set_global_step_value(12);
  const std::string path = V1Saver(g, options()).save(s, dir.file("model.ckpt"), 12);
  const std::string script = dir.file("check.py");
  write_bytes(
      script,
      "import io, sys, torch\n"
      "d = torch.load(sys.argv[1])\n"
      "print(type(d).__name__, sorted(d))\n"
      "for k in sorted(d): print(k, d[k].dtype, d[k].tolist())\n"
      "raw = open(sys.argv[1] + '.trainstate', 'rb').read()\n"
      "s = torch.load(io.BytesIO(raw[28:]))\n"
      "print(raw[:8].decode(), s['format'], s['global_step'], sorted(s['optimizers']))\n"
      "o = s['optimizers']['train']['state_dict']\n"
      "print(o['type'], o['param_groups'])\n"
      "print({i: {k: v.tolist() for k, v in st.items()} for i, st in o['state'].items()})\n");
  const std::string command = "timeout 120 /usr/bin/python3 " + script + " " + path + " 2>&1";
  int status = -1;
  const std::string out = th::testing::run_command(command, status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out,
            "dict ['net/bias', 'net/weight', 'scale']\n"
            "net/bias torch.float32 [-1.5, 2.0]\n"
            "net/weight torch.float32 [[0.0, 0.25, 0.5], [0.75, 1.0, 1.25]]\n"
            "scale torch.int64 [3]\n"
            "TRNSTATE trainhooks.trainstate 12 ['train']\n"
            "sgd [{'lr': 0.1, 'momentum': 0.5, 'dampening': 0.0, 'weight_decay': 0.0, "
            "'nesterov': False, 'params': [0, 1]}]\n"
            "{0: {'momentum_buffer': [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]}}\n");
}

TEST_F(SaverTest, ASnapshotHoldsTheStateOfItsMomentWhileTrainingGoesOn) {
  Model a(1);
  th::Session sa(a.g);
  a.steps(sa, 3);  // Adam moments exist
  a.counter.value = 7;
  V1Saver saver(a.g, options());
  const auto at3 = a.values();
  th::SaverSnapshot snap = saver.snapshot(sa, dir.file("model.ckpt"), a.g.global_step_value());
  EXPECT_EQ(snap.path(), dir.file("model.ckpt-3"));
  EXPECT_EQ(snap.global_step(), 3);
  // Variables and Adam's two moments, 4 bytes per float.
  int64_t floats = 0;
  for (const auto& v : at3) floats += v.numel();
  EXPECT_EQ(snap.bytes(), static_cast<size_t>(3 * floats * 4));
  // Training changes the variables and the optimizer state in place.
  a.steps(sa, 2);
  a.counter.value = 9;
  EXPECT_EQ(saver.write(std::move(snap)), dir.file("model.ckpt-3"));
  EXPECT_EQ(th::latest_checkpoint(dir.path()), dir.file("model.ckpt-3"));

  // Restored, it continues exactly as a model that stopped at step 3.
  Model b(2);
  th::Session sb(b.g);
  V1Saver(b.g, options()).restore(sb, dir.file("model.ckpt-3"));
  expect_same(b.values(), at3);
  EXPECT_EQ(b.g.global_step_value(), 3);
  EXPECT_EQ(b.counter.value, 7);
  EXPECT_EQ(b.g.input_position(b.batch[0]), (th::InputPosition{0, 9}));
  Model straight(1);
  th::Session ss(straight.g);
  straight.steps(ss, 3);
  straight.steps(ss, 2);
  b.steps(sb, 2);
  expect_same(b.values(), straight.values());
}

TEST_F(SaverTest, SnapshotAndWriteGiveTheSameFilesAsSave) {
  Model a(1);
  th::Session sa(a.g);
  a.steps(sa, 2);
  V1Saver saver(a.g, options());
  torch::manual_seed(5);
  saver.save(sa, dir.file("sync.ckpt"), 2);
  torch::manual_seed(5);
  saver.write(saver.snapshot(sa, dir.file("async.ckpt"), 2));
  EXPECT_EQ(read_bytes(dir.file("sync.ckpt-2")), read_bytes(dir.file("async.ckpt-2")));
  V1Saver(a.g, options()).restore(sa, dir.file("async.ckpt-2"));
}

TEST_F(SaverTest, SnapshotChecksItsArgumentsAndWriteAnEmptySnapshot) {
  Model a;
  th::Session sa(a.g);
  V1Saver saver(a.g, options());
  EXPECT_EQ(
      message_of<th::NotFoundError>([&] { saver.snapshot(sa, dir.file("missing/model.ckpt"), 1); }),
      "Parent directory of " + dir.file("missing/model.ckpt") + " doesn't exist, can't save.");
  EXPECT_EQ(message_of<th::InvalidArgument>([&] { saver.write(th::SaverSnapshot()); }),
            "Saver::write: the snapshot is empty");
}

// A synchronous save writes its two files at once; when either fails, the error names that file
// and nothing of the checkpoint is left: no temporary files, no variables file without its
// training state, no state file.
TEST_F(SaverTest, AFailingFileOfAParallelSaveLeavesNothingBehind) {
  Model m;
  th::Session s(m.g);
  m.steps(s, 1);
  V1Saver saver(m.g, options());
  auto entries = [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  };
  // A directory where the variables file goes: its rename fails.
  fs::create_directories(dir.file("model.ckpt-1"));
  EXPECT_THAT(message_of<th::Error>([&] { saver.save(s, dir.file("model.ckpt"), 1); }),
              HasSubstr("Cannot write checkpoint file '" + dir.file("model.ckpt-1") + "'"));
  EXPECT_THAT(entries(), ElementsAre("model.ckpt-1"));
  // A directory where the training-state file goes: the variables file is removed again.
  fs::create_directories(dir.file("model.ckpt-2.trainstate"));
  EXPECT_THAT(
      message_of<th::Error>([&] { saver.save(s, dir.file("model.ckpt"), 2); }),
      HasSubstr("Cannot write checkpoint file '" + dir.file("model.ckpt-2.trainstate") + "'"));
  EXPECT_THAT(entries(), ElementsAre("model.ckpt-1", "model.ckpt-2.trainstate"));
  // And a save that can succeed does.
  EXPECT_EQ(saver.save(s, dir.file("model.ckpt"), 3), dir.file("model.ckpt-3"));
  EXPECT_THAT(entries(), ElementsAre("checkpoint", "model.ckpt-1", "model.ckpt-2.trainstate",
                                     "model.ckpt-3", "model.ckpt-3.trainstate"));
}

TEST(CheckpointFileTest, StreamedPickleIsTorchPickleSave) {
  c10::Dict<std::string, at::Tensor> d;
  d.insert("a", torch::arange(10, torch::kFloat));
  d.insert("b/c", torch::ones({2, 3}, torch::kDouble));
  d.insert("empty", torch::empty({0}));
  const c10::IValue v(d);
  const std::vector<char> ours = th::internal::pickle_bytes(v);
  const std::vector<char> libtorchs = torch::pickle_save(v);
  ASSERT_EQ(ours.size(), libtorchs.size());
  EXPECT_TRUE(ours == libtorchs)
      << "the first difference is at byte "
      << std::mismatch(ours.begin(), ours.end(), libtorchs.begin()).first - ours.begin();
}

TEST_F(SaverTest, TheFirstSaveIntoADirectoryRemovesTemporariesOfEndedWriters) {
  Model m;
  th::Session s(m.g);
  // Left by a writer killed mid-write (no such process), and one of this process.
  const std::string stale = dir.file(".model.ckpt-3.tmp-99999999-0");
  const std::string ours = dir.file(".model.ckpt-3.tmp-" + std::to_string(::getpid()) + "-7");
  write_bytes(stale, "partial");
  write_bytes(ours, "partial");
  V1Saver saver(m.g, options());
  saver.save(s, dir.file("model.ckpt"), 1);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(ours));
}

}  // namespace tf1_saver_test
