#include "trainhooks/hooks/metrics_logger_hook.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/latest_metrics.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;
using ::testing::ElementsAre;

namespace metrics_logger_hook_test {

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

// The loss of each run, by the global step before it.
struct LossRecorder : th::SessionRunHook {
  explicit LossRecorder(th::Node l) : loss(l) {}
  th::SessionRunArgs before_run(th::SessionRunContext&) override {
    step = graph().global_step_value();
    return {.fetches = {loss}};
  }
  void after_run(th::SessionRunContext&, const th::SessionRunValues& v) override {
    by_step[step] = v.results[loss].item<double>();
  }
  th::Node loss;
  int64_t step = 0;
  std::map<int64_t, double> by_step;
};

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> lines(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(read(path));
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(s);
  while (std::getline(in, field, ',')) out.push_back(field);
  if (!s.empty() && s.back() == ',') out.push_back("");
  return out;
}

// The step column of a CSV file's rows.
std::vector<int64_t> csv_steps(const std::string& path) {
  std::vector<int64_t> steps;
  const auto all = lines(path);
  for (size_t i = 1; i < all.size(); ++i) steps.push_back(std::stoll(split(all[i])[0]));
  return steps;
}

class MetricsLoggerHookTest : public ::testing::Test {
 protected:
  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
  th::testing::TempDir tmp;
};

TEST_F(MetricsLoggerHookTest, WritesACsvRowEveryNStepsWithTheHeaderOnce) {
  const std::string path = tmp.file("metrics.csv");
  auto recorder = std::make_shared<LossRecorder>(m.loss);
  auto hook = std::make_shared<th::MetricsLoggerHook>(th::MetricsLoggerHookOptions{
      .nodes = {m.loss}, .metrics = {"eval/loss"}, .every_n_steps = 2, .path = path});
  auto sess = th::testing::chief_session(
      m.g,
      {std::make_shared<Publisher>("eval/loss", std::map<int64_t, double>{{2, 0.5}}), recorder,
       hook},
      fe.env());
  for (int i = 0; i < 6; ++i) {
    sess->run(m.train, m.feed());
    fe.clock->advance(1.5);
  }
  sess->close();
  const auto all = lines(path);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0], "step,wall_time,loss,eval/loss");
  EXPECT_EQ(hook->columns(), split(all[0]));
  const std::vector<std::string> wall{"1000000001.5", "1000000004.5", "1000000007.5"};
  const std::vector<std::string> eval{"0.5", "", ""};  // once, on the row of its publish
  for (int row = 0; row < 3; ++row) {
    SCOPED_TRACE(row);
    const auto f = split(all[row + 1]);
    ASSERT_EQ(f.size(), 4u);
    EXPECT_EQ(f[0], std::to_string(2 * row + 2));
    EXPECT_EQ(f[1], wall[row]);
    // The loss of the run that produced the step; round-trips exactly.
    EXPECT_EQ(std::stod(f[2]), recorder->by_step.at(2 * row + 1));
    EXPECT_EQ(f[3], eval[row]);
  }
}

