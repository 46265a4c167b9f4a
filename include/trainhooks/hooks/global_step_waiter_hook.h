// GlobalStepWaiterHook: delays a worker's start until the global step reaches a value (TF's).
//
// The first before_run blocks, polling the global step every 0.5 s through the Env's sleeper,
// until it is >= wait_until_step, logging `Waiting for global step N before starting training.`
// and, every 1000 steps of progress, `Waiting for global step N before starting training.
// Current step is M.`. wait_until_step <= 0 never waits. Later runs are not delayed.
//
//   hooks.push_back(std::make_shared<th::GlobalStepWaiterHook>(rank * 100));
#pragma once

#include <cstdint>

#include "trainhooks/hook.h"

namespace trainhooks {

class GlobalStepWaiterHook : public SessionRunHook {
 public:
  explicit GlobalStepWaiterHook(int64_t wait_until_step);

  void begin() override;
  SessionRunArgs before_run(SessionRunContext& run_context) override;
  Calls calls() const override { return {.after_run = false}; }

 private:
  int64_t wait_until_step_;
  bool worker_is_started_ = false;
};

}  // namespace trainhooks
