#include "trainhooks/hooks/reduce_lr_on_plateau_hook.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/hooks/learning_rate_schedule_hook.h"
#include "trainhooks/latest_metrics.h"
#include "trainhooks/learning_rate_schedule.h"
#include "trainhooks/optimizers.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace reduce_lr_on_plateau_hook_test {

// Publishes metric values when the global step reaches chosen steps (in after_run), as an
// evaluation hook does.
struct Publisher : th::SessionRunHook {
  Publisher(std::string n, std::map<int64_t, double> v)
      : name(std::move(n)), values(std::move(v)) {}
  void after_run(th::SessionRunContext&, const th::SessionRunValues&) override {
    const int64_t step = graph().global_step_value();
    if (auto it = values.find(step); it != values.end())
      services().metrics().publish(name, it->second, step, 0);
  }
  std::string name;
  std::map<int64_t, double> values;
};

// Records the first group's rate in before_run: listed last, it sees the rate each step uses.
struct RateRecorder : th::SessionRunHook {
  explicit RateRecorder(th::Node t) : train(t) {}
  th::SessionRunArgs before_run(th::SessionRunContext&) override {
    rates.push_back(th::learning_rate(graph().optimizer(train)));
    return {};
  }
  th::Node train;
  std::vector<double> rates;
};

// The sequence of Keras's rules worked through by hand below, one value every 2 steps.
const std::map<int64_t, double> kLosses{{2, 4.0},  {4, 3.875}, {6, 3.75}, {8, 5.0},
                                        {10, 5.0}, {12, 3.5},  {14, 3.5}, {16, 3.5},
                                        {18, 3.5}, {20, 3.5},  {22, 3.5}};
const th::ReduceLROnPlateauOptions kOptions{.monitor = "eval/loss",
                                            .factor = 0.5,
                                            .patience = 2,
                                            .cooldown = 1,
                                            .min_lr = 0.02,
                                            .min_delta = 0.25};

// The rate each of the 23 steps (global steps 0..22) trains with under kLosses and kOptions:
//   step 2: 4.0 best.  4: 3.875 is not below 4 - 0.25: wait 1.  6: 3.75 neither (strict): wait 2
//   -> 0.1 -> 0.05, cooldown 1.  8: cooldown ends (wait 0), 5.0 no better: wait 1.  10: wait 2
//   -> 0.025, cooldown 1.  12: cooldown ends, 3.5 < 3.75: best.  14: wait 1.  16: wait 2 ->
//   max(0.0125, min_lr) = 0.02, cooldown 1.  18: cooldown ends, wait 1.  20: wait 2, but the rate
//   is at min_lr: unchanged.  22: wait 3.
std::vector<double> keras_rates() {
  std::vector<double> r(23);
  for (int s = 0; s < 23; ++s) r[s] = s < 6 ? 0.1 : s < 10 ? 0.05 : s < 16 ? 0.025 : 0.02;
  return r;
}

const std::vector<std::string> kKerasLog{
    "ReduceLROnPlateauHook: eval/loss did not improve for 2 evaluations; learning rate 0.1 -> "
    "0.05 (step 6)",
    "ReduceLROnPlateauHook: eval/loss did not improve for 2 evaluations; learning rate 0.05 -> "
    "0.025 (step 10)",
    "ReduceLROnPlateauHook: eval/loss did not improve for 2 evaluations; learning rate 0.025 -> "
    "0.02 (step 16)"};

class ReduceLROnPlateauHookTest : public ::testing::Test {
 protected:
  std::vector<std::string> info() const { return fe.log->messages(th::LogLevel::kInfo); }
  std::vector<std::string> warnings() const { return fe.log->messages(th::LogLevel::kWarning); }
  double rate(th::testing::TinyModel& model) const {
    return th::learning_rate(model.g.optimizer(model.train));
  }

  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
};