TEST_F(MetricsLoggerHookTest, JsonLinesParseWithNullForWhatIsMissing) {
  const std::string path = tmp.file("metrics.jsonl");
  auto hook = std::make_shared<th::MetricsLoggerHook>(
      th::MetricsLoggerHookOptions{.nodes = {"loss"},
                                   .metrics = {"eval/accuracy", "eval/loss"},
                                   .every_n_steps = 1,
                                   .path = path,
                                   .format = th::MetricsFormat::kJsonl});
  auto sess = th::testing::chief_session(
      m.g,
      {std::make_shared<Publisher>(
           "eval/accuracy",
           std::map<int64_t, double>{{1, 0.75}, {2, std::numeric_limits<double>::quiet_NaN()}}),
       hook},
      fe.env());
  for (int i = 0; i < 3; ++i) sess->run(m.train, m.feed());
  sess->close();
  const auto all = lines(path);
  ASSERT_EQ(all.size(), 3u);
  std::vector<nlohmann::json> rows;
  for (const auto& line : all) rows.push_back(nlohmann::json::parse(line));
  EXPECT_EQ(rows[0]["step"], 1);
  EXPECT_EQ(rows[0]["wall_time"], 1e9);
  EXPECT_EQ(rows[0]["loss"], 4.0);  // (0 * 1 - 2)^2, the loss of the first run
  EXPECT_EQ(rows[0]["eval/accuracy"], 0.75);
  EXPECT_TRUE(rows[0]["eval/loss"].is_null());
  EXPECT_EQ(rows[1]["step"], 2);
  EXPECT_TRUE(rows[1]["eval/accuracy"].is_null());  // NaN: JSON has none
  EXPECT_TRUE(rows[2]["eval/accuracy"].is_null());  // nothing new
  EXPECT_THAT(all[0], ::testing::StartsWith("{\"step\":1,\"wall_time\":1000000000,\"loss\":4,"));
}

// Trains a fresh model (new hooks, as a new process) with a checkpoint every 4 steps until the
// global step reaches `until`; kill: leaves by an exception, so no final checkpoint is written.
void train(const std::string& dir, const std::string& path, const th::testing::FakeEnv& fe,
           int64_t until, bool kill) {
  th::testing::TinyModel model;
  auto hook = std::make_shared<th::MetricsLoggerHook>(th::MetricsLoggerHookOptions{
      .nodes = {model.loss}, .metrics = {"eval/loss"}, .every_n_steps = 1, .path = path});
  std::map<int64_t, double> evals;
  for (int64_t s = 3; s < 40; s += 3) evals[s] = 1.0 / static_cast<double>(s);
  try {
    th::MonitoredTrainingSession sess(
        model.g, {.checkpoint_dir = dir,
                  .hooks = {std::make_shared<Publisher>("eval/loss", evals), hook},
                  .checkpoints = {.save_steps = 4},
                  .summaries = {.save_steps = 0, .log_step_count_steps = 0},
                  .handle_preemption_signals = false,
                  .env = fe.env()});
    while (model.g.global_step_value() < until) sess.run(model.train, model.feed());
    if (kill) throw std::runtime_error("killed");
    sess.close();
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()) != "killed") throw;
  }
}

TEST_F(MetricsLoggerHookTest, AResumeAfterAKillContinuesTheFileWithNoDuplicatedOrMissingSteps) {
  const std::string straight = tmp.file("straight.csv");
  train(tmp.file("straight"), straight, fe, 14, false);

  const std::string path = tmp.file("resumed.csv");
  // Killed at step 10 (rows 1-10 written; the last checkpoint is step 8's), with half a row
  // torn at the end of the file.
  train(tmp.file("resumed"), path, fe, 10, true);
  EXPECT_EQ(csv_steps(path).back(), 10);
  std::ofstream(path, std::ios::app) << "11,1000000000,0.1";
  fe.log->clear();
  train(tmp.file("resumed"), path, fe, 14, false);
  EXPECT_THAT(fe.log->messages(),
              ::testing::Contains("MetricsLoggerHook: dropped 3 rows of " + path +
                                  " after step 8, which this run logs again."));
  std::vector<int64_t> want;
  for (int64_t s = 1; s <= 14; ++s) want.push_back(s);
  EXPECT_EQ(csv_steps(path), want);
  EXPECT_EQ(csv_steps(straight), want);
  // The same values as the uninterrupted run, wall time aside.
  const auto a = lines(path);
  const auto b = lines(straight);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    auto fa = split(a[i]);
    auto fb = split(b[i]);
    if (i > 0) fa[1] = fb[1] = "";
    EXPECT_EQ(fa, fb) << "line " << i;
  }
}

