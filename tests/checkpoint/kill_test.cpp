// Crash safety of checkpoints: a process that trains with save_steps = 1 is killed (SIGKILL) at
// random moments, over and over, in one checkpoint directory. After every kill the state file
// parses and every checkpoint it lists is complete and restores; every restart restores the
// newest one and continues from the step after it; and training to the end after all the kills
// gives bit-identically the state of a run that was never interrupted.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/child_process.h"
#include "test_util.h"
#include "tools/checkpoint_model.h"
#include "trainhooks/checkpoint/checkpoint_state.h"
#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/errors.h"
#include "trainhooks/session.h"

namespace th = trainhooks;
using ::testing::HasSubstr;
using ::testing::Not;

namespace kill_test {

constexpr int kKills = 24;
constexpr uint32_t kSeed = 20240611;
// The random moments are spread from the start to this long after the first step of a run
// (its start-up time is measured, since it depends on the machine's load): the loading of
// LibTorch, the restore, the first saves and some steps are all hit.
constexpr int kTrainingWindowMs = 400;

int64_t step_of(const std::string& checkpoint_path) {
  return std::stoll(checkpoint_path.substr(checkpoint_path.rfind('-') + 1));
}

// The first path named by a `Restoring parameters from PATH` line of `log`, if any.
std::optional<std::string> first_restored(const std::string& log) {
  const std::string marker = "Restoring parameters from ";
  const size_t at = log.find(marker);
  if (at == std::string::npos) return std::nullopt;
  const size_t begin = at + marker.size();
  return log.substr(begin, log.find('\n', begin) - begin);
}

class KillTest : public ::testing::Test {
 protected:
  // Checks the directory as a restarting process would find it; returns the newest listed
  // checkpoint, if any.
  std::optional<std::string> check_directory(const std::string& dir) {
    std::optional<th::CheckpointState> state;
    EXPECT_NO_THROW(state = th::get_checkpoint_state(dir)) << "the state file does not parse";
    if (!state) return std::nullopt;
    const auto& paths = state->all_model_checkpoint_paths;
    EXPECT_FALSE(paths.empty());
    if (paths.empty()) return std::nullopt;
    EXPECT_EQ(state->model_checkpoint_path, paths.back());
    // A fresh graph of the same model: every listed checkpoint restores into it.
    auto m = th::testing::CheckpointModel::make();
    th::Session sess(m->g);
    th::Saver saver(m->g, {.env = fe.env()});
    int64_t previous = -1;
    for (const auto& path : paths) {
      EXPECT_TRUE(th::Saver::checkpoint_exists(path)) << path << " is listed but missing";
      EXPECT_NO_THROW(saver.restore(sess, path)) << path;
      EXPECT_EQ(m->g.global_step_value(), step_of(path)) << path;
      EXPECT_GT(step_of(path), previous) << "listed out of order";
      previous = step_of(path);
    }
    return state->model_checkpoint_path;
  }