TEST_F(ReduceLROnPlateauHookTest, FollowsKerasRulesWhicheverHookPublishesFirst) {
  for (bool publisher_first : {true, false}) {
    SCOPED_TRACE(publisher_first ? "publisher first" : "publisher last");
    th::testing::TinyModel model;
    fe.log->clear();
    auto publisher = std::make_shared<Publisher>("eval/loss", kLosses);
    auto hook = std::make_shared<th::ReduceLROnPlateauHook>(model.train, kOptions);
    auto recorder = std::make_shared<RateRecorder>(model.train);
    th::Hooks hooks = publisher_first ? th::Hooks{publisher, hook, recorder}
                                      : th::Hooks{hook, publisher, recorder};
    auto sess = th::testing::chief_session(model.g, hooks, fe.env());
    std::vector<std::tuple<double, int64_t, int64_t>> states;  // best, wait, cooldown
    for (int i = 0; i < 23; ++i) {
      sess->run(model.train, model.feed());
      if (i % 2 == 0 && i > 0)
        states.emplace_back(hook->best(), hook->wait(), hook->cooldown_counter());
    }
    EXPECT_EQ(recorder->rates, keras_rates());
    EXPECT_EQ(info(), kKerasLog);
    EXPECT_TRUE(warnings().empty());
    // After each value (seen by the run after it was published, in both orders).
    using S = std::tuple<double, int64_t, int64_t>;
    EXPECT_THAT(states, ElementsAre(S{4.0, 0, 0}, S{4.0, 1, 0}, S{4.0, 0, 1}, S{4.0, 1, 0},
                                    S{4.0, 0, 1}, S{3.5, 0, 0}, S{3.5, 1, 0}, S{3.5, 0, 1},
                                    S{3.5, 1, 0}, S{3.5, 2, 0}, S{3.5, 3, 0}));
    EXPECT_EQ(hook->wait(), 3);
    EXPECT_EQ(hook->reductions(), 3);
    EXPECT_DOUBLE_EQ(hook->learning_rate_scale(), 0.2);
    EXPECT_EQ(rate(model), 0.02);
  }
}

TEST_F(ReduceLROnPlateauHookTest, MaxModeReducesWhenTheMetricStopsRising) {
  auto publisher = std::make_shared<Publisher>(
      "eval/accuracy", std::map<int64_t, double>{{1, 0.5}, {2, 0.5}, {3, 0.75}, {4, 0.6}});
  auto hook = std::make_shared<th::ReduceLROnPlateauHook>(
      m.train, th::ReduceLROnPlateauOptions{
                   .monitor = "eval/accuracy", .mode = th::PlateauMode::kMax, .patience = 1});
  auto sess = th::testing::chief_session(m.g, {publisher, hook}, fe.env());
  for (int i = 0; i < 4; ++i) sess->run(m.train, m.feed());
  EXPECT_EQ(info(), (std::vector<std::string>{
                        "ReduceLROnPlateauHook: eval/accuracy did not improve for 1 evaluation; "
                        "learning rate 0.1 -> 0.01 (step 2)",
                        "ReduceLROnPlateauHook: eval/accuracy did not improve for 1 evaluation; "
                        "learning rate 0.01 -> 0.001 (step 4)"}));
  EXPECT_EQ(hook->best(), 0.75);
  EXPECT_DOUBLE_EQ(rate(m), 0.001);
}

TEST_F(ReduceLROnPlateauHookTest, ImprovementMustBeatMinDeltaAndNanNeverImproves) {
  auto publisher = std::make_shared<Publisher>(
      "eval/loss", std::map<int64_t, double>{{1, 1.0},
                                             {2, 0.99995},  // within the default min_delta 1e-4
                                             {3, 0.5},
                                             {4, std::numeric_limits<double>::quiet_NaN()}});
  auto hook = std::make_shared<th::ReduceLROnPlateauHook>(
      m.train, th::ReduceLROnPlateauOptions{.monitor = "eval/loss", .patience = 1});
  auto sess = th::testing::chief_session(m.g, {publisher, hook}, fe.env());
  sess->run(m.train, m.feed());
  sess->run(m.train, m.feed());
  EXPECT_EQ(hook->reductions(), 1);
  EXPECT_EQ(hook->best(), 1.0);
  sess->run(m.train, m.feed());
  EXPECT_EQ(hook->best(), 0.5);
  sess->run(m.train, m.feed());
  EXPECT_EQ(hook->reductions(), 2);
  EXPECT_EQ(hook->best(), 0.5);
}

TEST_F(ReduceLROnPlateauHookTest, ActsOncePerPublishNotPerStep) {
  auto publisher =
      std::make_shared<Publisher>("eval/loss", std::map<int64_t, double>{{1, 2.0}, {30, 2.0}});
  auto hook = std::make_shared<th::ReduceLROnPlateauHook>(
      m.train, th::ReduceLROnPlateauOptions{.monitor = "eval/loss", .patience = 2});
  auto sess = th::testing::chief_session(m.g, {publisher, hook}, fe.env());
  for (int i = 0; i < 29; ++i) sess->run(m.train, m.feed());
  EXPECT_EQ(hook->best(), 2.0);
  EXPECT_EQ(hook->wait(), 0);
  sess->run(m.train, m.feed());  // the same value again is a new evaluation
  EXPECT_EQ(hook->wait(), 1);
  for (int i = 0; i < 10; ++i) sess->run(m.train, m.feed());
  EXPECT_EQ(hook->wait(), 1);
  EXPECT_EQ(rate(m), 0.1);
}

