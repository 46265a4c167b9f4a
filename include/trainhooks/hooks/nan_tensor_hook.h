// NanTensorHook: stops training when the loss is NaN (TF's).
//
// Fetches the loss every run. A NaN either throws NanLossDuringTrainingError ("NaN loss during
// training."), after logging the error `Model diverged with loss = NaN.`, or (fail_on_nan_loss =
// false) logs that line as a warning and requests a stop. With fail_on_inf, +-inf does the same
// with "Inf" in both texts.
//
//   hooks.push_back(std::make_shared<th::NanTensorHook>(loss));
#pragma once

#include "trainhooks/hook.h"

namespace trainhooks {

struct NanTensorHookOptions {
  bool fail_on_nan_loss = true;
  bool fail_on_inf = false;  // beyond TF: treat +-inf as divergence too
};

class NanTensorHook : public SessionRunHook {
 public:
  explicit NanTensorHook(NodeRef loss, NanTensorHookOptions options = {});

  void begin() override;
  SessionRunArgs before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;

 private:
  NodeRef loss_ref_;
  Node loss_;
  NanTensorHookOptions options_;
};

}  // namespace trainhooks
