// FinalOpsHook: evaluates nodes once in end() and keeps their values (TF's).
//
// An OutOfRangeError from the final run (a final node that reads an input) is logged as a warning
// explaining the cause and rethrown.
//
//   auto final = std::make_shared<th::FinalOpsHook>(th::Fetches{accuracy});
//   ... // after the session closed:
//   float acc = final->final_ops_values()[accuracy].item<float>();
#pragma once

#include "trainhooks/hook.h"

namespace trainhooks {

class FinalOpsHook : public SessionRunHook {
 public:
  explicit FinalOpsHook(Fetches final_ops, Feeds final_ops_feed_dict = {});

  void end(Session& session) override;
  Calls calls() const override { return {.before_run = false, .after_run = false}; }
  // Empty until end() ran.
  const RunResults& final_ops_values() const { return values_; }

 private:
  Fetches final_ops_;
  Feeds feeds_;
  RunResults values_;
};

}  // namespace trainhooks
