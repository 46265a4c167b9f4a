#include "trainhooks/timer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "test_util.h"

#include "trainhooks/env.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;

namespace timer_test {

TEST(SecondOrStepTimerTest, RaisesWhenBothSecsAndStepsAreGiven) {
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [] { th::SecondOrStepTimer({.every_secs = 2.0, .every_steps = 10}); }),
            "Can not provide both every_secs and every_steps.");
}

TEST(SecondOrStepTimerTest, RaisesWhenNeitherSecsNorStepsIsGiven) {
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [] { th::SecondOrStepTimer(th::TimerOptions{}); }),
            "Either every_secs or every_steps should be provided.");
}

// The message of the InvalidArgument that constructing a timer with `o` raises, or "".
std::string timer_error(const th::TimerOptions& o) {
  return th::testing::error_message<th::InvalidArgument>([&] { th::SecondOrStepTimer t(o); });
}

TEST(SecondOrStepTimerTest, RejectsIntervalsThatAreNotPositive) {
  EXPECT_EQ(timer_error({.every_secs = -1.0}),
            "SecondOrStepTimer: every_secs must be positive, got -1");
  EXPECT_EQ(timer_error({.every_secs = 0.0}),
            "SecondOrStepTimer: every_secs must be positive, got 0");
  EXPECT_EQ(timer_error({.every_secs = std::nan("")}),
            "SecondOrStepTimer: every_secs must be positive, got nan");
  EXPECT_EQ(timer_error({.every_steps = -3}),
            "SecondOrStepTimer: every_steps must be positive, got -3");
  EXPECT_EQ(timer_error({.every_steps = 0}),
            "SecondOrStepTimer: every_steps must be positive, got 0");
  EXPECT_EQ(timer_error({.every_secs = 0.5}), "");
  EXPECT_EQ(timer_error({.every_steps = 1}), "");
}

TEST(SecondOrStepTimerTest, ErrorsNameTheOwnersArguments) {
  const th::TimerOptions names{
      .owner = "CheckpointSaverHook", .secs_name = "save_secs", .steps_name = "save_steps"};
  auto with = [&](std::optional<double> secs, std::optional<int64_t> steps) {
    th::TimerOptions o = names;
    o.every_secs = secs;
    o.every_steps = steps;
    return timer_error(o);
  };
  EXPECT_EQ(with(10.0, 20), "Can not provide both save_secs and save_steps.");
  EXPECT_EQ(with(std::nullopt, std::nullopt), "Either save_secs or save_steps should be provided.");
  EXPECT_EQ(with(std::nullopt, 0), "CheckpointSaverHook: save_steps must be positive, got 0");
  EXPECT_EQ(with(-2.5, std::nullopt), "CheckpointSaverHook: save_secs must be positive, got -2.5");
}

TEST(SecondOrStepTimerTest, ExactlyOneMessageReplacesTheBothAndNeitherTexts) {
  const std::string text = "exactly one, please.";
  EXPECT_EQ(timer_error({.every_secs = 1.0, .every_steps = 1, .exactly_one_message = text}), text);
  EXPECT_EQ(timer_error({.exactly_one_message = text}), text);
  EXPECT_EQ(timer_error({.every_steps = -1, .exactly_one_message = text}),
            "SecondOrStepTimer: every_steps must be positive, got -1");
}

TEST(SecondOrStepTimerTest, EveryStepsTriggersFirstThenAfterEveryStepsSteps) {
  th::SecondOrStepTimer timer({.every_steps = 3}, std::make_shared<th::FakeClock>());
  EXPECT_TRUE(timer.should_trigger_for_step(1));
  timer.update_last_triggered_step(1);
  EXPECT_FALSE(timer.should_trigger_for_step(1));
  EXPECT_FALSE(timer.should_trigger_for_step(2));
  EXPECT_FALSE(timer.should_trigger_for_step(3));
  EXPECT_TRUE(timer.should_trigger_for_step(4));
  EXPECT_TRUE(timer.should_trigger_for_step(100));
}

