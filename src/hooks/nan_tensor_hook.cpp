#include "trainhooks/hooks/nan_tensor_hook.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/isinf.h>
#include <ATen/ops/isnan.h>

#include <cmath>

#include "trainhooks/errors.h"
#include "trainhooks/graph.h"

namespace trainhooks {

NanTensorHook::NanTensorHook(NodeRef loss, NanTensorHookOptions options)
    : loss_ref_(std::move(loss)), options_(options) {}

void NanTensorHook::begin() { loss_ = graph().resolve(loss_ref_); }

SessionRunArgs NanTensorHook::before_run(SessionRunContext&) { return {loss_}; }

void NanTensorHook::after_run(SessionRunContext& ctx, const SessionRunValues& values) {
  const at::Tensor& loss = values.results[loss_];
  bool nan, inf;
  if (loss.numel() == 1) {
    double v = loss.item<double>();
    nan = std::isnan(v);
    inf = std::isinf(v);
  } else {
    nan = at::isnan(loss).any().item<bool>();
    inf = options_.fail_on_inf && at::isinf(loss).any().item<bool>();
  }
  if (!nan && !(options_.fail_on_inf && inf)) return;
  const char* message = nan ? "Model diverged with loss = NaN." : "Model diverged with loss = Inf.";
  if (options_.fail_on_nan_loss) {
    env().error(message);
    if (nan) throw NanLossDuringTrainingError();
    throw NanLossDuringTrainingError("Inf loss during training.");
  }
  env().warning(message);
  ctx.request_stop();
}

}  // namespace trainhooks
