// A training process signalled with SIGTERM or SIGINT stops after its current step, saves a
// final checkpoint at that step and exits 0; a second signal ends it at once.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "checkpoint/child_process.h"
#include "test_util.h"
#include "tools/checkpoint_model.h"
#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/checkpoint/checkpoint_state.h"
#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/preemption.h"
#include "trainhooks/session.h"

namespace th = trainhooks;
using ::testing::HasSubstr;

namespace preemption_test {

bool is_step_line(const std::string& line) { return line.rfind("step ", 0) == 0; }

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Whether `sig` is still pending for process `pid` (not yet taken by any of its threads).
bool signal_pending(pid_t pid, int sig) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  const uint64_t bit = uint64_t{1} << (sig - 1);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("SigPnd:", 0) == 0 || line.rfind("ShdPnd:", 0) == 0) {
      if (std::stoull(line.substr(7), nullptr, 16) & bit) return true;
    }
  }
  return false;
}

class PreemptionTest : public ::testing::TestWithParam<int> {};

TEST_P(PreemptionTest, StopsAfterTheCurrentStepSavesAndExitsZero) {
  const int sig = GetParam();
  const std::string name = th::signal_name(sig);
  th::testing::TempDir tmp;
  const std::string dir = tmp.file("ckpt"), log = tmp.file("log.txt");
  int64_t last_printed = 0;
  {
    // Periodic saves are rare: the checkpoint at the last step can only be the final one.
    th::testing::ChildProcess child(
        th::testing::trainer_argv({"--dir", dir, "--last-step", "1000000", "--save-steps", "100000",
                                   "--step-sleep-ms", "20"}),
        log);
    ASSERT_TRUE(child.wait_for_line([](const std::string& l) { return l == "step 3"; }, 60))
        << th::testing::read_text(log);
    const auto start = std::chrono::steady_clock::now();
    child.send(sig);
    const auto status = child.wait(60);
    ASSERT_TRUE(status) << "still running 60 s after " << name;
    ASSERT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
        << th::testing::describe_status(*status) << "\n"
        << th::testing::read_text(log);
    std::cout << "[          ] exited " << seconds_since(start) << " s after " << name << "\n";
    const auto steps = th::testing::printed_steps(child.lines());
    ASSERT_FALSE(steps.empty());
    last_printed = steps.back();
  }
  EXPECT_GE(last_printed, 3);
  const std::string text = th::testing::read_text(log);
  const std::string newest = dir + "/model.ckpt-" + std::to_string(last_printed);
  EXPECT_THAT(text, HasSubstr("INFO:trainhooks:Received " + name + ": stopping after step " +
                              std::to_string(last_printed) + " and saving a final checkpoint.\n"));
  EXPECT_THAT(text, HasSubstr("Saving checkpoints for " + std::to_string(last_printed) + " into " +
                              dir + "/model.ckpt.\n"));

  // The newest listed checkpoint is that step, and it restores.
  const auto state = th::get_checkpoint_state(dir);
  ASSERT_TRUE(state);
  EXPECT_EQ(state->model_checkpoint_path, newest);
  EXPECT_EQ(th::latest_checkpoint(dir), newest);
  {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    at::Tensor rng;
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      rng = gen.get_state();
    }
    auto m = th::testing::CheckpointModel::make();
    th::Session sess(m->g);
    th::testing::FakeEnv fe;  // keeps the restore's log line out of the test output
    th::Saver saver(m->g, {.env = fe.env()});
    EXPECT_NO_THROW(saver.restore(sess, newest));
    EXPECT_EQ(m->g.global_step_value(), last_printed);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(rng);
  }

  // A restart continues from there.
  const auto next = th::testing::run_trainer(
      {"--dir", dir, "--last-step", std::to_string(last_printed + 2), "--save-steps", "100000"},
      log);
  ASSERT_TRUE(next.exited_cleanly()) << th::testing::read_text(log);
  EXPECT_EQ(th::testing::printed_steps(next.lines),
            (std::vector<int64_t>{last_printed + 1, last_printed + 2}));
}

INSTANTIATE_TEST_SUITE_P(Signals, PreemptionTest, ::testing::Values(SIGTERM, SIGINT),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return th::signal_name(info.param);
                         });

// Two signals while a step sleeps for a minute: the process ends with the second one at once.
TEST(PreemptionSecondSignalTest, EndsTheProcessAtOnceWithTheSecondSignal) {
  for (int first : {SIGTERM, SIGINT}) {
    const std::string name = th::signal_name(first);
    SCOPED_TRACE("first signal " + name);
    th::testing::TempDir tmp;
    const std::string log = tmp.file("log.txt");
    th::testing::ChildProcess child(
        th::testing::trainer_argv({"--dir", tmp.file("ckpt"), "--last-step", "1000000",
                                   "--save-steps", "100000", "--step-sleep-ms", "60000"}),
        log);
    ASSERT_TRUE(child.wait_for_line(is_step_line, 60)) << th::testing::read_text(log);
    const auto start = std::chrono::steady_clock::now();
    child.send(first);
    // Two signals of one kind sent before the first is delivered would merge into one.
    for (int i = 0; i < 500 && signal_pending(child.pid(), first); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_FALSE(signal_pending(child.pid(), first));
    child.send(SIGTERM);
    const auto status = child.wait(20);
    ASSERT_TRUE(status) << "still running 20 s after two signals";
    // Either signal may end it. A signal stops being pending when a thread takes it, before
    // that thread's handler has recorded it: on a busy machine the SIGTERM sent next can be
    // recorded first, and then the first signal is the second one the process sees.
    EXPECT_TRUE(WIFSIGNALED(*status) &&
                (WTERMSIG(*status) == SIGTERM || WTERMSIG(*status) == first))
        << th::testing::describe_status(*status) << "\n"
        << th::testing::read_text(log);
    EXPECT_LT(seconds_since(start), 20);
    // It ended during the step's sleep: no further step, no stop message.
    EXPECT_EQ(th::testing::printed_steps(child.lines()), (std::vector<int64_t>{1}));
    EXPECT_THAT(th::testing::read_text(log), ::testing::Not(HasSubstr("Received")));
  }
}

}  // namespace preemption_test
