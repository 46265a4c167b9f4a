// ReplicaConsistencyHook: every every_n_steps global steps, after the run, checks that every rank
// holds the chief's variables bit for bit (as synchronous data-parallel training keeps them: the
// same start, the same averaged gradients, the same optimizer). On a difference every rank fails
// at the same step with InternalError naming the first variable that differs and the ranks that
// differ from the chief, e.g.
//   ReplicaConsistencyHook: at global step 40 variable 'w' differs from rank 0's on ranks 1
// so no rank is left waiting. Costs one broadcast per variable and one small allreduce.
//
//   hooks.push_back(std::make_shared<th::distributed::ReplicaConsistencyHook>(pg, 100));
#pragma once

#include <cstdint>
#include <memory>

#include "trainhooks/hook.h"

namespace trainhooks::distributed {

class ProcessGroup;

class ReplicaConsistencyHook : public SessionRunHook {
 public:
  // InvalidArgument naming every_n_steps unless it is positive, or when `group` is null.
  ReplicaConsistencyHook(std::shared_ptr<ProcessGroup> group, int64_t every_n_steps);

  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  Calls calls() const override { return {.before_run = false}; }

  // How many checks passed.
  int64_t checks() const { return checks_; }

 private:
  std::shared_ptr<ProcessGroup> group_;
  int64_t every_n_steps_;
  int64_t checks_ = 0;
};

}  // namespace trainhooks::distributed
