#include "trainhooks/hooks/learning_rate_schedule_hook.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/optim/sgd.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/optimizers.h"
#include "trainhooks/summary/event_reader.h"
#include "trainhooks/summary/event_writer.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;
using ::testing::ElementsAre;
using ::testing::Pair;

namespace learning_rate_schedule_hook_test {

// Records, in before_run, the global step and the first parameter group's rate; listed after the
// hook under test, it sees the rate the coming step trains with.
struct RateRecorder : th::SessionRunHook {
  explicit RateRecorder(th::Node t) : train(t) {}
  th::SessionRunArgs before_run(th::SessionRunContext&) override {
    seen.emplace_back(graph().global_step_value(), th::learning_rate(graph().optimizer(train)));
    return {};
  }
  th::Node train;
  std::vector<std::pair<int64_t, double>> seen;
};

// The `learning_rate` scalars of `dir` as (step, value).
std::vector<std::pair<int64_t, float>> learning_rate_events(const std::string& dir) {
  std::vector<std::pair<int64_t, float>> out;
  for (const auto& e : th::summary::read_events(dir)) {
    for (const auto& v : e.values) {
      EXPECT_EQ(v.tag, "learning_rate");
      EXPECT_EQ(v.kind, th::summary::ValueKind::kScalar);
      out.emplace_back(e.step, static_cast<float>(v.scalar));
    }
  }
  return out;
}

class LearningRateScheduleHookTest : public ::testing::Test {
 protected:
  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
};

TEST_F(LearningRateScheduleHookTest, EachStepTrainsWithTheScheduleOfItsGlobalStep) {
  auto schedule = th::exponential_decay(0.1, 1, 0.5);  // 0.1, 0.05, 0.025, ...
  auto hook = std::make_shared<th::LearningRateScheduleHook>(m.train, schedule);
  auto recorder = std::make_shared<RateRecorder>(m.train);
  auto sess = th::testing::chief_session(m.g, {hook, recorder}, fe.env());
  // Set when the session is created, before any step.
  EXPECT_EQ(th::learning_rate(m.g.optimizer(m.train)), 0.1);
  float w = 0;
  for (int i = 0; i < 5; ++i) {
    sess->run(m.train, m.feed());
    // loss = (w - 2)^2 at x = 1: one SGD step with the step's rate.
    w -= static_cast<float>(schedule(i) * 2 * (w - 2));
    EXPECT_NEAR(m.g.variable_value(m.w).item<float>(), w, 1e-6) << "step " << i;
  }
  EXPECT_THAT(recorder->seen, ElementsAre(Pair(0, 0.1), Pair(1, 0.05), Pair(2, 0.025),
                                          Pair(3, 0.0125), Pair(4, 0.00625)));
  EXPECT_THAT(fe.log->messages(),
              ElementsAre("Learning rate of train: exponential_decay(learning_rate=0.1, "
                          "decay_steps=1, decay_rate=0.5, staircase=false); 0.1 at step 0"));
}

TEST_F(LearningRateScheduleHookTest, SetsEveryParameterGroup) {
  th::Graph g;
  auto a = g.variable("a", at::zeros({}));
  auto b = g.variable("b", at::zeros({}));
  auto loss = g.op("loss", [=](th::Run& r) { return (r[a] + r[b] - 2).square(); });
  th::OptimizerFactory two_groups{
      "sgd", [](std::vector<at::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
        std::vector<torch::optim::OptimizerParamGroup> groups;
        groups.emplace_back(std::vector<at::Tensor>{params[0]},
                            std::make_unique<torch::optim::SGDOptions>(0.5));
        groups.emplace_back(std::vector<at::Tensor>{params[1]},
                            std::make_unique<torch::optim::SGDOptions>(0.7));
        return std::make_unique<torch::optim::SGD>(std::move(groups),
                                                   torch::optim::SGDOptions(0.9));
      }};
  auto train = g.minimize("train", loss, two_groups);
  auto hook = std::make_shared<th::LearningRateScheduleHook>(
      train, th::piecewise_constant({1}, {0.01, 0.001}));
  auto sess = th::testing::chief_session(g, {hook}, fe.env());
  auto rates = [&] {
    std::vector<double> out;
    for (auto& group : g.optimizer(train).param_groups()) out.push_back(group.options().get_lr());
    return out;
  };
  EXPECT_THAT(rates(), ElementsAre(0.01, 0.01));
  sess->run(train);
  sess->run(train);
  sess->run(train);  // runs at global step 2
  EXPECT_THAT(rates(), ElementsAre(0.001, 0.001));
}

TEST_F(LearningRateScheduleHookTest, WritesTheRateOnTheFirstStepThenEveryNSteps) {
  th::testing::TempDir dir;
  auto writer = std::make_shared<th::summary::EventWriter>(dir.path());
  auto schedule = th::cosine_decay(0.1, 10);
  auto hook = std::make_shared<th::LearningRateScheduleHook>(
      m.train, schedule,
      th::LearningRateScheduleHookOptions{.every_n_steps = 3, .summary_writer = writer});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  for (int i = 0; i < 8; ++i) sess->run(m.train, m.feed());
  writer->flush();
  EXPECT_THAT(learning_rate_events(dir.path()),
              ElementsAre(Pair(1, static_cast<float>(schedule(0))),
                          Pair(4, static_cast<float>(schedule(3))),
                          Pair(7, static_cast<float>(schedule(6)))));
}

TEST_F(LearningRateScheduleHookTest, DefaultsToEvery100StepsIntoOutputDir) {
  th::testing::TempDir dir;
  auto schedule = th::inverse_time_decay(0.1, 50, 1.0);
  auto hook = std::make_shared<th::LearningRateScheduleHook>(
      m.train, schedule, th::LearningRateScheduleHookOptions{.output_dir = dir.path()});
  {
    auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
    for (int i = 0; i < 201; ++i) sess->run(m.train, m.feed());
  }
  th::summary::EventWriter::clear_cache();  // closes and flushes the directory's writer
  EXPECT_THAT(learning_rate_events(dir.path()),
              ElementsAre(Pair(1, 0.1f), Pair(101, static_cast<float>(0.1 / 3)),
                          Pair(201, static_cast<float>(0.1 / 5))));
}

TEST_F(LearningRateScheduleHookTest, WithoutAWriterWritesNoSummary) {
  auto hook = std::make_shared<th::LearningRateScheduleHook>(m.train, th::constant(0.3));
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  for (int i = 0; i < 3; ++i) sess->run(m.train, m.feed());
  EXPECT_EQ(th::learning_rate(m.g.optimizer(m.train)), 0.3);
}

TEST_F(LearningRateScheduleHookTest, ResumedRunTrainsWithTheRatesOfAnUninterruptedOne) {
  th::testing::TempDir tmp;
  auto schedule = th::linear_warmup(4, th::exponential_decay(0.2, 3, 0.5));
  // Trains to `last_step` with checkpoints in `dir`; returns w and the rates each step used.
  auto train = [&](th::testing::TinyModel& model, const std::string& dir, int64_t last_step) {
    auto recorder = std::make_shared<RateRecorder>(model.train);
    th::Hooks hooks{std::make_shared<th::LearningRateScheduleHook>(model.train, schedule),
                    recorder};
    th::MonitoredTrainingSession sess(model.g,
                                      {.checkpoint_dir = dir,
                                       .hooks = hooks,
                                       .checkpoints = {.save_steps = 100},
                                       .summaries = {.save_steps = 0, .log_step_count_steps = 0},
                                       .handle_preemption_signals = false,
                                       .env = fe.env()});
    while (model.g.global_step_value() < last_step) sess.run(model.train, model.feed());
    return std::make_pair(model.g.variable_value(model.w).item<float>(), recorder->seen);
  };
  th::testing::TinyModel straight_model;
  const auto straight = train(straight_model, tmp.file("straight"), 10);

  th::testing::TinyModel first, second;
  const auto before = train(first, tmp.file("resumed"), 6);  // the final checkpoint is at 6
  // The restored optimizer holds the rate step 5 used; the hook sets step 6's at creation.
  const auto after = train(second, tmp.file("resumed"), 10);
  EXPECT_THAT(fe.log->messages(), ::testing::Contains("Restoring parameters from " +
                                                      tmp.file("resumed") + "/model.ckpt-6"));
  auto rates = before.second;
  rates.insert(rates.end(), after.second.begin(), after.second.end());
  EXPECT_EQ(rates, straight.second);
  ASSERT_EQ(rates.size(), 10u);
  for (int64_t s = 0; s < 10; ++s) EXPECT_EQ(rates[s], std::make_pair(s, schedule(s)));
  EXPECT_EQ(after.first, straight.first);  // bit-identical weights
}

// TensorBoard's reader drops, at each SessionLog START at step s, the points read before it with
// step >= s. The learning rate of a session's first run is tagged with the step SummarySaverHook
// writes START at: written before START, the first point of every run and of every restart was
// lost. Checked with the hook after SummarySaverHook (in `hooks`) and before it (a chief-only
// hook), over a run and its restart.
TEST_F(LearningRateScheduleHookTest,
       TheRateIsWrittenAfterTheSessionStartMarkerSoTensorBoardKeepsIt) {
  for (const bool before_summary_saver : {false, true}) {
    SCOPED_TRACE(before_summary_saver ? "before SummarySaverHook" : "after SummarySaverHook");
    th::testing::TempDir dir;
    th::testing::TinyModel model;
    auto train = [&](int64_t last_step) {
      auto hook = std::make_shared<th::LearningRateScheduleHook>(
          model.train, th::cosine_decay(0.1, 10),
          th::LearningRateScheduleHookOptions{.every_n_steps = 2, .output_dir = dir.path()});
      th::MonitoredTrainingSession sess(
          model.g, {.checkpoint_dir = dir.path(),
                    .hooks = before_summary_saver ? th::Hooks{} : th::Hooks{hook},
                    .chief_only_hooks = before_summary_saver ? th::Hooks{hook} : th::Hooks{},
                    .checkpoints = {.save_steps = 1000},
                    .summaries = {.save_steps = 2, .log_step_count_steps = 0},
                    .handle_preemption_signals = false,
                    .env = fe.env()});
      while (model.g.global_step_value() < last_step) sess.run(model.train, model.feed());
    };
    train(5);  // steps 0-4: rates tagged 1, 3, 5; START at 1
    train(9);  // restored at 5, steps 5-8: rates tagged 6, 8; START at 6
    th::summary::EventWriter::clear_cache();
    std::map<int64_t, float> kept;
    std::vector<int64_t> starts;
    for (const auto& e : th::summary::read_events(dir.path())) {
      if (e.session_log && e.session_log->status == th::summary::SessionStatus::kStart) {
        starts.push_back(e.step);
        kept.erase(kept.lower_bound(e.step), kept.end());
      }
      for (const auto& v : e.values)
        if (v.tag == "learning_rate") kept[e.step] = static_cast<float>(v.scalar);
    }
    EXPECT_THAT(starts, ElementsAre(1, 6));
    EXPECT_THAT(
        kept, ElementsAre(Pair(1, 0.1f), Pair(3, static_cast<float>(th::cosine_decay(0.1, 10)(2))),
                          Pair(5, static_cast<float>(th::cosine_decay(0.1, 10)(4))),
                          Pair(6, static_cast<float>(th::cosine_decay(0.1, 10)(5))),
                          Pair(8, static_cast<float>(th::cosine_decay(0.1, 10)(7)))));
  }
}

// set_schedule: the next rate set, and the log of the next session creation, are the new
// schedule's.
TEST_F(LearningRateScheduleHookTest, SetScheduleAppliesFromTheNextStep) {
  auto hook = std::make_shared<th::LearningRateScheduleHook>(m.train, th::constant(0.1));
  auto recorder = std::make_shared<RateRecorder>(m.train);
  auto sess = th::testing::chief_session(m.g, {hook, recorder}, fe.env());
  sess->run(m.train, m.feed());
  hook->set_schedule(th::constant(0.05));
  EXPECT_EQ(hook->schedule().describe(), "constant(learning_rate=0.05)");
  sess->run(m.train, m.feed());
  EXPECT_THAT(recorder->seen, ElementsAre(Pair(0, 0.1), Pair(1, 0.05)));
}

TEST_F(LearningRateScheduleHookTest, RejectsBadOptions) {
  auto message = [&](th::LearningRateScheduleHookOptions o, th::Node train) {
    return th::testing::error_message<th::InvalidArgument>(
        [&] { th::LearningRateScheduleHook h(train, th::constant(0.1), o); });
  };
  th::testing::TempDir dir;
  auto writer = std::make_shared<th::summary::EventWriter>(dir.path());
  EXPECT_EQ(message({.output_dir = dir.path(), .summary_writer = writer}, m.train),
            "LearningRateScheduleHook: at most one of output_dir and summary_writer may be "
            "provided.");
  EXPECT_EQ(message({.every_n_steps = 10, .every_n_secs = 1.0}, m.train),
            "Can not provide both every_n_secs and every_n_steps.");
  EXPECT_EQ(message({.every_n_steps = 0}, m.train),
            "LearningRateScheduleHook: every_n_steps must be positive, got 0");
  EXPECT_EQ(message({.every_n_secs = -2.0}, m.train),
            "LearningRateScheduleHook: every_n_secs must be positive, got -2");
  EXPECT_EQ(message({}, th::Node{}), "LearningRateScheduleHook: train_op is not a node");
  EXPECT_EQ(message({.every_n_secs = 5.0}, m.train), "");
}

TEST_F(LearningRateScheduleHookTest, NeedsATrainOpAndAGlobalStep) {
  auto not_train = std::make_shared<th::LearningRateScheduleHook>(m.loss, th::constant(0.1));
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [&] { th::testing::chief_session(m.g, {not_train}, fe.env()); }),
            "LearningRateScheduleHook: train_op 'loss' is not a train op");

  th::Graph g;
  auto x = g.placeholder("x", {.dtype = at::kFloat});
  auto y = g.op("y", [=](th::Run& r) { return r[x] + 1; });
  auto hook = std::make_shared<th::LearningRateScheduleHook>(y, th::constant(0.1));
  EXPECT_EQ(th::testing::error_message<th::RuntimeError>(
                [&] { th::testing::chief_session(g, {hook}, fe.env()); }),
            "Global step should be created to use LearningRateScheduleHook.");
}

TEST_F(LearningRateScheduleHookTest, RejectsANegativeRateFromACustomSchedule) {
  th::LearningRateSchedule down([](int64_t s) { return s < 2 ? 0.1 : -1.0; }, "down");
  auto hook = std::make_shared<th::LearningRateScheduleHook>(m.train, down);
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  sess->run(m.train, m.feed());
  sess->run(m.train, m.feed());
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>([&] { sess->run(m.train, m.feed()); }),
            "LearningRateScheduleHook: the schedule down gave the learning rate -1 for step 2");
}

}  // namespace learning_rate_schedule_hook_test
