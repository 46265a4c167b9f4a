#include "trainhooks/hooks/time_budget_hook.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/hooks/learning_rate_schedule_hook.h"
#include "trainhooks/hooks/stop_at_step_hook.h"
#include "trainhooks/learning_rate_schedule.h"
#include "trainhooks/optimizers.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;
using ::testing::ElementsAre;
using ::testing::MatchesRegex;

namespace time_budget_hook_test {

// Moves the fake clock before each step: `slow_secs` from global step `slow_from` on, `fast_secs`
// before it (a machine that gets busier during the run).
struct StepClock : th::SessionRunHook {
  StepClock(th::FakeClock& c, double fast, double slow, int64_t from)
      : clock(c), fast_secs(fast), slow_secs(slow), slow_from(from) {}
  th::SessionRunArgs before_run(th::SessionRunContext&) override {
    const int64_t step = graph().global_step_value();
    clock.advance((step >= slow_from ? slow_secs : fast_secs) +
                  (step == pause_at ? pause_secs : 0));
    return {};
  }
  Calls calls() const override { return {.after_run = false}; }
  th::FakeClock& clock;
  double fast_secs, slow_secs;
  int64_t slow_from;
  int64_t pause_at = -1;  // one step that takes pause_secs more (an evaluation, a checkpoint)
  double pause_secs = 0;
};

// Records the rate each step trains with (listed after the LearningRateScheduleHook).
struct RateRecorder : th::SessionRunHook {
  explicit RateRecorder(th::Node t) : train(t) {}
  th::SessionRunArgs before_run(th::SessionRunContext&) override {
    rates.push_back(th::learning_rate(graph().optimizer(train)));
    return {};
  }
  Calls calls() const override { return {.after_run = false}; }
  th::Node train;
  std::vector<double> rates;
};

class TimeBudgetHookTest : public ::testing::Test {
 protected:
  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
};

TEST_F(TimeBudgetHookTest, ARunThatFitsIsNotRePlanned) {
  auto budget = std::make_shared<th::TimeBudgetHook>(
      th::TimeBudgetHookOptions{.budget_secs = 100, .last_step = 150, .every_n_steps = 10});
  auto sess = th::testing::chief_session(
      m.g, {budget, std::make_shared<StepClock>(*fe.clock, 0.6, 0.6, 0)}, fe.env());
  while (!sess->should_stop()) sess->run(m.train, m.feed());
  EXPECT_EQ(m.g.global_step_value(), 150);  // the hook stops at its last step by itself
  EXPECT_TRUE(budget->replans().empty());
  EXPECT_TRUE(fe.log->messages().empty());
}

// One step that takes 10 s more (an evaluation) is counted at its share of the run, not taken for
// the new rate: 200 steps of 0.4 s and the pause end at 90 s of a 100 s budget, as planned.
TEST_F(TimeBudgetHookTest, OneSlowIntervalIsNotTakenForTheNewRate) {
  auto budget = std::make_shared<th::TimeBudgetHook>(th::TimeBudgetHookOptions{
      .budget_secs = 100, .last_step = 200, .reserve_secs = 3, .every_n_steps = 10});
  auto clock = std::make_shared<StepClock>(*fe.clock, 0.4, 0.4, 0);
  clock->pause_at = 100;
  clock->pause_secs = 10;
  auto sess = th::testing::chief_session(m.g, {budget, clock}, fe.env());
  while (!sess->should_stop()) sess->run(m.train, m.feed());
  EXPECT_EQ(m.g.global_step_value(), 200);
  EXPECT_TRUE(budget->replans().empty()) << ::testing::PrintToString(fe.log->messages());
}

// Planned at 0.4 s per step (200 steps in 80 s of a 100 s budget); from step 60 on each step
// takes 1 s. The end moves so that the run ends within the budget, the StopAtStepHook and the
// schedule move with it, and the schedule still ends: the last step trains at the rate the plan
// had for its last step.
TEST_F(TimeBudgetHookTest, ASlowedDownRunEndsWithinItsBudgetAndItsScheduleEnds) {
  const auto schedule = th::linear_warmup(10, th::cosine_decay(0.1, 190));
  auto stop = std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.last_step = 200});
  auto lr = std::make_shared<th::LearningRateScheduleHook>(m.train, schedule);
  auto recorder = std::make_shared<RateRecorder>(m.train);
  th::LearningRateSchedule current = schedule;
  std::vector<int64_t> moved_to;
  auto budget = std::make_shared<th::TimeBudgetHook>(th::TimeBudgetHookOptions{
      .budget_secs = 100,
      .last_step = 200,
      .reserve_secs = 3,
      .every_n_steps = 10,
      .min_steps_measured = 20,
      .on_replan = [&](const th::Replan& r) {
        stop->set_last_step(r.last_step);
        current = th::rescaled(current, r.at_step, r.previous_last_step, r.last_step);
        lr->set_schedule(current);
        moved_to.push_back(r.last_step);
      }});
  auto sess = th::testing::chief_session(
      m.g, {stop, budget, lr, recorder, std::make_shared<StepClock>(*fe.clock, 0.4, 1.0, 60)},
      fe.env());
  while (!sess->should_stop()) sess->run(m.train, m.feed());
  const double elapsed = fe.clock->steady_seconds();
  const int64_t last = m.g.global_step_value();

  ASSERT_FALSE(budget->replans().empty());
  EXPECT_EQ(moved_to.back(), last);
  EXPECT_EQ(budget->last_step(), last);
  EXPECT_EQ(stop->last_step(), last);
  EXPECT_EQ(sess->services().stop_at_step(), last);
  EXPECT_LT(last, 200);
  // Within the budget, less what was kept for after the last step, with the slack allowed.
  EXPECT_LE(elapsed, 100 - 3 + 0.02 * 100);
  EXPECT_GT(elapsed, 80);  // and not cut needlessly short
  // Each re-planning moved the end earlier, and said so.
  for (size_t i = 1; i < moved_to.size(); ++i) EXPECT_LT(moved_to[i], moved_to[i - 1]);
  // The slow-down is seen at once (the last intervals' rate), not as the whole run's average
  // creeps up: one re-planning, said once.
  std::vector<std::string> said;
  for (const auto& m : fe.log->messages())
    if (m.rfind("TimeBudgetHook:", 0) == 0) said.push_back(m);
  ASSERT_EQ(budget->replans().size(), 1u) << ::testing::PrintToString(said);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_THAT(said[0],
              MatchesRegex("TimeBudgetHook: [0-9.]+ ms per step, [0-9]+ steps left would end "
                           "[0-9.]+ s past the budget; re-planned at step [0-9]+ to end at step "
                           "[0-9]+ instead of 200\\."));
  // The rates: the plan's up to the first re-planning, then falling to the plan's last rate at
  // the new last step, never rising after the warm-up.
  ASSERT_EQ(recorder->rates.size(), static_cast<size_t>(last));
  const int64_t first_replan = budget->replans()[0].at_step;
  for (int64_t s = 0; s < first_replan; ++s) EXPECT_EQ(recorder->rates[s], schedule(s));
  for (int64_t s = 11; s < last; ++s) EXPECT_LE(recorder->rates[s], recorder->rates[s - 1]);
  EXPECT_EQ(current(last), schedule(200));
  EXPECT_LT(recorder->rates.back(), 0.01 * 0.1);
}

