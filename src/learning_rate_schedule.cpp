#include "trainhooks/learning_rate_schedule.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string_view>
#include <utility>

#include "trainhooks/errors.h"

namespace trainhooks {

namespace {

void check_rate(std::string_view fn, std::string_view arg, double value) {
  if (std::isfinite(value) && value >= 0) return;
  throw InvalidArgument(
      fmt::format("{}: {} must be a finite, non-negative number, got {}", fn, arg, value));
}

void check_finite_positive(std::string_view fn, std::string_view arg, double value) {
  if (std::isfinite(value) && value > 0) return;
  throw InvalidArgument(
      fmt::format("{}: {} must be a finite, positive number, got {}", fn, arg, value));
}

void check_alpha(std::string_view fn, double alpha) {
  if (alpha >= 0 && alpha <= 1) return;
  throw InvalidArgument(fmt::format("{}: alpha must be in [0, 1], got {}", fn, alpha));
}

const char* bool_text(bool b) { return b ? "true" : "false"; }

}  // namespace

LearningRateSchedule::LearningRateSchedule(std::function<double(int64_t)> fn,
                                           std::string description) {
  if (!fn) throw InvalidArgument("LearningRateSchedule: fn must not be empty");
  impl_ = std::make_shared<const Impl>(Impl{std::move(fn), std::move(description)});
}

LearningRateSchedule constant(double learning_rate) {
  check_rate("constant", "learning_rate", learning_rate);
  return {[learning_rate](int64_t) { return learning_rate; },
          fmt::format("constant(learning_rate={:g})", learning_rate)};
}

LearningRateSchedule exponential_decay(double learning_rate, int64_t decay_steps, double decay_rate,
                                       bool staircase) {
  constexpr std::string_view kFn = "exponential_decay";
  check_rate(kFn, "learning_rate", learning_rate);
  check_positive(kFn, "decay_steps", decay_steps);
  check_finite_positive(kFn, "decay_rate", decay_rate);
  const auto steps = static_cast<double>(decay_steps);
  return {[=](int64_t step) {
            double p = static_cast<double>(step) / steps;
            if (staircase) p = std::floor(p);
            return learning_rate * std::pow(decay_rate, p);
          },
          fmt::format("exponential_decay(learning_rate={:g}, decay_steps={}, decay_rate={:g}, "
                      "staircase={})",
                      learning_rate, decay_steps, decay_rate, bool_text(staircase))};
}

LearningRateSchedule piecewise_constant(std::vector<int64_t> boundaries,
                                        std::vector<double> values) {
  constexpr std::string_view kFn = "piecewise_constant";
  if (boundaries.empty()) throw InvalidArgument("piecewise_constant: boundaries must not be empty");
  if (values.size() != boundaries.size() + 1) {
    throw InvalidArgument(
        fmt::format("piecewise_constant: values must have one more element than boundaries, got {} "
                    "boundaries and {} values",
                    boundaries.size(), values.size()));
  }
  for (size_t i = 1; i < boundaries.size(); ++i) {
    if (boundaries[i] <= boundaries[i - 1]) {
      throw InvalidArgument(fmt::format(
          "piecewise_constant: boundaries must be strictly increasing, got boundaries[{}] = {} "
          "after {}",
          i, boundaries[i], boundaries[i - 1]));
    }
  }
  for (size_t i = 0; i < values.size(); ++i)
    check_rate(kFn, fmt::format("values[{}]", i), values[i]);
  std::string description = fmt::format("piecewise_constant(boundaries=[{}], values=[{:g}])",
                                        fmt::join(boundaries, ", "), fmt::join(values, ", "));
  return {[boundaries = std::move(boundaries), values = std::move(values)](int64_t step) {
            // The first boundary not below step: a boundary step keeps the earlier value.
            size_t i = 0;
            while (i < boundaries.size() && step > boundaries[i]) ++i;
            return values[i];
          },
          std::move(description)};
}

LearningRateSchedule polynomial_decay(double learning_rate, int64_t decay_steps,
                                      double end_learning_rate, double power, bool cycle) {
  constexpr std::string_view kFn = "polynomial_decay";
  check_rate(kFn, "learning_rate", learning_rate);
  check_positive(kFn, "decay_steps", decay_steps);
  check_rate(kFn, "end_learning_rate", end_learning_rate);
  check_finite_positive(kFn, "power", power);
  return {[=](int64_t step) {
            auto s = static_cast<double>(step);
            auto span = static_cast<double>(decay_steps);
            if (cycle) {
              // The first multiple of decay_steps not below step; 1 at step 0 (as TF).
              const int64_t multiplier = step == 0 ? 1 : (step + decay_steps - 1) / decay_steps;
              span *= static_cast<double>(multiplier);
            } else {
              s = std::min(s, span);
            }
            return (learning_rate - end_learning_rate) * std::pow(1 - s / span, power) +
                   end_learning_rate;
          },
          fmt::format("polynomial_decay(learning_rate={:g}, decay_steps={}, "
                      "end_learning_rate={:g}, power={:g}, cycle={})",
                      learning_rate, decay_steps, end_learning_rate, power, bool_text(cycle))};
}

LearningRateSchedule cosine_decay(double learning_rate, int64_t decay_steps, double alpha) {
  constexpr std::string_view kFn = "cosine_decay";
  check_rate(kFn, "learning_rate", learning_rate);
  check_positive(kFn, "decay_steps", decay_steps);
  check_alpha(kFn, alpha);
  return {[=](int64_t step) {
            const double fraction =
                static_cast<double>(std::min(step, decay_steps)) / static_cast<double>(decay_steps);
            const double cosine = 0.5 * (1 + std::cos(std::numbers::pi * fraction));
            return learning_rate * ((1 - alpha) * cosine + alpha);
          },
          fmt::format("cosine_decay(learning_rate={:g}, decay_steps={}, alpha={:g})", learning_rate,
                      decay_steps, alpha)};
}

LearningRateSchedule cosine_decay_restarts(double learning_rate, int64_t first_decay_steps,
                                           double t_mul, double m_mul, double alpha) {
  constexpr std::string_view kFn = "cosine_decay_restarts";
  check_rate(kFn, "learning_rate", learning_rate);
  check_positive(kFn, "first_decay_steps", first_decay_steps);
  if (!(std::isfinite(t_mul) && t_mul >= 1)) {
    throw InvalidArgument(
        fmt::format("cosine_decay_restarts: t_mul must be a finite number >= 1, got {}", t_mul));
  }
  check_rate(kFn, "m_mul", m_mul);
  check_alpha(kFn, alpha);
  return {[=](int64_t step) {
            double restart = 0, fraction = 0;
            if (t_mul == 1) {
              // Equal periods: integer arithmetic is exact at the restarts.
              restart = static_cast<double>(step / first_decay_steps);
              fraction = static_cast<double>(step % first_decay_steps) /
                         static_cast<double>(first_decay_steps);
            } else {
              const double completed =
                  static_cast<double>(step) / static_cast<double>(first_decay_steps);
              // Period i starts at (1 + t_mul + ... + t_mul^(i-1)) first periods.
              auto start = [t_mul](double i) { return (1 - std::pow(t_mul, i)) / (1 - t_mul); };
              restart = std::floor(std::log(1 - completed * (1 - t_mul)) / std::log(t_mul));
              // The logarithm can land a hair below an integer at a restart step.
              while (start(restart + 1) <= completed) restart += 1;
              while (restart > 0 && start(restart) > completed) restart -= 1;
              fraction = (completed - start(restart)) / std::pow(t_mul, restart);
            }
            const double cosine =
                0.5 * std::pow(m_mul, restart) * (1 + std::cos(std::numbers::pi * fraction));
            return learning_rate * ((1 - alpha) * cosine + alpha);
          },
          fmt::format("cosine_decay_restarts(learning_rate={:g}, first_decay_steps={}, "
                      "t_mul={:g}, m_mul={:g}, alpha={:g})",
                      learning_rate, first_decay_steps, t_mul, m_mul, alpha)};
}

LearningRateSchedule inverse_time_decay(double learning_rate, int64_t decay_steps,
                                        double decay_rate, bool staircase) {
  constexpr std::string_view kFn = "inverse_time_decay";
  check_rate(kFn, "learning_rate", learning_rate);
  check_positive(kFn, "decay_steps", decay_steps);
  check_rate(kFn, "decay_rate", decay_rate);
  const auto steps = static_cast<double>(decay_steps);
  return {[=](int64_t step) {
            double p = static_cast<double>(step) / steps;
            if (staircase) p = std::floor(p);
            return learning_rate / (1 + decay_rate * p);
          },
          fmt::format("inverse_time_decay(learning_rate={:g}, decay_steps={}, decay_rate={:g}, "
                      "staircase={})",
                      learning_rate, decay_steps, decay_rate, bool_text(staircase))};
}

LearningRateSchedule linear_warmup(int64_t warmup_steps, LearningRateSchedule after,
                                   double initial_learning_rate) {
  if (warmup_steps < 0) {
    throw InvalidArgument(
        fmt::format("linear_warmup: warmup_steps must be non-negative, got {}", warmup_steps));
  }
  check_rate("linear_warmup", "initial_learning_rate", initial_learning_rate);
  std::string description =
      fmt::format("linear_warmup(warmup_steps={}, initial_learning_rate={:g}, after={})",
                  warmup_steps, initial_learning_rate, after.describe());
  const double target = after(0);
  return {[=, after = std::move(after)](int64_t step) {
            if (step >= warmup_steps) return after(step - warmup_steps);
            return initial_learning_rate + (target - initial_learning_rate) *
                                               static_cast<double>(step) /
                                               static_cast<double>(warmup_steps);
          },
          std::move(description)};
}

LearningRateSchedule rescaled(LearningRateSchedule schedule, int64_t from_step, int64_t old_end,
                              int64_t new_end) {
  if (from_step < 0 || old_end <= from_step || new_end <= from_step) {
    throw InvalidArgument(fmt::format(
        "rescaled: needs 0 <= from_step < old_end and from_step < new_end, got from_step={}, "
        "old_end={}, new_end={}",
        from_step, old_end, new_end));
  }
  std::string description =
      fmt::format("rescaled(from_step={}, old_end={}, new_end={}, schedule={})", from_step, old_end,
                  new_end, schedule.describe());
  const int64_t old_span = old_end - from_step, new_span = new_end - from_step;
  return {[=, schedule = std::move(schedule)](int64_t step) {
            if (step < from_step) return schedule(step);
            // 128-bit product: no overflow for any pair of int64 spans.
            const auto offset = static_cast<__int128>(step - from_step) * old_span / new_span;
            return schedule(from_step + static_cast<int64_t>(offset));
          },
          std::move(description)};
}

}  // namespace trainhooks
