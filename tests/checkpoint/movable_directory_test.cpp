// A checkpoint directory written with an absolute checkpoint_dir keeps working after `mv` or
// `cp -r`: the state file lists paths relative to its directory, and the absolute paths of older
// state files resolve to the files beside them. Training resumed from the new place is
// bit-identical to an uninterrupted run, and a copy never touches the original's files.
#include <ATen/core/Tensor.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include "checkpoint/checkpoint_test_model.h"
#include "checkpoint/child_process.h"
#include "test_util.h"
#include "tools/checkpoint_model.h"
#include "trainhooks/checkpoint/checkpoint_state.h"
#include "trainhooks/checkpoint/inspect_checkpoint.h"
#include "trainhooks/hooks/stop_at_step_hook.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;
namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace movable_directory_test {

using State = std::map<std::string, at::Tensor>;

constexpr int64_t kLastStep = 24;
constexpr int64_t kStopStep = 13;  // between two periodic saves: the final save is step 13

class MovableDirectoryTest : public ::testing::Test {
 protected:
  // Trains CheckpointModel up to `last_step` with checkpoints every 5 steps in `dir`, resuming
  // from what it holds, and returns the training state.
  State train(const std::string& dir, int64_t last_step) {
    auto m = th::testing::CheckpointModel::make();
    {
      th::MonitoredTrainingSession sess(m->g,
                                        {.checkpoint_dir = dir,
                                         .hooks = {std::make_shared<th::StopAtStepHook>(
                                             th::StopAtStepHookOptions{.last_step = last_step})},
                                         .checkpoints = {.save_steps = 5},
                                         .summaries = {.save_steps = 0, .log_step_count_steps = 0},
                                         .env = fe.env()});
      while (!sess.should_stop()) sess.run(m->train);
    }
    return th::testing::training_state(m->g, m->train);
  }
  std::vector<std::string> warnings() const { return fe.log->messages(th::LogLevel::kWarning); }

  // Rewrites the state file of `dir` with absolute paths, as trainhooks wrote it before.
  static void make_paths_absolute(const std::string& dir) {
    th::CheckpointState state = *th::get_checkpoint_state(dir);
    th::update_checkpoint_state(dir, state, /*save_relative_paths=*/false);
    ASSERT_THAT(th::testing::read_text(dir + "/checkpoint"),
                HasSubstr("model_checkpoint_path: \"" + dir + "/model.ckpt-"));
  }

  th::testing::FakeEnv fe;
  th::testing::CpuRngGuard rng_guard_;
  th::testing::TempDir tmp;
};

TEST_F(MovableDirectoryTest, TheStateFileListsPathsRelativeToItsDirectory) {
  const std::string dir = tmp.file("run");
  ASSERT_TRUE(fs::path(dir).is_absolute());
  train(dir, kStopStep);
  EXPECT_THAT(th::testing::read_text(dir + "/checkpoint"),
              ::testing::StartsWith("model_checkpoint_path: \"model.ckpt-13\"\n"
                                    "all_model_checkpoint_paths: \"model.ckpt-0\"\n"
                                    "all_model_checkpoint_paths: \"model.ckpt-5\"\n"
                                    "all_model_checkpoint_paths: \"model.ckpt-10\"\n"
                                    "all_model_checkpoint_paths: \"model.ckpt-13\"\n"
                                    "all_model_checkpoint_timestamps: "));
}

TEST_F(MovableDirectoryTest, ResumingAfterMvOrCpIsBitExact) {
  const State straight = train(tmp.file("straight"), kLastStep);
  const std::string original = tmp.file("run");
  train(original, kStopStep);
  const std::string state_text = th::testing::read_text(original + "/checkpoint");

  // cp -r, then resume in the copy: the copy's checkpoint, the original untouched.
  const std::string copy = tmp.file("copy");
  fs::copy(original, copy, fs::copy_options::recursive);
  const State from_copy = train(copy, kLastStep);
  EXPECT_THAT(fe.log->messages(), Contains("Restoring parameters from " + copy + "/model.ckpt-13"));
  EXPECT_EQ(th::testing::state_differences(straight, from_copy), "");
  EXPECT_EQ(th::testing::read_text(original + "/checkpoint"), state_text);
  EXPECT_TRUE(th::Saver::checkpoint_exists(original + "/model.ckpt-0"));  // not deleted by the copy

  // mv, then resume from the new place.
  const std::string moved = tmp.file("moved");
  fs::rename(original, moved);
  const State from_moved = train(moved, kLastStep);
  EXPECT_THAT(fe.log->messages(),
              Contains("Restoring parameters from " + moved + "/model.ckpt-13"));
  EXPECT_EQ(th::testing::state_differences(straight, from_moved), "");
  EXPECT_THAT(warnings(), ElementsAre());
}

// State files that older versions wrote, with absolute paths, still load, in place and after a
// move or a copy (with a warning); the first save rewrites them with relative paths.
TEST_F(MovableDirectoryTest, OlderStateFilesWithAbsolutePathsStillLoadAfterMvOrCp) {
  const State straight = train(tmp.file("straight"), kLastStep);
  const std::string original = tmp.file("run");
  train(original, kStopStep);
  make_paths_absolute(original);

  const std::string copy = tmp.file("copy");
  fs::copy(original, copy, fs::copy_options::recursive);
  const std::string state_text = th::testing::read_text(original + "/checkpoint");
  EXPECT_EQ(th::testing::state_differences(straight, train(copy, kLastStep)), "");
  EXPECT_THAT(fe.log->messages(), Contains("Restoring parameters from " + copy + "/model.ckpt-13"));
  ASSERT_FALSE(warnings().empty());
  EXPECT_THAT(warnings()[0],
              HasSubstr("Checkpoint state '" + copy +
                        "/checkpoint' lists checkpoints in another "
                        "directory, '" +
                        original +
                        "': using the files of the same names beside "
                        "it (the directory was moved or copied): model.ckpt-13, model.ckpt-0, "));
  EXPECT_EQ(th::testing::read_text(original + "/checkpoint"), state_text);
  for (int step : {0, 5, 10, 13})
    EXPECT_TRUE(th::Saver::checkpoint_exists(original + "/model.ckpt-" + std::to_string(step)));
  EXPECT_THAT(th::testing::read_text(copy + "/checkpoint"),
              HasSubstr("model_checkpoint_path: \"model.ckpt-24\"\n"));

  const std::string moved = tmp.file("moved");
  fs::rename(original, moved);
  EXPECT_EQ(th::testing::state_differences(straight, train(moved, kLastStep)), "");
  EXPECT_THAT(fe.log->messages(),
              Contains("Restoring parameters from " + moved + "/model.ckpt-13"));
}

// `trainhooks checkpoint verify` (verify_checkpoints) on a copy reads the copy's files.
TEST_F(MovableDirectoryTest, VerifyOfACopyChecksTheCopysFiles) {
  const std::string original = tmp.file("run");
  train(original, kStopStep);
  for (bool absolute : {false, true}) {
    SCOPED_TRACE(absolute ? "absolute paths" : "relative paths");
    if (absolute) make_paths_absolute(original);
    const std::string copy = tmp.file(absolute ? "copy_abs" : "copy");
    fs::copy(original, copy, fs::copy_options::recursive);
    th::testing::flip_byte(copy + "/model.ckpt-13", 100);
    std::ostringstream out;
    EXPECT_FALSE(th::verify_checkpoints(out, copy));
    EXPECT_THAT(out.str(), HasSubstr("CORRUPT " + copy + "/model.ckpt-13: Checkpoint file '" +
                                     copy + "/model.ckpt-13' is corrupt"));
    EXPECT_THAT(out.str(), HasSubstr("\n3 of 4 checkpoints OK\n"));
    std::ostringstream original_out;
    EXPECT_TRUE(th::verify_checkpoints(original_out, original)) << original_out.str();
  }
}

}  // namespace movable_directory_test
