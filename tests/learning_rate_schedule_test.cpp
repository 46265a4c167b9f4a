// Each schedule against TensorFlow's definition, written out here independently of the library:
// at step 0, at and around every boundary, past the decay span and across cycles and restarts.
#include "trainhooks/learning_rate_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "trainhooks/errors.h"

namespace th = trainhooks;

namespace learning_rate_schedule_test {

constexpr double kPi = std::numbers::pi;

// The message of the InvalidArgument that `fn` throws; "" when it throws nothing.
std::string invalid(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const th::InvalidArgument& e) {
    return e.what();
  }
  return "";
}

void expect_schedule(const th::LearningRateSchedule& s, const std::function<double(int64_t)>& want,
                     const std::vector<int64_t>& steps) {
  for (int64_t step : steps) EXPECT_NEAR(s(step), want(step), 1e-13) << "step " << step;
}

TEST(LearningRateScheduleTest, ConstantIsTheSameAtEveryStep) {
  auto s = th::constant(0.25);
  for (int64_t step : {0, 1, 100, 1000000000}) EXPECT_EQ(s(step), 0.25);
  EXPECT_EQ(s.describe(), "constant(learning_rate=0.25)");
}

TEST(LearningRateScheduleTest, ExponentialDecayIsTensorFlows) {
  const double lr = 0.1, rate = 0.96;
  const int64_t ds = 100;
  expect_schedule(th::exponential_decay(lr, ds, rate),
                  [&](int64_t s) { return lr * std::pow(rate, double(s) / double(ds)); },
                  {0, 1, 50, 99, 100, 101, 199, 200, 250, 1000, 123457});
  expect_schedule(
      th::exponential_decay(lr, ds, rate, true),
      [&](int64_t s) { return lr * std::pow(rate, std::floor(double(s) / double(ds))); },
      {0, 1, 99, 100, 101, 199, 200, 201, 1000, 123457});
  // The staircase drops exactly at multiples of decay_steps.
  auto stairs = th::exponential_decay(0.1, 100, 0.5, true);
  EXPECT_EQ(stairs(99), 0.1);
  EXPECT_EQ(stairs(100), 0.05);
  EXPECT_EQ(stairs(199), 0.05);
  EXPECT_EQ(stairs(200), 0.025);
  EXPECT_EQ(stairs.describe(),
            "exponential_decay(learning_rate=0.1, decay_steps=100, decay_rate=0.5, "
            "staircase=true)");
}

TEST(LearningRateScheduleTest, PiecewiseConstantKeepsTheEarlierValueAtABoundary) {
  auto s = th::piecewise_constant({100, 200}, {1.0, 0.5, 0.1});
  EXPECT_EQ(s(0), 1.0);
  EXPECT_EQ(s(99), 1.0);
  EXPECT_EQ(s(100), 1.0);
  EXPECT_EQ(s(101), 0.5);
  EXPECT_EQ(s(199), 0.5);
  EXPECT_EQ(s(200), 0.5);
  EXPECT_EQ(s(201), 0.1);
  EXPECT_EQ(s(1000000), 0.1);
  EXPECT_EQ(s.describe(), "piecewise_constant(boundaries=[100, 200], values=[1, 0.5, 0.1])");

  auto one = th::piecewise_constant({0}, {0.3, 0.2});
  EXPECT_EQ(one(0), 0.3);
  EXPECT_EQ(one(1), 0.2);
}

// TF: step = min(step, decay_steps), or with cycle decay_steps *= ceil(step / decay_steps)
// (1 at step 0); then (lr - end) * (1 - step / decay_steps) ^ power + end.
double polynomial(double lr, int64_t ds, double end, double power, bool cycle, int64_t step) {
  double span = double(ds), s = double(step);
  if (cycle) {
    int64_t multiple = 1;
    while (multiple * ds < step) ++multiple;
    span *= double(multiple);
  } else if (s > span) {
    s = span;
  }
  return (lr - end) * std::pow(1 - s / span, power) + end;
}

