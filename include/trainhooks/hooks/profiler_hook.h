// ProfilerHook: records chosen steps with LibTorch's profiler and writes each as a Chrome trace
// (TF's ProfilerHook, which writes `timeline-<step>.json` from the step's RunMetadata).
//
// Triggers as TF's: never on the first run (its global step starts the timer); then on a run
// when its SecondOrStepTimer triggers for the step the run produces (the global step before it
// plus one), so save_steps = 2 over 5 runs from global step 0 traces the runs that produce steps
// 2 and 4. On a triggering run before_run turns on the profiler of the calling thread (LibTorch's
// legacy autograd profiler, CPU events: every ATen operator, the autograd engine's backward
// nodes) and after_run turns it off and writes `<output_dir>/timeline-<global step>.json`
// crash-safely. Other runs read the global step (and, with save_secs, the Env clock) and nothing
// else: no profiler callback is installed outside the traced runs.
//
// The file is the Chrome trace event format ({"traceEvents": [...]}): a complete ("X") event per
// operator range with its thread, start and duration in microseconds from the start of the run.
// show_dataflow adds each operator's input shapes ("Input Dims") and flow arrows from a forward
// operator to the backward node it produced (matched by autograd sequence number); show_memory
// adds a counter of the CPU memory allocated during the run. Open the file in chrome://tracing
// (Load) or https://ui.perfetto.dev (Open trace file).
//
// A traced run that throws leaves the profiler on; the next before_run, end() or the destructor
// turns it off and discards what it recorded. Needs a global step.
//
//   hooks.push_back(std::make_shared<th::ProfilerHook>(
//       th::ProfilerHookOptions{.save_steps = 1000, .output_dir = "runs/exp1"}));
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "trainhooks/hook.h"
#include "trainhooks/timer.h"

namespace trainhooks {

struct ProfilerHookOptions {
  // Exactly one of the two, positive.
  std::optional<int64_t> save_steps;
  std::optional<double> save_secs;
  // Where timeline-<step>.json files go; created when missing. Required.
  std::string output_dir;
  bool show_dataflow = true;
  bool show_memory = false;
};

class ProfilerHook : public SessionRunHook {
 public:
  // InvalidArgument naming the options: TF's texts for save_steps / save_secs, and
  // "ProfilerHook: output_dir must name a directory".
  explicit ProfilerHook(ProfilerHookOptions options);
  ~ProfilerHook() override;
  ProfilerHook(const ProfilerHook&) = delete;
  ProfilerHook& operator=(const ProfilerHook&) = delete;

  void begin() override;
  SessionRunArgs before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  void end(Session& session) override;

  // The path of the trace of `step`: <output_dir>/timeline-<step>.json.
  std::string timeline_path(int64_t step) const;

 private:
  void stop_profiler();  // discards what was recorded

  ProfilerHookOptions options_;
  SecondOrStepTimer timer_;
  bool first_run_ = true;
  int64_t first_step_ = 0;  // the global step the first run started from
  bool tracing_ = false;    // the profiler is on for this run
};

}  // namespace trainhooks