TEST_F(ReduceLROnPlateauHookTest, ValuesPublishedBeforeTheSessionAreNotActedOn) {
  th::latest_metrics(m.g).publish("eval/loss", 1.0, 0, 0);
  auto hook = std::make_shared<th::ReduceLROnPlateauHook>(
      m.train, th::ReduceLROnPlateauOptions{.monitor = "eval/loss", .patience = 0});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  for (int i = 0; i < 3; ++i) sess->run(m.train, m.feed());
  EXPECT_EQ(hook->best(), std::numeric_limits<double>::infinity());
  th::latest_metrics(m.g).publish("eval/loss", 1.0, 3, 0);
  sess->run(m.train, m.feed());
  EXPECT_EQ(hook->best(), 1.0);
}

TEST_F(ReduceLROnPlateauHookTest, WarnsOnceWhenTheMonitorIsNotAmongTheMetrics) {
  auto accuracy = std::make_shared<Publisher>(
      "eval/accuracy", std::map<int64_t, double>{{3, 0.5}, {6, 0.6}, {9, 0.7}});
  auto top5 = std::make_shared<Publisher>("eval/top5", std::map<int64_t, double>{{3, 0.9}});
  auto hook = std::make_shared<th::ReduceLROnPlateauHook>(
      m.train, th::ReduceLROnPlateauOptions{.monitor = "eval/loss"});
  auto sess = th::testing::chief_session(m.g, {accuracy, top5, hook}, fe.env());
  for (int i = 0; i < 2; ++i) sess->run(m.train, m.feed());
  EXPECT_TRUE(warnings().empty());  // nothing published yet
  for (int i = 0; i < 10; ++i) sess->run(m.train, m.feed());
  EXPECT_THAT(warnings(),
              ElementsAre("ReduceLROnPlateauHook: the monitored metric 'eval/loss' has not been "
                          "published; the learning rate is not reduced until it is "
                          "published. Available metrics: eval/accuracy, eval/top5"));
  EXPECT_EQ(rate(m), 0.1);
}

TEST_F(ReduceLROnPlateauHookTest, ScalesALearningRateScheduleInAnyHookOrder) {
  auto schedule = th::piecewise_constant({5}, {0.1, 0.05});
  // Steps 0-2 at the schedule's rate; the value published at step 3 halves the rest.
  const std::vector<double> want{0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025};
  for (int order = 0; order < 3; ++order) {
    SCOPED_TRACE(testing::Message() << "order " << order);
    th::testing::TinyModel model;
    fe.log->clear();
    auto sched = std::make_shared<th::LearningRateScheduleHook>(model.train, schedule);
    auto publisher =
        std::make_shared<Publisher>("eval/loss", std::map<int64_t, double>{{2, 1.0}, {3, 1.0}});
    auto plateau = std::make_shared<th::ReduceLROnPlateauHook>(
        model.train,
        th::ReduceLROnPlateauOptions{.monitor = "eval/loss", .factor = 0.5, .patience = 1});
    auto recorder = std::make_shared<RateRecorder>(model.train);
    th::Hooks hooks = order == 0   ? th::Hooks{sched, publisher, plateau, recorder}
                      : order == 1 ? th::Hooks{plateau, sched, publisher, recorder}
                                   : th::Hooks{sched, plateau, publisher, recorder};
    auto sess = th::testing::chief_session(model.g, hooks, fe.env());
    for (int i = 0; i < 8; ++i) sess->run(model.train, model.feed());
    EXPECT_EQ(recorder->rates, want);
    EXPECT_EQ(plateau->learning_rate_scale(), 0.5);
    EXPECT_THAT(info(), ::testing::Contains(
                            "ReduceLROnPlateauHook: eval/loss did not improve for 1 evaluation; "
                            "learning rate 0.1 -> 0.05 (step 3)"));
  }
}