TEST(LearningRateScheduleTest, PolynomialDecayIsTensorFlows) {
  const std::vector<int64_t> steps{0, 1, 50, 99, 100, 101, 150, 199, 200, 201, 299, 300, 301, 5000};
  for (double power : {1.0, 0.5, 2.0}) {
    for (bool cycle : {false, true}) {
      SCOPED_TRACE(testing::Message() << "power " << power << " cycle " << cycle);
      expect_schedule(
          th::polynomial_decay(0.1, 100, 0.01, power, cycle),
          [&](int64_t s) { return polynomial(0.1, 100, 0.01, power, cycle, s); }, steps);
    }
  }
  auto flat = th::polynomial_decay(0.1, 100, 0.01);
  EXPECT_DOUBLE_EQ(flat(0), 0.1);
  EXPECT_DOUBLE_EQ(flat(50), 0.055);
  EXPECT_DOUBLE_EQ(flat(100), 0.01);
  EXPECT_DOUBLE_EQ(flat(1000), 0.01);
  auto cyc = th::polynomial_decay(0.1, 100, 0.01, 1.0, true);
  EXPECT_DOUBLE_EQ(cyc(0), 0.1);  // multiplier 1 at step 0, not 0
  EXPECT_DOUBLE_EQ(cyc(100), 0.01);
  EXPECT_DOUBLE_EQ(cyc(101), 0.09 * (1 - 101.0 / 200) + 0.01);  // the span is now 200
  EXPECT_DOUBLE_EQ(cyc(200), 0.01);
  EXPECT_DOUBLE_EQ(cyc(300), 0.01);
  EXPECT_EQ(th::polynomial_decay(0.1, 100).describe(),
            "polynomial_decay(learning_rate=0.1, decay_steps=100, end_learning_rate=0.0001, "
            "power=1, cycle=false)");
}

TEST(LearningRateScheduleTest, CosineDecayIsTensorFlows) {
  for (double alpha : {0.0, 0.1}) {
    SCOPED_TRACE(testing::Message() << "alpha " << alpha);
    auto want = [&](int64_t s) {
      const double step = double(std::min<int64_t>(s, 1000));
      return 0.2 * ((1 - alpha) * 0.5 * (1 + std::cos(kPi * step / 1000)) + alpha);
    };
    auto s = th::cosine_decay(0.2, 1000, alpha);
    expect_schedule(s, want, {0, 1, 250, 500, 999, 1000, 1001, 100000});
    EXPECT_DOUBLE_EQ(s(0), 0.2);
    EXPECT_DOUBLE_EQ(s(500), 0.2 * (0.5 * (1 - alpha) + alpha));
    EXPECT_DOUBLE_EQ(s(1000), 0.2 * alpha);
    EXPECT_DOUBLE_EQ(s(5000), 0.2 * alpha);
  }
  EXPECT_EQ(th::cosine_decay(0.2, 1000).describe(),
            "cosine_decay(learning_rate=0.2, decay_steps=1000, alpha=0)");
}

// SGDR by walking the periods: period i lasts first * t_mul^i steps and starts m_mul^i lower.
double sgdr(double lr, int64_t first, double t_mul, double m_mul, double alpha, int64_t step) {
  double start = 0, length = double(first);
  int restart = 0;
  while (double(step) >= start + length) {
    start += length;
    length *= t_mul;
    ++restart;
  }
  const double fraction = (double(step) - start) / length;
  const double cosine = 0.5 * std::pow(m_mul, restart) * (1 + std::cos(kPi * fraction));
  return lr * ((1 - alpha) * cosine + alpha);
}

