#include "trainhooks/hooks/profiler_hook.h"

#include <ATen/record_function.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_legacy.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "util/atomic_file.h"

namespace trainhooks {

namespace {

namespace profiler = torch::autograd::profiler;
using profiler::EventKind;
using profiler::LegacyEvent;

// The Chrome trace of one run's events (every thread's list, as the profiler returns them).
nlohmann::json chrome_trace(const profiler::thread_event_lists& lists, int64_t step,
                            const ProfilerHookOptions& options) {
  const LegacyEvent* start = nullptr;
  for (const auto& list : lists) {
    for (const auto& e : list) {
      if (e.kind() == EventKind::Mark && std::string_view(e.name()) == "__start_profile") {
        start = &e;
        break;
      }
    }
    if (start) break;
  }
  auto events = nlohmann::json::array();
  const std::string pid = fmt::format("step {}", step);
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", pid},
                    {"args", {{"name", fmt::format("trainhooks step {}", step)}}}});
  if (!start) return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};

  // A range is a push and the pop with the same handle (on any thread: async ops end elsewhere).
  std::map<std::pair<uint64_t, int>, const LegacyEvent*> open;
  // Forward operators by autograd sequence number (the outermost: the first to start).
  std::map<int64_t, std::pair<double, uint64_t>> forward;  // seq -> (ts, tid)
  struct Backward {
    int64_t seq;
    double ts;
    uint64_t tid;
  };
  std::vector<Backward> backward;
  int64_t allocated = 0;
  for (const auto& list : lists) {
    for (const auto& e : list) {
      switch (e.kind()) {
        case EventKind::PushRange:
          open[{e.handle(), e.nodeId()}] = &e;
          break;
        case EventKind::PopRange: {
          auto it = open.find({e.handle(), e.nodeId()});
          if (it == open.end()) break;
          const LegacyEvent& push = *it->second;
          open.erase(it);
          const double ts = start->cpuElapsedUs(push);
          nlohmann::json event = {
              {"name", push.name()},
              {"cat", push.scope() == static_cast<uint8_t>(at::RecordScope::BACKWARD_FUNCTION)
                          ? "backward"
                          : "operator"},
              {"ph", "X"},
              {"ts", ts},
              {"dur", push.cpuElapsedUs(e)},
              {"pid", pid},
              {"tid", push.threadId()}};
          if (options.show_dataflow) {
            nlohmann::json args = nlohmann::json::object();
            const auto shapes = push.shapes();
            if (!shapes.empty()) args["Input Dims"] = shapes;
            if (push.sequenceNr() >= 0) args["Sequence number"] = push.sequenceNr();
            event["args"] = std::move(args);
            if (push.sequenceNr() >= 0) {
              if (push.scope() == static_cast<uint8_t>(at::RecordScope::BACKWARD_FUNCTION)) {
                backward.push_back({push.sequenceNr(), ts, push.threadId()});
              } else {
                auto [f, inserted] = forward.try_emplace(push.sequenceNr(), ts, push.threadId());
                if (!inserted && ts < f->second.first) f->second = {ts, push.threadId()};
              }
            }
          }
          events.push_back(std::move(event));
          break;
        }
        case EventKind::MemoryAlloc:
          if (!options.show_memory) break;
          allocated += e.cpuMemoryUsage();
          events.push_back({{"name", "CPU memory allocated"},
                            {"ph", "C"},
                            {"ts", start->cpuElapsedUs(e)},
                            {"pid", pid},
                            {"args", {{"bytes", allocated}}}});
          break;
        case EventKind::Mark:
          break;
      }
    }
  }
  // Forward -> backward arrows, as PyTorch's own traces draw them.
  for (const auto& b : backward) {
    const auto f = forward.find(b.seq);
    if (f == forward.end()) continue;
    events.push_back({{"name", "fwd_bwd"},
                      {"cat", "fwd_bwd"},
                      {"ph", "s"},
                      {"id", b.seq},
                      {"ts", f->second.first},
                      {"pid", pid},
                      {"tid", f->second.second}});
    events.push_back({{"name", "fwd_bwd"},
                      {"cat", "fwd_bwd"},
                      {"ph", "f"},
                      {"bp", "e"},
                      {"id", b.seq},
                      {"ts", b.ts},
                      {"pid", pid},
                      {"tid", b.tid}});
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace

ProfilerHook::ProfilerHook(ProfilerHookOptions options)
    : options_(std::move(options)),
      timer_({.every_secs = options_.save_secs,
              .every_steps = options_.save_steps,
              .owner = "ProfilerHook",
              .secs_name = "save_secs",
              .steps_name = "save_steps"}) {
  if (options_.output_dir.empty())
    throw InvalidArgument("ProfilerHook: output_dir must name a directory");
}

ProfilerHook::~ProfilerHook() {
  try {
    stop_profiler();
  } catch (...) {  // NOLINT: a destructor must not throw; nothing is lost but a partial trace
  }
}

std::string ProfilerHook::timeline_path(int64_t step) const {
  return fmt::format("{}/timeline-{}.json", options_.output_dir, step);
}

void ProfilerHook::stop_profiler() {
  if (!tracing_) return;
  tracing_ = false;
  profiler::disableProfilerLegacy();
}

void ProfilerHook::begin() {
  require_global_step("ProfilerHook");
  stop_profiler();
  reset_timer(timer_);
  first_run_ = true;
  std::error_code ec;
  std::filesystem::create_directories(options_.output_dir, ec);
  if (ec) {
    throw FailedPreconditionError(fmt::format("ProfilerHook: cannot create output_dir {}: {}",
                                              options_.output_dir, ec.message()));
  }
}

SessionRunArgs ProfilerHook::before_run(SessionRunContext&) {
  stop_profiler();  // left on by a run that threw
  const int64_t step = graph().global_step_value();
  if (first_run_) {
    first_step_ = step;
    return {};
  }
  if (!timer_.should_trigger_for_step(step + 1)) return {};
  profiler::enableProfilerLegacy(torch::profiler::impl::ProfilerConfig(
      torch::profiler::impl::ProfilerState::CPU, /*report_input_shapes=*/options_.show_dataflow,
      /*profile_memory=*/options_.show_memory));
  tracing_ = true;
  return {};
}

void ProfilerHook::after_run(SessionRunContext&, const SessionRunValues&) {
  if (first_run_) {
    first_run_ = false;
    // As TF: the first run is never traced; the step it started from starts the timer.
    timer_.update_last_triggered_step(first_step_);
    return;
  }
  if (!tracing_) return;
  const int64_t step = graph().global_step_value();
  tracing_ = false;
  const auto lists = profiler::disableProfilerLegacy();
  timer_.update_last_triggered_step(step);
  internal::write_file_atomically(timeline_path(step),
                                  chrome_trace(lists, step, options_).dump() + "\n");
}

void ProfilerHook::end(Session&) { stop_profiler(); }

}  // namespace trainhooks
