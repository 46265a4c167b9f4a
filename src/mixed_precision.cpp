#include "trainhooks/mixed_precision.h"

#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <fmt/format.h>

#include <utility>

#include "trainhooks/errors.h"

namespace trainhooks {

namespace {

void check_dtype(c10::ScalarType dtype) {
  if (dtype != c10::ScalarType::BFloat16) {
    throw InvalidArgument(fmt::format(
        "autocast: LibTorch's CPU autocast supports bfloat16 only, got {}", c10::toString(dtype)));
  }
}

}  // namespace

AutocastScope::AutocastScope(c10::ScalarType dtype)
    : previous_enabled_(at::autocast::is_cpu_enabled()),
      previous_dtype_(at::autocast::get_autocast_cpu_dtype()) {
  check_dtype(dtype);
  at::autocast::set_cpu_enabled(true);
  at::autocast::set_autocast_cpu_dtype(dtype);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  // The weights cast for this region are cached until the outermost region ends.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_cpu_enabled(previous_enabled_);
  at::autocast::set_autocast_cpu_dtype(previous_dtype_);
}

OpFn autocast(OpFn fn, AutocastOptions options) {
  check_dtype(options.dtype);
  if (!fn) throw InvalidArgument("autocast: the function is empty.");
  return [fn = std::move(fn), options](Run& r) {
    at::Tensor out;
    {
      AutocastScope scope(options.dtype);
      out = fn(r);
    }
    if (options.float_output && out.defined() && out.scalar_type() == options.dtype)
      out = out.to(at::kFloat);
    return out;
  };
}

}  // namespace trainhooks