TEST(LearningRateScheduleTest, CosineDecayRestartsIsTensorFlowsSgdr) {
  struct Case {
    double t_mul, m_mul, alpha;
  };
  // Periods of 10 steps with t_mul 1; [0,10) [10,30) [30,70) [70,150) [150,310) with t_mul 2;
  // [0,10) [10,25) [25,47.5) [47.5,81.25) with t_mul 1.5.
  const std::vector<int64_t> steps{0,  1,  5,  9,  10, 11, 20, 24,  25,  26,  29,  30,  31,
                                   47, 48, 69, 70, 71, 81, 82, 149, 150, 151, 309, 310, 311};
  for (const Case& c : {Case{2.0, 1.0, 0.0}, Case{2.0, 0.5, 0.1}, Case{1.0, 1.0, 0.0},
                        Case{1.0, 0.8, 0.05}, Case{1.5, 0.9, 0.0}, Case{3.0, 1.0, 0.2}}) {
    SCOPED_TRACE(testing::Message()
                 << "t_mul " << c.t_mul << " m_mul " << c.m_mul << " alpha " << c.alpha);
    expect_schedule(
        th::cosine_decay_restarts(0.1, 10, c.t_mul, c.m_mul, c.alpha),
        [&](int64_t s) { return sgdr(0.1, 10, c.t_mul, c.m_mul, c.alpha, s); }, steps);
  }
  // A restart step begins the next period at its full (m_mul-scaled) rate.
  auto s = th::cosine_decay_restarts(0.1, 10, 2.0, 0.5);
  EXPECT_DOUBLE_EQ(s(10), 0.05);
  EXPECT_DOUBLE_EQ(s(30), 0.025);
  EXPECT_DOUBLE_EQ(s(70), 0.0125);
  EXPECT_DOUBLE_EQ(s(150), 0.00625);
  EXPECT_DOUBLE_EQ(s(310), 0.003125);
  // Late restarts too (period 20 starts at 10 * (2^20 - 1)).
  EXPECT_DOUBLE_EQ(s(10 * ((int64_t{1} << 20) - 1)), 0.1 * std::pow(0.5, 20));
  EXPECT_EQ(th::cosine_decay_restarts(0.1, 10).describe(),
            "cosine_decay_restarts(learning_rate=0.1, first_decay_steps=10, t_mul=2, m_mul=1, "
            "alpha=0)");
}

TEST(LearningRateScheduleTest, InverseTimeDecayIsTensorFlows) {
  const double lr = 0.1, rate = 0.5;
  expect_schedule(th::inverse_time_decay(lr, 10, rate),
                  [&](int64_t s) { return lr / (1 + rate * double(s) / 10); },
                  {0, 1, 9, 10, 11, 19, 20, 1000});
  expect_schedule(th::inverse_time_decay(lr, 10, rate, true),
                  [&](int64_t s) { return lr / (1 + rate * std::floor(double(s) / 10)); },
                  {0, 1, 9, 10, 11, 19, 20, 1000});
  auto stairs = th::inverse_time_decay(0.1, 10, 1.0, true);
  EXPECT_DOUBLE_EQ(stairs(9), 0.1);
  EXPECT_DOUBLE_EQ(stairs(10), 0.05);
  EXPECT_EQ(th::inverse_time_decay(0.1, 10, 0.5).describe(),
            "inverse_time_decay(learning_rate=0.1, decay_steps=10, decay_rate=0.5, "
            "staircase=false)");
}

TEST(LearningRateScheduleTest, LinearWarmupRisesToTheScheduleWhichThenStartsAtItsStepZero) {
  auto after = th::exponential_decay(0.1, 10, 0.5);
  auto s = th::linear_warmup(20, after);
  EXPECT_EQ(s(0), 0.0);
  EXPECT_DOUBLE_EQ(s(5), 0.025);
  EXPECT_DOUBLE_EQ(s(10), 0.05);
  EXPECT_DOUBLE_EQ(s(19), 0.1 * 19 / 20);
  // The warm-up ends at after(0); the wrapped schedule's steps are offset by warmup_steps.
  EXPECT_DOUBLE_EQ(s(20), 0.1);
  EXPECT_DOUBLE_EQ(s(21), after(1));
  EXPECT_DOUBLE_EQ(s(30), 0.05);
  EXPECT_DOUBLE_EQ(s(40), 0.025);

  auto from = th::linear_warmup(10, th::constant(0.1), 0.01);
  EXPECT_DOUBLE_EQ(from(0), 0.01);
  EXPECT_DOUBLE_EQ(from(5), 0.055);
  EXPECT_DOUBLE_EQ(from(10), 0.1);
  EXPECT_DOUBLE_EQ(from(11), 0.1);

  auto none = th::linear_warmup(0, after);
  for (int64_t step : {0, 1, 10, 25}) EXPECT_EQ(none(step), after(step));

  EXPECT_EQ(s.describe(),
            "linear_warmup(warmup_steps=20, initial_learning_rate=0, "
            "after=exponential_decay(learning_rate=0.1, decay_steps=10, decay_rate=0.5, "
            "staircase=false))");
  // Composes with itself and with cosine decay.
  auto nested = th::linear_warmup(5, th::linear_warmup(5, th::cosine_decay(0.2, 10)), 0.1);
  EXPECT_DOUBLE_EQ(nested(0), 0.1);
  EXPECT_DOUBLE_EQ(nested(5), 0.0);
  EXPECT_DOUBLE_EQ(nested(10), 0.2);
  EXPECT_DOUBLE_EQ(nested(15), 0.1);
  EXPECT_DOUBLE_EQ(nested(20), 0.0);
}