  th::testing::FakeEnv fe;
  th::testing::CpuRngGuard rng_guard_;
};

TEST_F(KillTest, RestartsAfterRandomKillsRestoreTheNewestCompleteCheckpointAndMatchAStraightRun) {
  const auto test_start = std::chrono::steady_clock::now();
  th::testing::TempDir tmp;
  const std::string dir = tmp.file("ckpt");
  std::mt19937 rng(kSeed);
  std::optional<std::string> newest;  // newest listed checkpoint before each start
  int after_step_kills = 0, runs_that_trained = 0;
  std::string summary;

  double startup_ms = 1000;  // start to first printed step; updated from the runs

  for (int i = 0; i < kKills; ++i) {
    SCOPED_TRACE("kill " + std::to_string(i + 1));
    const std::string log = tmp.file("log-" + std::to_string(i) + ".txt");
    std::string moment;
    std::vector<int64_t> steps;
    {
      const auto start = std::chrono::steady_clock::now();
      th::testing::ChildProcess child(
          th::testing::trainer_argv({"--dir", dir, "--last-step", "1000000", "--save-steps", "1"}),
          log);
      bool first_step_seen = false;
      auto note_startup = [&](const std::string& line) {
        if (line.rfind("step ", 0) == 0 && !first_step_seen) {
          first_step_seen = true;
          startup_ms =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count();
        }
      };
      if (rng() % 3 == 0) {
        // Right after the n-th step of this run was printed (and so saved).
        const int n = 1 + static_cast<int>(rng() % 4);
        int seen = 0;
        ASSERT_TRUE(child.wait_for_line(
            [&](const std::string& l) {
              note_startup(l);
              return l.rfind("step ", 0) == 0 && ++seen == n;
            },
            60))
            << th::testing::read_text(log);
        moment = "after step line " + std::to_string(n);
        ++after_step_kills;
      } else {
        const int window_ms = static_cast<int>(startup_ms) + kTrainingWindowMs;
        const int delay_ms = static_cast<int>(rng() % (window_ms + 1));
        child.wait_for_line(
            [&](const std::string& l) {
              note_startup(l);
              return false;
            },
            delay_ms / 1000.0);
        moment = std::to_string(delay_ms) + " ms";
      }
      child.send(SIGKILL);
      const auto status = child.wait(30);
      ASSERT_TRUE(status) << "not reaped 30 s after SIGKILL";
      steps = th::testing::printed_steps(child.lines());
    }

    const std::string text = th::testing::read_text(log);
    EXPECT_THAT(text, Not(HasSubstr("cannot be restored"))) << text;
    EXPECT_THAT(text, Not(HasSubstr("checkpoint_trainer:"))) << text;
    // A restart restores the newest listed checkpoint, and trains from the step after it.
    const std::optional<std::string> restored = first_restored(text);
    if (newest) {
      if (restored) {
        EXPECT_EQ(*restored, *newest);
      }
      if (!steps.empty()) {
        EXPECT_TRUE(restored) << "trained without restoring " << *newest;
        EXPECT_EQ(steps.front(), step_of(*newest) + 1);
      }
    } else {
      EXPECT_FALSE(restored);
      if (!steps.empty()) {
        EXPECT_EQ(steps.front(), 1);
      }
    }
    if (!steps.empty()) ++runs_that_trained;

    const std::optional<std::string> now = check_directory(dir);
    if (newest) {
      ASSERT_TRUE(now) << "the state file lost its checkpoints";
      EXPECT_GE(step_of(*now), step_of(*newest));
    }
    // A printed step was saved first (CheckpointSaverHook runs before the printing hook).
    if (!steps.empty()) {
      ASSERT_TRUE(now);
      EXPECT_GE(step_of(*now), steps.back());
    }
    summary +=
        "  kill " + std::to_string(i + 1) + " at " + moment + ": restored " +
        (restored ? std::to_string(step_of(*restored)) : std::string("nothing")) + ", printed " +
        (steps.empty() ? std::string("no step")
                       : std::to_string(steps.front()) + ".." + std::to_string(steps.back())) +
        ", newest checkpoint " + (now ? std::to_string(step_of(*now)) : std::string("none")) + "\n";
    newest = now;
    if (HasFatalFailure()) break;
  }
  // Temporary files of writes that a kill interrupted are never listed; count them for the record.
  int leftovers = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().find(".tmp") != std::string::npos) ++leftovers;
  }
  std::cout << "[          ] " << leftovers << " temporary files left by interrupted writes\n";
  std::cout << "[          ] " << kKills << " kills (" << after_step_kills
            << " right after a step was printed), " << runs_that_trained
            << " runs trained; restored steps:\n"
            << summary;
  ASSERT_TRUE(newest) << "no checkpoint survived any run";
  ASSERT_GE(runs_that_trained, 1);

  // Training to the end after the kills equals a run that was never interrupted.
  const int64_t last_step = step_of(*newest) + 5;
  const std::string last = std::to_string(last_step);
  const std::string final_log = tmp.file("final.txt");
  const auto resumed = th::testing::run_trainer(
      {"--dir", dir, "--last-step", last, "--save-steps", "1", "--dump", tmp.file("resumed.pt")},
      final_log);
  ASSERT_TRUE(resumed.exited_cleanly()) << th::testing::read_text(final_log);
  EXPECT_EQ(first_restored(th::testing::read_text(final_log)), *newest);
  const auto steps = th::testing::printed_steps(resumed.lines);
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.front(), step_of(*newest) + 1);
  EXPECT_EQ(steps.back(), last_step);

  const std::string straight_log = tmp.file("straight.txt");
  const auto straight =
      th::testing::run_trainer({"--dir", tmp.file("straight"), "--last-step", last, "--save-steps",
                                "1000", "--dump", tmp.file("straight.pt")},
                               straight_log);
  ASSERT_TRUE(straight.exited_cleanly()) << th::testing::read_text(straight_log);

  const auto a = th::testing::load_training_state(tmp.file("straight.pt"));
  const auto b = th::testing::load_training_state(tmp.file("resumed.pt"));
  EXPECT_EQ(a.size(), 4u + 12u + 3u);
  EXPECT_EQ(th::testing::state_differences(a, b), "");
  std::cout << "[          ] final step " << last_step << ", whole test "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - test_start).count()
            << " s\n";
}

}  // namespace kill_test