// A resumed run that rebuilds the schedule from the recorded re-plannings (as a program does from
// its saved plan) trains bit for bit as the run that was not interrupted.
TEST_F(TimeBudgetHookTest, AResumeContinuesTheRePlannedRunBitForBit) {
  th::testing::TempDir tmp;
  const auto schedule = th::linear_warmup(10, th::cosine_decay(0.1, 190));
  struct Result {
    float w;
    std::vector<double> rates;
    std::vector<th::Replan> replans;
  };
  // Trains in `dir` until `stop_at` (or the plan's end), re-planning unless `replans` is given,
  // which is then the plan to follow.
  auto train = [&](th::testing::TinyModel& model, const std::string& dir, int64_t stop_at,
                   std::vector<th::Replan> replans, bool replan) {
    th::LearningRateSchedule current = schedule;
    int64_t last_step = 200;
    for (const auto& r : replans) {
      current = th::rescaled(current, r.at_step, r.previous_last_step, r.last_step);
      last_step = r.last_step;
    }
    auto stop = std::make_shared<th::StopAtStepHook>(
        th::StopAtStepHookOptions{.last_step = std::min(last_step, stop_at)});
    auto lr = std::make_shared<th::LearningRateScheduleHook>(model.train, current);
    auto recorder = std::make_shared<RateRecorder>(model.train);
    th::Hooks hooks{stop, lr, recorder, std::make_shared<StepClock>(*fe.clock, 0.4, 1.0, 60)};
    std::shared_ptr<th::TimeBudgetHook> budget;
    if (replan) {
      budget = std::make_shared<th::TimeBudgetHook>(th::TimeBudgetHookOptions{
          .budget_secs = 100,
          .last_step = last_step,
          .every_n_steps = 10,
          .min_steps_measured = 20,
          .on_replan = [&](const th::Replan& r) {
            if (r.last_step < stop_at) stop->set_last_step(r.last_step);
            current = th::rescaled(current, r.at_step, r.previous_last_step, r.last_step);
            lr->set_schedule(current);
            replans.push_back(r);
          }});
      hooks.insert(hooks.begin() + 1, budget);
    }
    th::MonitoredTrainingSession sess(model.g,
                                      {.checkpoint_dir = dir,
                                       .hooks = hooks,
                                       .checkpoints = {.save_steps = 1000},
                                       .summaries = {.save_steps = 0, .log_step_count_steps = 0},
                                       .handle_preemption_signals = false,
                                       .env = fe.env()});
    while (!sess.should_stop()) sess.run(model.train, model.feed());
    sess.close();
    return Result{model.g.variable_value(model.w).item<float>(), recorder->rates, replans};
  };
  th::testing::TinyModel straight_model;
  const Result straight = train(straight_model, tmp.file("straight"), 1000, {}, true);
  ASSERT_FALSE(straight.replans.empty());
  const int64_t last = straight.replans.back().last_step;
  ASSERT_EQ(straight_model.g.global_step_value(), last);

  // Interrupted after the first re-planning (the final checkpoint is at `cut`), then resumed
  // with the plan as it was recorded.
  const int64_t cut = straight.replans.front().at_step + 5;
  ASSERT_LT(cut, last);
  th::testing::TinyModel first, second;
  const Result before = train(first, tmp.file("resumed"), cut, {}, true);
  ASSERT_EQ(first.g.global_step_value(), cut);
  ASSERT_EQ(before.replans.size(), 1u);
  const Result after = train(second, tmp.file("resumed"), 1000, straight.replans, false);
  EXPECT_EQ(second.g.global_step_value(), last);
  auto rates = before.rates;
  rates.insert(rates.end(), after.rates.begin(), after.rates.end());
  EXPECT_EQ(rates, straight.rates);
  EXPECT_EQ(after.w, straight.w);  // bit-identical weights
}

