// Mixed precision on the CPU: a forward pass under LibTorch's CPU autocast, in bfloat16, with the
// variables, their gradients and the optimizer's state kept in float32 (Lightning's
// "bf16-mixed", Keras's "mixed_bfloat16").
//
//   auto logits = g.op("logits", th::autocast([=](th::Run& r) { return net->forward(r[x]); }));
//   auto loss = g.op("loss", [=](th::Run& r) { return torch::cross_entropy_loss(r[logits], r[y]);
//   });
//
// Inside the region, LibTorch casts the inputs of the operations it lists for lower precision
// (convolutions, linear layers, matmul) to bfloat16 and runs the ones it lists for float32
// (losses, softmax, norms) in float32; everything else runs in the type of its inputs. The
// variables stay float32: backward returns float32 gradients to float32 leaves, and checkpoints
// hold float32 tensors as before. On a CPU without bfloat16 instructions bfloat16 may be slower
// than float32 (docs/benchmarks.md has this machine's figures).
#pragma once

#include <c10/core/ScalarType.h>

#include "trainhooks/graph.h"

namespace trainhooks {

struct AutocastOptions {
  // The region's lower precision. LibTorch 1.13's CPU autocast supports bfloat16 only.
  c10::ScalarType dtype = c10::ScalarType::BFloat16;
  // A floating-point result of lower precision becomes float32 again, so that what reads it (a
  // loss, a metric) runs in float32.
  bool float_output = true;
};

// `fn` run under CPU autocast. InvalidArgument for a dtype other than bfloat16.
OpFn autocast(OpFn fn, AutocastOptions options = {});

// CPU autocast in `dtype` for the lifetime of this object, the thread's previous state restored
// after it (nested scopes allowed); the cast weights' cache is cleared when the outermost one ends.
class AutocastScope {
 public:
  explicit AutocastScope(c10::ScalarType dtype = c10::ScalarType::BFloat16);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool previous_enabled_;
  c10::ScalarType previous_dtype_;
};

}  // namespace trainhooks
