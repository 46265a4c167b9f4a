// resolve_training_options: the defaults MonitoredTrainingSession derives from its options.
#include "trainhooks/training_session.h"

#include <gtest/gtest.h>

#include <memory>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/hooks/preemption_hook.h"

namespace th = trainhooks;

namespace training_session_test {

TEST(ResolveTrainingOptionsTest, ChiefWithACheckpointDirGetsTfDefaults) {
  th::ResolvedTrainingOptions r = th::resolve_training_options({.checkpoint_dir = "/tmp/run"});
  EXPECT_TRUE(r.is_chief);
  EXPECT_EQ(r.checkpoint_dir, "/tmp/run");
  EXPECT_EQ(r.summary_dir, "/tmp/run");
  EXPECT_EQ(r.save_checkpoint_secs, 600.0);
  EXPECT_FALSE(r.save_checkpoint_steps);
  EXPECT_EQ(r.save_summaries_steps, 100);
  EXPECT_FALSE(r.save_summaries_secs);
  EXPECT_EQ(r.log_step_count_steps, 100);
  EXPECT_TRUE(r.add_preemption_hook);
}

TEST(ResolveTrainingOptionsTest, StepsReplaceTheSecondsDefault) {
  th::ResolvedTrainingOptions r = th::resolve_training_options({.checkpoint_dir = "ckpt",
                                                                .summary_dir = "logs",
                                                                .checkpoints = {.save_steps = 50},
                                                                .summaries = {.save_secs = 30}});
  EXPECT_EQ(r.save_checkpoint_steps, 50);
  EXPECT_FALSE(r.save_checkpoint_secs);
  EXPECT_EQ(r.save_summaries_secs, 30.0);
  EXPECT_FALSE(r.save_summaries_steps);
  EXPECT_EQ(r.summary_dir, "logs");
}

TEST(ResolveTrainingOptionsTest, ZeroTurnsAHookOff) {
  th::ResolvedTrainingOptions r =
      th::resolve_training_options({.checkpoint_dir = "ckpt",
                                    .checkpoints = {.save_secs = 0},
                                    .summaries = {.save_steps = 0, .log_step_count_steps = 0}});
  EXPECT_FALSE(r.save_checkpoint_secs || r.save_checkpoint_steps);
  EXPECT_FALSE(r.save_summaries_secs || r.save_summaries_steps);
  EXPECT_EQ(r.log_step_count_steps, 0);
}

TEST(ResolveTrainingOptionsTest, WithoutDirectoriesOnlyTheStepCounterRuns) {
  th::ResolvedTrainingOptions r = th::resolve_training_options({});
  EXPECT_EQ(r.checkpoint_dir, "");
  EXPECT_EQ(r.summary_dir, "");
  EXPECT_FALSE(r.save_checkpoint_secs || r.save_checkpoint_steps);
  EXPECT_FALSE(r.save_summaries_secs || r.save_summaries_steps);
  EXPECT_EQ(r.log_step_count_steps, 100);
}

TEST(ResolveTrainingOptionsTest, AWorkerGetsNoDefaultHooksAndNoRestore) {
  th::ResolvedTrainingOptions r =
      th::resolve_training_options({.is_chief = false, .checkpoint_dir = "ckpt"});
  EXPECT_FALSE(r.is_chief);
  EXPECT_EQ(r.checkpoint_dir, "");
  EXPECT_EQ(r.summary_dir, "");
  EXPECT_EQ(r.log_step_count_steps, 0);
  EXPECT_FALSE(r.save_checkpoint_secs || r.save_checkpoint_steps);
  EXPECT_TRUE(r.add_preemption_hook);
}

TEST(ResolveTrainingOptionsTest, AProgramsOwnPreemptionHookReplacesTheDefault) {
  auto own = std::make_shared<th::PreemptionHook>();
  EXPECT_FALSE(th::resolve_training_options({.hooks = {own}}).add_preemption_hook);
  EXPECT_FALSE(th::resolve_training_options({.chief_only_hooks = {own}}).add_preemption_hook);
  // A worker does not run chief_only_hooks, so it still gets one.
  EXPECT_TRUE(th::resolve_training_options({.is_chief = false, .chief_only_hooks = {own}})
                  .add_preemption_hook);
  EXPECT_FALSE(
      th::resolve_training_options({.handle_preemption_signals = false}).add_preemption_hook);
}

TEST(ResolveTrainingOptionsTest, ValidatesWithTfTexts) {
  using th::testing::error_message;
  EXPECT_EQ(error_message<th::InvalidArgument>([] {
              th::resolve_training_options(
                  {.checkpoint_dir = "c", .checkpoints = {.save_secs = 1, .save_steps = 1}});
            }),
            "Can not provide both save_checkpoint_secs and save_checkpoint_steps.");
  EXPECT_EQ(error_message<th::InvalidArgument>([] {
              th::resolve_training_options(
                  {.checkpoint_dir = "c", .summaries = {.save_steps = 1, .save_secs = 1}});
            }),
            "Can not provide both save_summaries_secs and save_summaries_steps.");
  EXPECT_EQ(error_message<th::InvalidArgument>(
                [] { th::resolve_training_options({.checkpoints = {.save_steps = 5}}); }),
            "MonitoredTrainingSession: checkpoint options were given without checkpoint_dir");
  EXPECT_EQ(
      error_message<th::InvalidArgument>([] {
        th::resolve_training_options({.checkpoint_dir = "c", .checkpoints = {.save_steps = -5}});
      }),
      "Invalid checkpoints.save_steps: -5");
}

}  // namespace training_session_test