TEST_F(TimeBudgetHookTest, RejectsBadOptions) {
  auto message = [](th::TimeBudgetHookOptions o) {
    return th::testing::error_message<th::InvalidArgument>([&] { th::TimeBudgetHook hook(o); });
  };
  const th::TimeBudgetHookOptions ok{.budget_secs = 10, .last_step = 100};
  EXPECT_EQ(message(ok), "");
  auto o = ok;
  o.budget_secs = 0;
  EXPECT_EQ(message(o),
            "TimeBudgetHook: budget_secs must be a positive, finite number of seconds, got 0");
  o = ok;
  o.budget_secs = std::numeric_limits<double>::infinity();
  EXPECT_EQ(message(o),
            "TimeBudgetHook: budget_secs must be a positive, finite number of seconds, got inf");
  o = ok;
  o.last_step = 0;
  EXPECT_EQ(message(o), "TimeBudgetHook: last_step must be positive, got 0");
  o = ok;
  o.reserve_secs = -1;
  EXPECT_EQ(
      message(o),
      "TimeBudgetHook: reserve_secs must be a non-negative, finite number of seconds, got -1");
  o = ok;
  o.every_n_steps = 0;
  EXPECT_EQ(message(o), "TimeBudgetHook: every_n_steps must be positive, got 0");
  o = ok;
  o.round_to = -5;
  EXPECT_EQ(message(o), "TimeBudgetHook: round_to must be positive, got -5");
  o = ok;
  o.slack = 1;
  EXPECT_EQ(message(o), "TimeBudgetHook: slack must be in [0, 1), got 1");
}