TEST_F(MetricsLoggerHookTest, AFreshRunStartsTheFileAnew) {
  const std::string path = tmp.file("metrics.csv");
  std::ofstream(path) << "step,wall_time,loss\n5,1,4\n10,2,3\n";
  auto hook = std::make_shared<th::MetricsLoggerHook>(
      th::MetricsLoggerHookOptions{.nodes = {m.loss}, .every_n_steps = 5, .path = path});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  EXPECT_EQ(hook->dropped_rows(), 2);
  EXPECT_EQ(read(path), "step,wall_time,loss\n");
  for (int i = 0; i < 6; ++i) sess->run(m.train, m.feed());
  EXPECT_EQ(csv_steps(path), (std::vector<int64_t>{5}));
}

TEST_F(MetricsLoggerHookTest, AFileWithOtherColumnsIsAFailedPrecondition) {
  const std::string path = tmp.file("metrics.csv");
  std::ofstream(path) << "step,wall_time,accuracy\n5,1,0.5\n";
  auto hook = std::make_shared<th::MetricsLoggerHook>(
      th::MetricsLoggerHookOptions{.nodes = {m.loss}, .path = path});
  EXPECT_EQ(th::testing::error_message<th::FailedPreconditionError>(
                [&] { th::testing::chief_session(m.g, {hook}, fe.env()); }),
            "MetricsLoggerHook: " + path +
                " has the columns 'step,wall_time,accuracy', this hook writes "
                "'step,wall_time,loss': use another path");
  EXPECT_EQ(read(path), "step,wall_time,accuracy\n5,1,0.5\n");  // untouched
}

TEST_F(MetricsLoggerHookTest, ANodeThatIsNotAScalarIsAnInvalidArgumentAtItsFirstFetch) {
  m.g.op("pair", [](th::Run&) { return at::zeros({2}); });
  auto hook = std::make_shared<th::MetricsLoggerHook>(th::MetricsLoggerHookOptions{
      .nodes = {"pair"}, .every_n_steps = 1, .path = tmp.file("m.csv")});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>([&] { sess->run(m.train, m.feed()); }),
            "MetricsLoggerHook: node 'pair' must be a scalar, got shape [2]");
}

TEST_F(MetricsLoggerHookTest, QuotesCsvHeadersThatNeedIt) {
  const std::string path = tmp.file("metrics.csv");
  auto hook = std::make_shared<th::MetricsLoggerHook>(th::MetricsLoggerHookOptions{
      .metrics = {"top,5", "say \"hi\""}, .every_n_steps = 1, .path = path});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  sess->run(m.train, m.feed());
  sess->close();
  EXPECT_EQ(read(path), "step,wall_time,\"top,5\",\"say \"\"hi\"\"\"\n1,1000000000,,\n");
}

TEST_F(MetricsLoggerHookTest, RejectsBadOptionsNamingThem) {
  auto message = [](th::MetricsLoggerHookOptions o) {
    return th::testing::error_message<th::InvalidArgument>([&] { th::MetricsLoggerHook h(o); });
  };
  EXPECT_EQ(message({.metrics = {"a"}}), "MetricsLoggerHook: path must name a file");
  EXPECT_EQ(message({.metrics = {"a"}, .every_n_steps = 0, .path = "m.csv"}),
            "MetricsLoggerHook: every_n_steps must be positive, got 0");
  EXPECT_EQ(message({.path = "m.csv"}),
            "MetricsLoggerHook: nodes or metrics must name at least one value");
  EXPECT_EQ(message({.metrics = {""}, .path = "m.csv"}),
            "MetricsLoggerHook: metrics must not hold an empty name");
  EXPECT_EQ(message({.metrics = {"a"}, .path = "m.csv", .format = th::MetricsFormat{7}}),
            "MetricsLoggerHook: format must be kCsv or kJsonl, got 7");
  auto twice = std::make_shared<th::MetricsLoggerHook>(th::MetricsLoggerHookOptions{
      .nodes = {m.loss}, .metrics = {"loss"}, .path = tmp.file("m.csv")});
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [&] { th::testing::chief_session(m.g, {twice}, fe.env()); }),
            "MetricsLoggerHook: the column 'loss' appears twice");
}

}  // namespace metrics_logger_hook_test
