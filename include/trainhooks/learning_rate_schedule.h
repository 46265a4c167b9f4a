// LearningRateSchedule: the learning rate as a function of the global step.
//
// A small value type: copying one copies a shared pointer to an immutable function, so schedules
// are cheap to pass around and to compose (linear_warmup wraps any schedule). Calling one does
// not allocate. The factories below compute TensorFlow's formulas (tf.compat.v1.train.*_decay and
// the Keras LearningRateSchedule classes of the same names) in double precision; step is the
// global step, and a negative step counts as 0. Each factory validates its arguments and throws
// InvalidArgument naming the factory and the argument:
//   "exponential_decay: decay_steps must be positive, got 0"
//
//   auto lr = th::linear_warmup(500, th::cosine_decay(0.1, 10000));
//   lr(0);     // 0
//   lr(250);   // 0.05, half-way up the warm-up
//   lr(500);   // 0.1, the cosine decay's first value
//   lr.describe();  // "linear_warmup(warmup_steps=500, initial_learning_rate=0, after=...)"
//
// LearningRateScheduleHook (hooks/learning_rate_schedule_hook.h) applies a schedule to a train
// op's optimizer before every step. Thread safety: a schedule may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace trainhooks {

class LearningRateSchedule {
 public:
  // A schedule of the caller's own: `fn` must be safe to call from any thread, and return a
  // finite, non-negative rate (LearningRateScheduleHook rejects any other). `description` is
  // what describe() returns.
  LearningRateSchedule(std::function<double(int64_t global_step)> fn, std::string description);

  // The learning rate for the step that runs at `global_step`.
  double operator()(int64_t global_step) const {
    return impl_->fn(global_step < 0 ? 0 : global_step);
  }
  // One line for logs, e.g. "cosine_decay(learning_rate=0.1, decay_steps=1000, alpha=0)".
  const std::string& describe() const { return impl_->description; }

 private:
  struct Impl {
    std::function<double(int64_t)> fn;
    std::string description;
  };
  std::shared_ptr<const Impl> impl_;  // Shared: copies are cheap and the function is immutable.
};

// learning_rate at every step.
LearningRateSchedule constant(double learning_rate);

// learning_rate * decay_rate ^ (step / decay_steps); with staircase, the exponent is
// floor(step / decay_steps), so the rate drops once every decay_steps.
LearningRateSchedule exponential_decay(double learning_rate, int64_t decay_steps, double decay_rate,
                                       bool staircase = false);

// values[0] while step <= boundaries[0], values[i] while boundaries[i-1] < step <= boundaries[i],
// values.back() once step > boundaries.back(). A boundary step still gets the earlier value (as
// in TF). boundaries: non-empty, strictly increasing; values: one more than boundaries.
LearningRateSchedule piecewise_constant(std::vector<int64_t> boundaries,
                                        std::vector<double> values);

// (learning_rate - end_learning_rate) * (1 - p) ^ power + end_learning_rate, where
// p = min(step, decay_steps) / decay_steps, so the rate stays at end_learning_rate after
// decay_steps. With cycle, p = step / (decay_steps * ceil(step / decay_steps)) instead (the
// multiplier is 1 at step 0): the decay restarts, each time over a longer span.
LearningRateSchedule polynomial_decay(double learning_rate, int64_t decay_steps,
                                      double end_learning_rate = 0.0001, double power = 1.0,
                                      bool cycle = false);

// learning_rate * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)) +
// alpha): from learning_rate down to alpha * learning_rate in decay_steps, then flat.
LearningRateSchedule cosine_decay(double learning_rate, int64_t decay_steps, double alpha = 0);

// SGDR, cosine decay with warm restarts (TF's cosine_decay_restarts): the first period lasts
// first_decay_steps, each later one t_mul times longer and starting m_mul times lower. In period
// i, with f the fraction of it completed:
//   learning_rate * ((1 - alpha) * m_mul^i * 0.5 * (1 + cos(pi * f)) + alpha).
// A restart step begins the new period (f = 0). TF finds the period with a logarithm; here the
// period found is corrected so that a restart step is never counted in the period before it.
LearningRateSchedule cosine_decay_restarts(double learning_rate, int64_t first_decay_steps,
                                           double t_mul = 2.0, double m_mul = 1.0,
                                           double alpha = 0);

// learning_rate / (1 + decay_rate * step / decay_steps); with staircase,
// learning_rate / (1 + decay_rate * floor(step / decay_steps)).
LearningRateSchedule inverse_time_decay(double learning_rate, int64_t decay_steps,
                                        double decay_rate, bool staircase = false);

// Linear warm-up in front of any schedule. For step < warmup_steps the rate rises linearly from
// initial_learning_rate (at step 0) towards after(0):
//   initial_learning_rate + (after(0) - initial_learning_rate) * step / warmup_steps
// and from warmup_steps on it is after(step - warmup_steps): the wrapped schedule starts when the
// warm-up ends (its step counter is offset by warmup_steps), so a cosine_decay(0.1, 10000) after
// 500 warm-up steps reaches its end at step 10500, and the rate is continuous at warmup_steps.
// warmup_steps = 0 is `after` itself.
LearningRateSchedule linear_warmup(int64_t warmup_steps, LearningRateSchedule after,
                                   double initial_learning_rate = 0);

// A schedule planned to end at old_end, re-planned at from_step to end at new_end instead: the
// same rates up to from_step, then the rest of `schedule` (from_step to old_end) stretched or
// compressed over from_step to new_end:
//   step < from_step:  schedule(step)
//   otherwise:         schedule(from_step + (step - from_step) * (old_end - from_step)
//                                            / (new_end - from_step))   (integer division)
// so the rate is continuous at from_step and reaches schedule(old_end) exactly at new_end, a
// warm-up still in progress keeps its shape, and re-planning again wraps the result. Integer
// arithmetic: the same steps give the same rates on every run (a resumed run rebuilds it).
// Requires from_step >= 0, old_end > from_step and new_end > from_step.
LearningRateSchedule rescaled(LearningRateSchedule schedule, int64_t from_step, int64_t old_end,
                              int64_t new_end);

}  // namespace trainhooks
