// trainhooks::Saver: one checkpoint at a given path, no record kept (TF2's tf.train.Checkpoint
// write and read). TensorFlow 1's Saver API (save with a step, the state file, retention) is
// tested in tf1_saver_test.cpp; a directory of checkpoints in checkpoint_manager_test.cpp.
#include "trainhooks/checkpoint/saver.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/saver_test_model.h"
#include "trainhooks/errors.h"
#include "trainhooks/session.h"
#include "trainhooks/training_state.h"

namespace th = trainhooks;
namespace fs = std::filesystem;
using ::testing::ElementsAre;

namespace saver_test {

using namespace th::testing::saver_fixture;

class OneCheckpointSaverTest : public SaverTest {
 protected:
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
};

TEST_F(OneCheckpointSaverTest, WriteWritesTheCheckpointAloneAndRestoreReadsItBack) {
  Model a(1);
  th::Session sa(a.g);
  a.steps(sa, 3);
  a.counter.value = 4;
  th::Saver saver(a.g, saver_options());
  EXPECT_EQ(saver.write(sa, dir.file("model.ckpt")), dir.file("model.ckpt"));
  EXPECT_EQ(saver.write(sa, dir.file("model.ckpt")), dir.file("model.ckpt"));  // replaced
  // No state file, nothing named by step, nothing deleted: the manager's jobs.
  EXPECT_THAT(entries(), ElementsAre("model.ckpt", "model.ckpt.trainstate"));
  EXPECT_TRUE(th::Saver::checkpoint_exists(dir.file("model.ckpt")));

  Model b(2);
  th::Session sb(b.g);
  th::Saver(b.g, saver_options()).restore(sb, dir.file("model.ckpt"));
  expect_same(b.values(), a.values());
  EXPECT_EQ(b.g.global_step_value(), 3);
  EXPECT_EQ(b.counter.value, 4);
  EXPECT_THAT(fe.log->messages(th::LogLevel::kInfo),
              ElementsAre("Restoring parameters from " + dir.file("model.ckpt")));
}

// restore() in two halves, as CheckpointManager::restore_latest uses them: read() decodes and
// changes nothing; apply() checks against the graph and changes everything.
TEST_F(OneCheckpointSaverTest, ReadChangesNothingAndApplyRestores) {
  Model a(1);
  th::Session sa(a.g);
  a.steps(sa, 2);
  th::Saver(a.g, saver_options()).write(sa, dir.file("model.ckpt"));

  Model b(2);
  th::Session sb(b.g);
  const auto before = b.values();
  th::Saver saver(b.g, saver_options());
  const th::TrainingSnapshot snapshot = saver.read(sb, dir.file("model.ckpt"));
  EXPECT_EQ(snapshot.global_step, 2);
  expect_same(b.values(), before);
  EXPECT_EQ(b.g.global_step_value(), 0);
  saver.apply(sb, snapshot, dir.file("model.ckpt"));
  expect_same(b.values(), a.values());
  EXPECT_EQ(b.g.global_step_value(), 2);
}

// A snapshot without a copy shares the live tensors: what changes them before it is written is in
// the file (hence write(session, path) writes it at once); a copying snapshot keeps its moment.
TEST_F(OneCheckpointSaverTest, ASnapshotWithoutACopySharesTheLiveTensors) {
  Model a(1);
  th::Session sa(a.g);
  a.steps(sa, 2);
  th::Saver saver(a.g, saver_options());
  th::SaverSnapshot copied = saver.snapshot(sa, dir.file("copied.ckpt"));
  th::SaverSnapshot shared = saver.snapshot(sa, dir.file("shared.ckpt"), /*copy=*/false);
  EXPECT_EQ(shared.global_step(), 2);
  EXPECT_EQ(shared.bytes(), copied.bytes());
  const auto at2 = a.values();
  {
    at::NoGradGuard no_grad;
    a.g.variable_value(a.g.variables()[0]).add_(1);  // in place, as an optimizer step
  }
  EXPECT_EQ(th::Saver::write(std::move(shared)), dir.file("shared.ckpt"));
  EXPECT_EQ(th::Saver::write(std::move(copied)), dir.file("copied.ckpt"));

  Model b(2), c(3);
  th::Session sb(b.g), sc(c.g);
  th::Saver(b.g, saver_options()).restore(sb, dir.file("shared.ckpt"));
  th::Saver(c.g, saver_options()).restore(sc, dir.file("copied.ckpt"));
  expect_same(b.values(), a.values());
  expect_same(c.values(), at2);
  EXPECT_FALSE(at::equal(b.values()[0], c.values()[0]));
}

TEST_F(OneCheckpointSaverTest, ASessionOfAnotherGraphIsRefusedByEveryMethod) {
  Model a(1), other(2);
  th::Session sa(a.g), so(other.g);
  th::Saver(a.g, saver_options()).write(sa, dir.file("model.ckpt"));
  th::Saver saver(a.g, saver_options());
  const std::string tail = ": the session runs another graph than this Saver's";
  EXPECT_EQ(message_of<th::InvalidArgument>([&] { saver.write(so, dir.file("x")); }),
            "Saver::write" + tail);
  EXPECT_EQ(message_of<th::InvalidArgument>([&] { saver.snapshot(so, dir.file("x")); }),
            "Saver::snapshot" + tail);
  EXPECT_EQ(message_of<th::InvalidArgument>([&] { saver.restore(so, dir.file("model.ckpt")); }),
            "Saver::restore" + tail);
  EXPECT_EQ(message_of<th::InvalidArgument>([&] { saver.read(so, dir.file("model.ckpt")); }),
            "Saver::read" + tail);
  const th::TrainingSnapshot snapshot = saver.read(sa, dir.file("model.ckpt"));
  EXPECT_EQ(
      message_of<th::InvalidArgument>([&] { saver.apply(so, snapshot, dir.file("model.ckpt")); }),
      "Saver::apply" + tail);
  EXPECT_EQ(message_of<th::InvalidArgument>([&] { saver.write(sa, dir.file("checkpoint")); }),
            "Saver::write: 'latest_filename' collides with 'save_path': 'checkpoint' and '" +
                dir.file("checkpoint") + "'");
}

}  // namespace saver_test
