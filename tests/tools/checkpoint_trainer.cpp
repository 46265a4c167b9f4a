// A training process for the checkpoint tests: they start it, signal it, kill it and restart it
// over one checkpoint directory, then compare what it dumps.
//
// Trains CheckpointModel (dropout, Adam, shuffled input) in MonitoredTrainingSession with
// checkpoint_dir = DIR, save_checkpoint_steps = S and the hooks StopAtStepHook(last_step = L),
// a progress hook and PreemptionHook. After every step it prints `step N` (flushed), then sleeps
// MS milliseconds if asked to, so that a test can signal it during a step. On a normal end, and
// after SIGTERM or SIGINT, it returns 0; with --dump it then writes the final training state
// (see checkpoint_model.h) to PATH. The log goes to stderr.
//
//   checkpoint_trainer --dir DIR --last-step L --save-steps S [--step-sleep-ms MS] [--dump PATH]
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "tools/checkpoint_model.h"
#include "trainhooks/hooks/preemption_hook.h"
#include "trainhooks/hooks/stop_at_step_hook.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;

namespace {

// Prints the step, then sleeps: the print happens before the sleep so that a test knows a step
// finished and can signal the process while it sleeps.
class ProgressHook : public th::SessionRunHook {
 public:
  explicit ProgressHook(int sleep_ms) : sleep_ms_(sleep_ms) {}
  void after_run(th::SessionRunContext& ctx, const th::SessionRunValues&) override {
    std::printf("step %lld\n", static_cast<long long>(ctx.session().global_step()));
    std::fflush(stdout);
    if (sleep_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms_));
  }

 private:
  int sleep_ms_;
};

int usage(const std::string& message) {
  std::cerr << message << "\nusage: checkpoint_trainer --dir DIR --last-step L --save-steps S "
            << "[--step-sleep-ms MS] [--dump PATH]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, dump;
  int64_t last_step = -1, save_steps = -1;
  int sleep_ms = 0;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return usage("missing value for " + flag);
    const char* value = argv[i + 1];
    if (flag == "--dir")
      dir = value;
    else if (flag == "--last-step")
      last_step = std::atoll(value);
    else if (flag == "--save-steps")
      save_steps = std::atoll(value);
    else if (flag == "--step-sleep-ms")
      sleep_ms = std::atoi(value);
    else if (flag == "--dump")
      dump = value;
    else
      return usage("unknown flag " + flag);
  }
  if (dir.empty() || last_step < 0 || save_steps <= 0) return usage("missing flags");

  // One thread: results must not depend on how work is split, and tests run several of these.
  torch::set_num_threads(1);
  try {
    auto m = th::testing::CheckpointModel::make();
    {
      th::MonitoredTrainingSession sess(
          m->g, {.checkpoint_dir = dir,
                 .hooks = {std::make_shared<th::StopAtStepHook>(
                               th::StopAtStepHookOptions{.last_step = last_step}),
                           std::make_shared<ProgressHook>(sleep_ms),
                           std::make_shared<th::PreemptionHook>()},
                 .checkpoints = {.save_steps = save_steps},
                 .summaries = {.save_steps = 0, .log_step_count_steps = 0}});
      while (!sess.should_stop()) sess.run(m->train);
    }  // closing saves the final checkpoint
    if (!dump.empty()) th::testing::save_training_state(m->g, m->train, dump);
  } catch (const std::exception& e) {
    std::cerr << "checkpoint_trainer: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