TEST(SecondOrStepTimerTest, EverySecsTriggersFirstThenOnceTheSecondsHavePassed) {
  auto clock = std::make_shared<th::FakeClock>();
  th::SecondOrStepTimer timer({.every_secs = 1.0}, clock);
  EXPECT_TRUE(timer.should_trigger_for_step(1));
  timer.update_last_triggered_step(1);
  EXPECT_FALSE(timer.should_trigger_for_step(1));
  EXPECT_FALSE(timer.should_trigger_for_step(2));

  clock->advance(0.5);
  EXPECT_FALSE(timer.should_trigger_for_step(2));
  clock->advance(0.5);                             // exactly every_secs since the trigger
  EXPECT_FALSE(timer.should_trigger_for_step(1));  // never twice for the same step
  EXPECT_TRUE(timer.should_trigger_for_step(2));
}

TEST(SecondOrStepTimerTest, EverySecsIgnoresTheNumberOfSteps) {
  auto clock = std::make_shared<th::FakeClock>();
  th::SecondOrStepTimer timer({.every_secs = 10.0}, clock);
  timer.update_last_triggered_step(0);
  EXPECT_FALSE(timer.should_trigger_for_step(1000000));
}

TEST(SecondOrStepTimerTest, NeverTriggersTwiceForTheSameStep) {
  auto clock = std::make_shared<th::FakeClock>();
  th::SecondOrStepTimer by_steps({.every_steps = 1}, clock);
  th::SecondOrStepTimer by_secs({.every_secs = 1.0}, clock);
  by_steps.update_last_triggered_step(7);
  by_secs.update_last_triggered_step(7);
  clock->advance(100);
  EXPECT_FALSE(by_steps.should_trigger_for_step(7));
  EXPECT_FALSE(by_secs.should_trigger_for_step(7));
  EXPECT_TRUE(by_steps.should_trigger_for_step(8));
  EXPECT_TRUE(by_secs.should_trigger_for_step(8));
}

TEST(SecondOrStepTimerTest, UpdateReturnsTheElapsedSecondsAndSteps) {
  auto clock = std::make_shared<th::FakeClock>();
  th::SecondOrStepTimer timer({.every_steps = 1}, clock);

  EXPECT_FALSE(timer.update_last_triggered_step(1).has_value());

  clock->advance(0.5);
  auto elapsed = timer.update_last_triggered_step(5);
  ASSERT_TRUE(elapsed.has_value());
  EXPECT_EQ(elapsed->seconds, 0.5);
  EXPECT_EQ(elapsed->steps, 4);

  clock->advance(0.25);
  elapsed = timer.update_last_triggered_step(7);
  ASSERT_TRUE(elapsed.has_value());
  EXPECT_EQ(elapsed->seconds, 0.25);
  EXPECT_EQ(elapsed->steps, 2);
}

TEST(SecondOrStepTimerTest, LastTriggeredStepIsUnsetUntilTheFirstUpdate) {
  th::SecondOrStepTimer timer({.every_steps = 5}, std::make_shared<th::FakeClock>());
  EXPECT_FALSE(timer.last_triggered_step().has_value());
  timer.update_last_triggered_step(3);
  EXPECT_EQ(timer.last_triggered_step(), 3);
}

TEST(SecondOrStepTimerTest, ResetMakesTheNextStepTriggerLikeTheFirst) {
  auto clock = std::make_shared<th::FakeClock>();
  th::SecondOrStepTimer timer({.every_steps = 10}, clock);
  timer.update_last_triggered_step(1);
  EXPECT_FALSE(timer.should_trigger_for_step(2));
  timer.reset();
  EXPECT_FALSE(timer.last_triggered_step().has_value());
  EXPECT_TRUE(timer.should_trigger_for_step(2));
  clock->advance(3);
  EXPECT_FALSE(timer.update_last_triggered_step(2).has_value());
}

TEST(SecondOrStepTimerTest, SetClockSwitchesTheTimeSource) {
  auto first = std::make_shared<th::FakeClock>();
  auto second = std::make_shared<th::FakeClock>();
  th::SecondOrStepTimer timer({.every_secs = 1.0}, first);
  timer.set_clock(second);
  timer.update_last_triggered_step(1);
  first->advance(5);
  EXPECT_FALSE(timer.should_trigger_for_step(2));
  second->advance(1);
  EXPECT_TRUE(timer.should_trigger_for_step(2));
}

}  // namespace timer_test