TEST(LearningRateScheduleTest, NegativeStepsCountAsZero) {
  auto s = th::linear_warmup(10, th::cosine_decay(0.1, 100), 0.01);
  EXPECT_EQ(s(-5), s(0));
  EXPECT_EQ(th::polynomial_decay(0.1, 10, 0.0, 1.0, true)(-3), 0.1);
}

TEST(LearningRateScheduleTest, IsACheapValueTypeAndTakesCustomFunctions) {
  auto a = th::cosine_decay(0.1, 100);
  th::LearningRateSchedule b = a;  // copies share the function
  a = th::constant(1.0);
  EXPECT_DOUBLE_EQ(b(50), 0.05);
  EXPECT_EQ(a(50), 1.0);

  th::LearningRateSchedule halving([](int64_t s) { return 1.0 / double(s + 1); }, "halving");
  EXPECT_EQ(halving(1), 0.5);
  EXPECT_EQ(halving.describe(), "halving");
  EXPECT_DOUBLE_EQ(th::linear_warmup(4, halving)(2), 0.5);

  EXPECT_EQ(invalid([] { th::LearningRateSchedule({}, "empty"); }),
            "LearningRateSchedule: fn must not be empty");
}

TEST(LearningRateScheduleTest, RejectsInvalidArgumentsNamingTheFunctionAndTheArgument) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(invalid([] { th::constant(-0.1); }),
            "constant: learning_rate must be a finite, non-negative number, got -0.1");
  EXPECT_EQ(invalid([&] { th::constant(nan); }),
            "constant: learning_rate must be a finite, non-negative number, got nan");
  EXPECT_EQ(invalid([&] { th::constant(inf); }),
            "constant: learning_rate must be a finite, non-negative number, got inf");

  EXPECT_EQ(invalid([] { th::exponential_decay(-1, 10, 0.5); }),
            "exponential_decay: learning_rate must be a finite, non-negative number, got -1");
  EXPECT_EQ(invalid([] { th::exponential_decay(0.1, 0, 0.5); }),
            "exponential_decay: decay_steps must be positive, got 0");
  EXPECT_EQ(invalid([] { th::exponential_decay(0.1, -10, 0.5); }),
            "exponential_decay: decay_steps must be positive, got -10");
  EXPECT_EQ(invalid([] { th::exponential_decay(0.1, 10, 0); }),
            "exponential_decay: decay_rate must be a finite, positive number, got 0");
  EXPECT_EQ(invalid([&] { th::exponential_decay(0.1, 10, nan); }),
            "exponential_decay: decay_rate must be a finite, positive number, got nan");

  EXPECT_EQ(invalid([] { th::piecewise_constant({}, {0.1}); }),
            "piecewise_constant: boundaries must not be empty");
  EXPECT_EQ(invalid([] {
              th::piecewise_constant({10, 20}, {0.1, 0.2});
            }),
            "piecewise_constant: values must have one more element than boundaries, got 2 "
            "boundaries and 2 values");
  EXPECT_EQ(invalid([] {
              th::piecewise_constant({10}, {0.1, 0.2, 0.3});
            }),
            "piecewise_constant: values must have one more element than boundaries, got 1 "
            "boundaries and 3 values");
  EXPECT_EQ(invalid([] {
              th::piecewise_constant({10, 30, 20}, {1, 2, 3, 4});
            }),
            "piecewise_constant: boundaries must be strictly increasing, got boundaries[2] = 20 "
            "after 30");
  EXPECT_EQ(invalid([] {
              th::piecewise_constant({10, 10}, {1, 2, 3});
            }),
            "piecewise_constant: boundaries must be strictly increasing, got boundaries[1] = 10 "
            "after 10");
  EXPECT_EQ(invalid([] {
              th::piecewise_constant({10}, {0.1, -0.2});
            }),
            "piecewise_constant: values[1] must be a finite, non-negative number, got -0.2");

  EXPECT_EQ(invalid([] { th::polynomial_decay(-0.1, 10); }),
            "polynomial_decay: learning_rate must be a finite, non-negative number, got -0.1");
  EXPECT_EQ(invalid([] { th::polynomial_decay(0.1, 0); }),
            "polynomial_decay: decay_steps must be positive, got 0");
  EXPECT_EQ(invalid([] { th::polynomial_decay(0.1, 10, -1); }),
            "polynomial_decay: end_learning_rate must be a finite, non-negative number, got -1");
  EXPECT_EQ(invalid([] { th::polynomial_decay(0.1, 10, 0.01, 0); }),
            "polynomial_decay: power must be a finite, positive number, got 0");
  EXPECT_EQ(invalid([&] { th::polynomial_decay(0.1, 10, 0.01, inf); }),
            "polynomial_decay: power must be a finite, positive number, got inf");

  EXPECT_EQ(invalid([] { th::cosine_decay(-0.1, 10); }),
            "cosine_decay: learning_rate must be a finite, non-negative number, got -0.1");
  EXPECT_EQ(invalid([] { th::cosine_decay(0.1, 0); }),
            "cosine_decay: decay_steps must be positive, got 0");
  EXPECT_EQ(invalid([] { th::cosine_decay(0.1, 10, 1.5); }),
            "cosine_decay: alpha must be in [0, 1], got 1.5");
  EXPECT_EQ(invalid([] { th::cosine_decay(0.1, 10, -0.1); }),
            "cosine_decay: alpha must be in [0, 1], got -0.1");

  EXPECT_EQ(invalid([&] { th::cosine_decay_restarts(inf, 10); }),
            "cosine_decay_restarts: learning_rate must be a finite, non-negative number, got inf");
  EXPECT_EQ(invalid([] { th::cosine_decay_restarts(0.1, 0); }),
            "cosine_decay_restarts: first_decay_steps must be positive, got 0");
  EXPECT_EQ(invalid([] { th::cosine_decay_restarts(0.1, 10, 0.5); }),
            "cosine_decay_restarts: t_mul must be a finite number >= 1, got 0.5");
  EXPECT_EQ(invalid([&] { th::cosine_decay_restarts(0.1, 10, nan); }),
            "cosine_decay_restarts: t_mul must be a finite number >= 1, got nan");
  EXPECT_EQ(invalid([] { th::cosine_decay_restarts(0.1, 10, 2.0, -1); }),
            "cosine_decay_restarts: m_mul must be a finite, non-negative number, got -1");
  EXPECT_EQ(invalid([] { th::cosine_decay_restarts(0.1, 10, 2.0, 1.0, 2); }),
            "cosine_decay_restarts: alpha must be in [0, 1], got 2");

  EXPECT_EQ(invalid([] { th::inverse_time_decay(-0.1, 10, 0.5); }),
            "inverse_time_decay: learning_rate must be a finite, non-negative number, got -0.1");
  EXPECT_EQ(invalid([] { th::inverse_time_decay(0.1, 0, 0.5); }),
            "inverse_time_decay: decay_steps must be positive, got 0");
  EXPECT_EQ(invalid([] { th::inverse_time_decay(0.1, 10, -0.5); }),
            "inverse_time_decay: decay_rate must be a finite, non-negative number, got -0.5");

  EXPECT_EQ(invalid([] { th::linear_warmup(-1, th::constant(0.1)); }),
            "linear_warmup: warmup_steps must be non-negative, got -1");
  EXPECT_EQ(invalid([] { th::linear_warmup(10, th::constant(0.1), -0.01); }),
            "linear_warmup: initial_learning_rate must be a finite, non-negative number, got "
            "-0.01");

  // Valid edge values.
  EXPECT_EQ(invalid([] { th::constant(0); }), "");
  EXPECT_EQ(invalid([] { th::cosine_decay(0.1, 1, 1.0); }), "");
  EXPECT_EQ(invalid([] { th::cosine_decay_restarts(0.1, 1, 1.0, 0.0); }), "");
  EXPECT_EQ(invalid([] { th::inverse_time_decay(0.1, 1, 0.0); }), "");
}

}  // namespace learning_rate_schedule_test