TEST_F(TimeBudgetHookTest, NeedsAGlobalStep) {
  th::Graph g;
  auto x = g.placeholder("x", {.dtype = at::kFloat});
  g.op("y", [=](th::Run& r) { return r[x] + 1; });
  auto hook = std::make_shared<th::TimeBudgetHook>(
      th::TimeBudgetHookOptions{.budget_secs = 10, .last_step = 100});
  EXPECT_EQ(th::testing::error_message<th::RuntimeError>(
                [&] { th::testing::chief_session(g, {hook}, fe.env()); }),
            "Global step should be created to use TimeBudgetHook.");
}

TEST(RescaledScheduleTest, KeepsTheRatesBeforeAndReachesTheOldEndAtTheNewEnd) {
  const auto base = th::linear_warmup(10, th::cosine_decay(0.1, 90));  // ends at step 100
  const auto r = th::rescaled(base, 40, 100, 70);
  for (int64_t s = 0; s < 40; ++s) EXPECT_EQ(r(s), base(s));
  EXPECT_EQ(r(40), base(40));
  EXPECT_EQ(r(55), base(40 + 15 * 60 / 30));
  EXPECT_EQ(r(70), base(100));
  EXPECT_EQ(r(80), base(120));
  // Stretched as well as compressed, and composed.
  const auto longer = th::rescaled(base, 40, 100, 160);
  EXPECT_EQ(longer(160), base(100));
  EXPECT_EQ(longer(100), base(40 + 60 * 60 / 120));
  const auto twice = th::rescaled(r, 50, 70, 60);
  EXPECT_EQ(twice(60), base(100));
  EXPECT_EQ(twice(50), r(50));
  EXPECT_EQ(r.describe(),
            "rescaled(from_step=40, old_end=100, new_end=70, schedule=" + base.describe() + ")");
  EXPECT_EQ(
      th::testing::error_message<th::InvalidArgument>([&] { th::rescaled(base, 40, 40, 70); }),
      "rescaled: needs 0 <= from_step < old_end and from_step < new_end, got from_step=40, "
      "old_end=40, new_end=70");
}

TEST(StopAtStepHookSetLastStepTest, MovesTheStopAndTheTargetWhileTraining) {
  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
  auto stop = std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.last_step = 50});
  auto sess = th::testing::chief_session(m.g, {stop}, fe.env());
  EXPECT_EQ(sess->services().stop_at_step(), 50);
  for (int i = 0; i < 5; ++i) sess->run(m.train, m.feed());
  stop->set_last_step(8);
  EXPECT_EQ(sess->services().stop_at_step(), 8);
  while (!sess->should_stop()) sess->run(m.train, m.feed());
  EXPECT_EQ(m.g.global_step_value(), 8);
}

}  // namespace time_budget_hook_test
