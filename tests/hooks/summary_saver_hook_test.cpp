#include "trainhooks/hooks/summary_saver_hook.h"

#include <torch/torch.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/hooks/step_counter_hook.h"
#include "trainhooks/summary/event_reader.h"
#include "trainhooks/summary/event_writer.h"
#include "trainhooks/summary_ops.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;
namespace ts = trainhooks::summary;

namespace summary_saver_hook_test {

// (step, tag, value) of every scalar, and the steps of SessionLog START events.
struct Written {
  std::vector<std::tuple<int64_t, std::string, double>> scalars;
  std::vector<int64_t> starts;
  std::vector<std::string> kinds;  // "<step>:<tag>:<kind>" of non-scalar values
};

Written read_dir(const std::string& dir) {
  Written w;
  for (const auto& e : ts::read_events(dir)) {
    if (e.session_log && e.session_log->status == ts::SessionStatus::kStart)
      w.starts.push_back(e.step);
    for (const auto& v : e.values) {
      if (v.kind == ts::ValueKind::kScalar) {
        w.scalars.emplace_back(e.step, v.tag, v.scalar);
      } else {
        w.kinds.push_back(std::to_string(e.step) + ":" + v.tag + ":" + ts::value_kind_name(v.kind));
      }
    }
  }
  return w;
}

std::vector<int64_t> steps_of(const Written& w, const std::string& tag) {
  std::vector<int64_t> out;
  for (const auto& [step, t, v] : w.scalars)
    if (t == tag) out.push_back(step);
  return out;
}

struct SummaryModel : th::testing::TinyModel {
  int loss_summary_evaluations = 0;
  th::Node loss_summary;
  SummaryModel() {
    auto counted = g.op("counted_loss", [this](th::Run& r) {
      ++loss_summary_evaluations;
      return r[loss];
    });
    loss_summary = ts::scalar(g, "loss", counted);
  }
};

TEST(SummarySaverHookTest, WritesOnTheFirstRunThenEverySaveStepsAtTheGlobalStep) {
  th::testing::FakeEnv fake;
  th::testing::TempDir dir;
  SummaryModel m;
  auto hook = std::make_shared<th::SummarySaverHook>(
      th::SummarySaverHookOptions{.save_steps = 8, .output_dir = dir.path()});
  {
    auto sess = th::testing::chief_session(m.g, {hook}, fake.env());
    for (int i = 0; i < 30; ++i) sess->run(m.train, m.feed());
  }
  auto w = read_dir(dir.path());
  // TF's test: save_steps=8 over 30 steps writes at global steps 1, 9, 17, 25.
  EXPECT_EQ(steps_of(w, "loss"), (std::vector<int64_t>{1, 9, 17, 25}));
  // Summary nodes are evaluated only on the steps that are written.
  EXPECT_EQ(m.loss_summary_evaluations, 4);
  EXPECT_EQ(w.starts, (std::vector<int64_t>{1}));
}

TEST(SummarySaverHookTest, SaveSecsFollowsTheClock) {
  th::testing::FakeEnv fake;
  th::testing::TempDir dir;
  SummaryModel m;
  auto hook = std::make_shared<th::SummarySaverHook>(
      th::SummarySaverHookOptions{.save_secs = 1.0, .output_dir = dir.path()});
  {
    auto sess = th::testing::chief_session(m.g, {hook}, fake.env());
    for (int i = 0; i < 10; ++i) {
      sess->run(m.train, m.feed());
      fake.clock->advance(0.3);
    }
  }
  // Clock at step s (before its run) is 0.3 * (s - 1): triggers at 1, then at steps 5 (1.2 s) and 9
  // (2.4 s).
  EXPECT_EQ(steps_of(read_dir(dir.path()), "loss"), (std::vector<int64_t>{1, 5, 9}));
}

TEST(SummarySaverHookTest, WritesEveryKindOfSummary) {
  th::testing::FakeEnv fake;
  th::testing::TempDir dir;
  th::testing::TinyModel m;
  ts::histogram(m.g, "w", m.w);
  auto img = m.g.constant("img", torch::rand({2, 3, 4, 4}));
  ts::image(m.g, "inputs", img, {.max_outputs = 2});
  ts::text(m.g, "note", [](th::Run& r) { return "step " + std::to_string(r.global_step()); });
  auto writer = std::make_shared<ts::EventWriter>(dir.path());
  auto hook = std::make_shared<th::SummarySaverHook>(
      th::SummarySaverHookOptions{.save_steps = 100, .summary_writer = writer});
  {
    auto sess = th::testing::chief_session(m.g, {hook}, fake.env());
    sess->run(m.train, m.feed());
  }
  writer->close();
  auto w = read_dir(dir.path());
  EXPECT_THAT(w.kinds, ::testing::ElementsAre("1:w:histogram", "1:inputs/image/0:image",
                                              "1:inputs/image/1:image", "1:note:text"));
  auto events = ts::read_events(dir.path());
  std::string text;
  for (const auto& e : events)
    for (const auto& v : e.values)
      if (v.tag == "note") text = v.text;
  EXPECT_EQ(text, "step 1");  // evaluated in the run, after the train op
}

TEST(SummarySaverHookTest, ExplicitSummariesOnlyAndBadArguments) {
  th::testing::FakeEnv fake;
  th::testing::TempDir dir;
  SummaryModel m;
  auto other = ts::scalar(m.g, "w", m.w);
  auto hook = std::make_shared<th::SummarySaverHook>(
      th::SummarySaverHookOptions{.save_steps = 1, .output_dir = dir.path(), .summaries = {other}});
  {
    auto sess = th::testing::chief_session(m.g, {hook}, fake.env());
    sess->run(m.train, m.feed());
    sess->run(m.train, m.feed());
  }
  auto w = read_dir(dir.path());
  EXPECT_EQ(steps_of(w, "w"), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(steps_of(w, "loss").empty());
  EXPECT_EQ(m.loss_summary_evaluations, 0);

  EXPECT_THROW(th::SummarySaverHook({.save_steps = 1}), th::InvalidArgument);
  EXPECT_THROW(th::SummarySaverHook({.save_steps = 1, .save_secs = 1, .output_dir = "x"}),
               th::InvalidArgument);
  EXPECT_THROW(th::SummarySaverHook({.output_dir = "x"}), th::InvalidArgument);
  th::testing::TinyModel m2;
  auto not_summary = std::make_shared<th::SummarySaverHook>(th::SummarySaverHookOptions{
      .save_steps = 1, .output_dir = dir.path(), .summaries = {m2.loss}});
  EXPECT_THROW(th::testing::chief_session(m2.g, {not_summary}, fake.env()), th::InvalidArgument);
}

TEST(SummarySaverHookTest, RejectsBadOptionsWithTensorFlowsTexts) {
  auto message = [](th::SummarySaverHookOptions o) {
    return th::testing::error_message<th::InvalidArgument>([&] { th::SummarySaverHook h(o); });
  };
  EXPECT_EQ(message({.save_steps = 1, .save_secs = 1, .output_dir = "x"}),
            "Can not provide both save_secs and save_steps.");
  EXPECT_EQ(message({.output_dir = "x"}), "Either save_secs or save_steps should be provided.");
  EXPECT_EQ(message({.save_steps = 0, .output_dir = "x"}),
            "SummarySaverHook: save_steps must be positive, got 0");
  EXPECT_EQ(message({.save_secs = -3, .output_dir = "x"}),
            "SummarySaverHook: save_secs must be positive, got -3");
  EXPECT_EQ(message({.save_steps = 1}),
            "SummarySaverHook: exactly one of output_dir and summary_writer must be provided.");
}

TEST(SummarySaverHookTest, StepCounterWritesStepsPerSecond) {
  th::testing::FakeEnv fake;
  th::testing::TempDir dir;
  th::testing::TinyModel m;
  auto hook = std::make_shared<th::StepCounterHook>(
      th::StepCounterHookOptions{.every_n_steps = 5, .output_dir = dir.path()});
  {
    auto sess = th::testing::chief_session(m.g, {hook}, fake.env());
    for (int i = 0; i < 11; ++i) {
      fake.clock->advance(0.25);
      sess->run(m.train, m.feed());
    }
  }
  ts::EventWriter::for_logdir(dir.path())->flush();
  auto w = read_dir(dir.path());
  // Baseline at step 1, then 5 steps per 1.25 fake seconds at steps 6 and 11.
  ASSERT_EQ(w.scalars.size(), 2u);
  EXPECT_EQ(w.scalars[0], std::make_tuple(int64_t{6}, std::string("global_step/sec"), 4.0));
  EXPECT_EQ(w.scalars[1], std::make_tuple(int64_t{11}, std::string("global_step/sec"), 4.0));
}

TEST(SummarySaverHookTest, MonitoredTrainingSessionWritesSummariesToSummaryDir) {
  th::testing::FakeEnv fake;
  th::testing::TempDir dir;
  SummaryModel m;
  {
    th::MonitoredTrainingSession sess(m.g,
                                      {.summary_dir = dir.path(),
                                       .summaries = {.save_steps = 10, .log_step_count_steps = 10},
                                       .env = fake.env()});
    for (int i = 0; i < 25; ++i) {
      fake.clock->advance(0.5);
      sess.run(m.train, m.feed());
    }
  }
  ts::EventWriter::for_logdir(dir.path())->flush();
  auto w = read_dir(dir.path());
  EXPECT_EQ(steps_of(w, "loss"), (std::vector<int64_t>{1, 11, 21}));
  EXPECT_EQ(steps_of(w, "global_step/sec"), (std::vector<int64_t>{11, 21}));
  EXPECT_EQ(w.starts, (std::vector<int64_t>{1}));
}

TEST(SummarySaverHookTest, SummaryOpsRejectBadInput) {
  th::testing::TinyModel m;
  EXPECT_THROW(ts::scalar(m.g, "", m.loss), th::InvalidArgument);
  EXPECT_THROW(ts::scalar(m.g, "x", "missing"), th::NotFoundError);
  ts::scalar(m.g, "dup", m.loss);
  EXPECT_THROW(ts::scalar(m.g, "dup", m.loss), th::AlreadyExistsError);
  EXPECT_THROW(ts::image(m.g, "img", m.loss, {.max_outputs = 0}), th::InvalidArgument);
  auto vec = m.g.constant("vec", torch::ones({3}));
  auto bad = ts::scalar(m.g, "vec", vec);
  ts::Summary s;
  try {
    ts::add_value(m.g, bad, torch::ones({3}), s);
    FAIL();
  } catch (const th::InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "summary scalar 'vec': the value must have one element, got 3");
  }
  EXPECT_EQ(ts::merge_all(m.g).size(), 2u);
  EXPECT_EQ(m.g.name(ts::merge_all(m.g)[0]), "summaries/dup");
}

}  // namespace summary_saver_hook_test