TEST_F(ReduceLROnPlateauHookTest, ResumedRunMatchesAnUninterruptedOne) {
  th::testing::TempDir tmp;
  struct Run {
    float w;
    std::vector<double> rates;
    double best, scale;
    int64_t wait, cooldown, reductions;
  };
  // Trains a fresh model to `last_step` with checkpoints in `dir`; the hooks are new each time,
  // as in a new process. `check` sees the plateau hook right after the session was created.
  auto train = [&](const std::string& dir, int64_t last_step, auto check) {
    th::testing::TinyModel model;
    auto hook = std::make_shared<th::ReduceLROnPlateauHook>(model.train, kOptions);
    auto recorder = std::make_shared<RateRecorder>(model.train);
    th::Hooks hooks{std::make_shared<Publisher>("eval/loss", kLosses), hook, recorder};
    th::MonitoredTrainingSession sess(model.g,
                                      {.checkpoint_dir = dir,
                                       .hooks = hooks,
                                       .checkpoints = {.save_steps = 100},
                                       .summaries = {.save_steps = 0, .log_step_count_steps = 0},
                                       .handle_preemption_signals = false,
                                       .env = fe.env()});
    check(*hook, th::learning_rate(model.g.optimizer(model.train)));
    while (model.g.global_step_value() < last_step) sess.run(model.train, model.feed());
    return Run{model.g.variable_value(model.w).item<float>(),
               recorder->rates,
               hook->best(),
               hook->learning_rate_scale(),
               hook->wait(),
               hook->cooldown_counter(),
               hook->reductions()};
  };
  auto nothing = [](const th::ReduceLROnPlateauHook&, double) {};
  const Run straight = train(tmp.file("straight"), 23, nothing);
  // Stops at 11, after the second reduction (step 10), in its cooldown.
  const Run first = train(tmp.file("resumed"), 11, nothing);
  EXPECT_EQ(first.reductions, 2);
  EXPECT_EQ(first.cooldown, 1);
  const Run second =
      train(tmp.file("resumed"), 23, [](const th::ReduceLROnPlateauHook& h, double lr) {
        EXPECT_EQ(h.reductions(), 2);
        EXPECT_EQ(h.cooldown_counter(), 1);
        EXPECT_EQ(h.wait(), 0);
        EXPECT_EQ(h.best(), 4.0);
        EXPECT_DOUBLE_EQ(h.learning_rate_scale(), 0.25);
        EXPECT_EQ(lr, 0.025);
      });
  auto rates = first.rates;
  rates.insert(rates.end(), second.rates.begin(), second.rates.end());
  EXPECT_EQ(rates, keras_rates());
  EXPECT_EQ(rates, straight.rates);
  EXPECT_EQ(second.w, straight.w);  // bit-identical
  EXPECT_EQ(second.best, straight.best);
  EXPECT_EQ(second.scale, straight.scale);
  EXPECT_EQ(second.wait, straight.wait);
  EXPECT_EQ(second.cooldown, straight.cooldown);
  EXPECT_EQ(second.reductions, straight.reductions);
}

