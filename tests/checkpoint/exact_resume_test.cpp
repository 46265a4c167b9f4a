// Resuming from a checkpoint is bit-identical to not stopping: N steps straight and k steps, a
// new process, then up to N again give equal variables, Adam state, global step, input position
// and RNG state. The model has dropout and a shuffled input, so a resume that failed to restore
// the RNG state or the input position would diverge.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "checkpoint/child_process.h"
#include "test_util.h"
#include "tools/checkpoint_model.h"
#include "trainhooks/hooks/stop_at_step_hook.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;
using ::testing::Contains;
using ::testing::HasSubstr;

namespace exact_resume_test {

using State = std::map<std::string, at::Tensor>;

// The tests below move the process-wide CPU RNG (the model seeds it, restores set it): keep it
// for the other tests of this binary.
class ExactResumeTest : public ::testing::Test {
 protected:
  // Trains CheckpointModel in this process, as checkpoint_trainer does, and returns its state.
  State train_in_process(const std::string& dir, int64_t last_step, th::Hooks extra = {}) {
    auto m = th::testing::CheckpointModel::make();
    th::Hooks hooks{
        std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.last_step = last_step})};
    hooks.insert(hooks.end(), extra.begin(), extra.end());
    {
      th::MonitoredTrainingSession sess(m->g,
                                        {.checkpoint_dir = dir,
                                         .hooks = hooks,
                                         .checkpoints = {.save_steps = 7},
                                         .summaries = {.save_steps = 0, .log_step_count_steps = 0},
                                         .env = fe.env()});
      while (!sess.should_stop()) sess.run(m->train);
    }
    return th::testing::training_state(m->g, m->train);
  }

  th::testing::FakeEnv fe;
  th::testing::CpuRngGuard rng_guard_;
};

constexpr int64_t kLastStep = 40;  // five epochs of eight batches
constexpr int64_t kStopStep = 19;  // mid-epoch, between two periodic saves

TEST_F(ExactResumeTest, ChildProcessResumedAfterExitMatchesAStraightRun) {
  th::testing::TempDir tmp;
  const std::string straight_dir = tmp.file("straight"), resumed_dir = tmp.file("resumed");
  const std::string log = tmp.file("log.txt");
  const std::string last = std::to_string(kLastStep);

  auto straight = th::testing::run_trainer(
      {"--dir", straight_dir, "--last-step", last, "--save-steps", "7", "--dump", tmp.file("a.pt")},
      log);
  ASSERT_TRUE(straight.exited_cleanly()) << th::testing::read_text(log);
  EXPECT_EQ(th::testing::printed_steps(straight.lines).back(), kLastStep);

  auto first = th::testing::run_trainer(
      {"--dir", resumed_dir, "--last-step", std::to_string(kStopStep), "--save-steps", "7"}, log);
  ASSERT_TRUE(first.exited_cleanly()) << th::testing::read_text(log);
  EXPECT_EQ(th::testing::printed_steps(first.lines).back(), kStopStep);

  const std::string second_log = tmp.file("second.txt");
  auto second = th::testing::run_trainer(
      {"--dir", resumed_dir, "--last-step", last, "--save-steps", "7", "--dump", tmp.file("b.pt")},
      second_log);
  ASSERT_TRUE(second.exited_cleanly()) << th::testing::read_text(second_log);
  const auto steps = th::testing::printed_steps(second.lines);
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.front(), kStopStep + 1);
  EXPECT_EQ(steps.back(), kLastStep);
  EXPECT_THAT(th::testing::read_text(second_log),
              HasSubstr("Restoring parameters from " + resumed_dir + "/model.ckpt-" +
                        std::to_string(kStopStep) + "\n"));

  const State a = th::testing::load_training_state(tmp.file("a.pt"));
  const State b = th::testing::load_training_state(tmp.file("b.pt"));
  // Every part of the state is there: 4 variables, 4 x 3 Adam entries, step, input, RNG.
  EXPECT_EQ(a.size(), 4u + 12u + 3u);
  EXPECT_EQ(a.at("adam/0/step").item<int64_t>(), kLastStep);
  EXPECT_EQ(th::testing::state_differences(a, b), "");
}

TEST_F(ExactResumeTest, InProcessResumeMatchesAStraightRun) {
  th::testing::TempDir tmp;
  const State straight = train_in_process(tmp.file("straight"), kLastStep);
  train_in_process(tmp.file("resumed"), kStopStep);
  const State resumed = train_in_process(tmp.file("resumed"), kLastStep);
  EXPECT_THAT(fe.log->messages(), Contains("Restoring parameters from " + tmp.file("resumed") +
                                           "/model.ckpt-" + std::to_string(kStopStep)));
  EXPECT_EQ(resumed.at("global_step").item<int64_t>(), kLastStep);
  EXPECT_EQ(th::testing::state_differences(straight, resumed), "");
}

// Changes what a restore restored, to show that the comparison above would see it.
struct PerturbAfterRestore : th::SessionRunHook {
  bool rng = false;
  void after_create_session(th::Session& session, th::Coordinator&) override {
    if (rng) {
      at::Generator gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_current_seed(12345);
    } else {
      th::Graph& g = session.graph();
      g.set_input_position(g.inputs().at(0), {});
    }
  }
};

TEST_F(ExactResumeTest, ResumeWithoutRngStateOrInputPositionWouldDiverge) {
  th::testing::TempDir tmp;
  const State straight = train_in_process(tmp.file("straight"), kLastStep);
  for (bool rng : {true, false}) {
    SCOPED_TRACE(rng ? "RNG state reseeded" : "input position reset");
    const std::string dir = tmp.file(rng ? "rng" : "input");
    train_in_process(dir, kStopStep);
    auto perturb = std::make_shared<PerturbAfterRestore>();
    perturb->rng = rng;
    const State resumed = train_in_process(dir, kLastStep, {perturb});
    EXPECT_THAT(th::testing::state_differences(straight, resumed),
                HasSubstr("var/net/0.weight: differs"));
  }
}

}  // namespace exact_resume_test