TEST_F(ReduceLROnPlateauHookTest, AReusedHookStartsAfreshWithoutACheckpoint) {
  auto publisher = std::make_shared<Publisher>("eval/loss", kLosses);
  auto hook = std::make_shared<th::ReduceLROnPlateauHook>(m.train, kOptions);
  {
    auto sess = th::testing::chief_session(m.g, {publisher, hook}, fe.env());
    for (int i = 0; i < 12; ++i) sess->run(m.train, m.feed());
    EXPECT_EQ(hook->reductions(), 2);
  }
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());  // re-initialises the graph
  EXPECT_EQ(hook->reductions(), 0);
  EXPECT_EQ(hook->best(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(hook->learning_rate_scale(), 1.0);
  EXPECT_EQ(rate(m), 0.1);
}

TEST_F(ReduceLROnPlateauHookTest, StateRoundTripsAndBadStateIsDataLoss) {
  th::ReduceLROnPlateauHook hook(m.train, kOptions);
  EXPECT_EQ(hook.save_state(),
            "reduce_lr_on_plateau 1\nbest inf\nwait 0\ncooldown_counter 0\nscale 1\n"
            "reductions 0\nlast_metric_step -1\nlearning_rates \n");
  const std::string saved =
      "reduce_lr_on_plateau 1\nbest 3.5\nwait 2\ncooldown_counter 1\nscale 0.25\n"
      "reductions 2\nlast_metric_step 10\nlearning_rates 0.025,0.5\n";
  hook.load_state(saved);
  EXPECT_EQ(hook.best(), 3.5);
  EXPECT_EQ(hook.wait(), 2);
  EXPECT_EQ(hook.cooldown_counter(), 1);
  EXPECT_EQ(hook.learning_rate_scale(), 0.25);
  EXPECT_EQ(hook.reductions(), 2);
  EXPECT_EQ(hook.save_state(), saved);

  auto bad = [&](const std::string& bytes) {
    return th::testing::error_message<th::DataLossError>([&] { hook.load_state(bytes); });
  };
  EXPECT_EQ(bad("garbage"),
            "ReduceLROnPlateauHook: cannot read its checkpointed state: unknown format 'garbage'");
  EXPECT_EQ(bad("reduce_lr_on_plateau 1\nbest 1\n"),
            "ReduceLROnPlateauHook: cannot read its checkpointed state: missing wait");
  EXPECT_EQ(bad("reduce_lr_on_plateau 1\nbest x\nwait 0\ncooldown_counter 0\nscale 1\n"
                "reductions 0\nlast_metric_step -1\nlearning_rates \n"),
            "ReduceLROnPlateauHook: cannot read its checkpointed state: best = 'x'");
  EXPECT_EQ(hook.save_state(), saved);  // a failed load changes nothing
}

TEST_F(ReduceLROnPlateauHookTest, RejectsBadOptionsNamingThem) {
  auto message = [&](th::ReduceLROnPlateauOptions o) {
    return th::testing::error_message<th::InvalidArgument>(
        [&] { th::ReduceLROnPlateauHook h(m.train, o); });
  };
  EXPECT_EQ(message({}), "ReduceLROnPlateauHook: monitor must name a metric");
  EXPECT_EQ(message({.monitor = "l", .factor = 1.0}),
            "ReduceLROnPlateauHook: factor must be in (0, 1), got 1");
  EXPECT_EQ(message({.monitor = "l", .factor = 0.0}),
            "ReduceLROnPlateauHook: factor must be in (0, 1), got 0");
  EXPECT_EQ(message({.monitor = "l", .factor = std::nan("")}),
            "ReduceLROnPlateauHook: factor must be in (0, 1), got nan");
  EXPECT_EQ(message({.monitor = "l", .patience = -1}),
            "ReduceLROnPlateauHook: patience must be non-negative, got -1");
  EXPECT_EQ(message({.monitor = "l", .cooldown = -2}),
            "ReduceLROnPlateauHook: cooldown must be non-negative, got -2");
  EXPECT_EQ(message({.monitor = "l", .min_lr = -0.1}),
            "ReduceLROnPlateauHook: min_lr must be a finite, non-negative number, got -0.1");
  EXPECT_EQ(message({.monitor = "l", .min_lr = std::numeric_limits<double>::infinity()}),
            "ReduceLROnPlateauHook: min_lr must be a finite, non-negative number, got inf");
  EXPECT_EQ(message({.monitor = "l", .min_delta = -1e-4}),
            "ReduceLROnPlateauHook: min_delta must be a finite, non-negative number, got -0.0001");
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [&] { th::ReduceLROnPlateauHook h(th::Node{}, {.monitor = "l"}); }),
            "ReduceLROnPlateauHook: train_op is not a node");
  EXPECT_EQ(message({.monitor = "l", .patience = 0}), "");
}

TEST_F(ReduceLROnPlateauHookTest, NeedsATrainOpAndOnePlateauHookPerTrainOp) {
  auto on_loss = std::make_shared<th::ReduceLROnPlateauHook>(
      m.loss, th::ReduceLROnPlateauOptions{.monitor = "eval/loss"});
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [&] { th::testing::chief_session(m.g, {on_loss}, fe.env()); }),
            "ReduceLROnPlateauHook: train_op 'loss' is not a train op");

  th::testing::TinyModel model;
  auto a = std::make_shared<th::ReduceLROnPlateauHook>(
      model.train, th::ReduceLROnPlateauOptions{.monitor = "eval/loss"});
  auto b = std::make_shared<th::ReduceLROnPlateauHook>(
      model.train, th::ReduceLROnPlateauOptions{.monitor = "eval/accuracy"});
  EXPECT_THAT(th::testing::error_message<th::AlreadyExistsError>([&] {
                th::testing::chief_session(model.g, {a, b}, fe.env());
              }),
              HasSubstr("hooks/reduce_lr_on_plateau/train"));
}

}  // namespace reduce_lr_on_plateau_hook_test
