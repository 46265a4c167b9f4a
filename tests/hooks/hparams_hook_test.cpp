#include "trainhooks/hooks/hparams_hook.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/preemption.h"
#include "trainhooks/summary/event_reader.h"
#include "trainhooks/summary/event_writer.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;
namespace ths = trainhooks::summary;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace hparams_hook_test {

ths::HParams declared() {
  return {.values = {{"optimizer", "adam"}, {"lr", 0.002}, {"batch", 64}, {"augment", true}},
          .metrics = {{.tag = "accuracy",
                       .group = "eval",
                       .display_name = "test accuracy",
                       .dataset = ths::MetricDataset::kValidation},
                      {.tag = "loss"}},
          .group_name = "sweep-1",
          .model_uri = "runs/a"};
}

// (step, the HParams value) of every HParams summary in `dir`, in file order.
std::vector<std::pair<int64_t, ths::HParamsValue>> hparams_in(const std::string& dir) {
  ths::EventWriter::clear_cache();  // written out
  std::vector<std::pair<int64_t, ths::HParamsValue>> out;
  for (const auto& e : ths::read_events(dir)) {
    for (const auto& v : e.values) {
      if (v.kind != ths::ValueKind::kHParams) continue;
      EXPECT_EQ(v.plugin_name, "hparams");
      out.emplace_back(e.step, *v.hparams);
    }
  }
  return out;
}

class HParamsHookTest : public ::testing::Test {
 protected:
  HParamsHookTest() { fake.clock->set_wall_seconds(1700000000.5); }
  std::shared_ptr<th::HParamsHook> hook() {
    return std::make_shared<th::HParamsHook>(
        th::HParamsHookOptions{.hparams = declared(), .output_dir = dir.path()});
  }
  th::testing::TempDir dir;
  th::testing::FakeEnv fake;
  th::testing::TinyModel m;
};

TEST_F(HParamsHookTest, WritesTheExperimentAndStartAtCreationAndSuccessAtTheEnd) {
  auto sess = th::testing::chief_session(m.g, {hook()}, fake.env());
  sess->run(m.train, m.feed());
  sess->run(m.train, m.feed());
  fake.clock->set_wall_seconds(1700000100.25);
  sess->close();
  const auto found = hparams_in(dir.path());
  ASSERT_EQ(found.size(), 3u);

  const auto& [experiment_step, experiment] = found[0];
  EXPECT_EQ(experiment_step, 0);
  EXPECT_EQ(experiment.kind, ths::HParamsValue::Kind::kExperiment);
  // Names with a value of each one's type.
  EXPECT_EQ(experiment.values,
            (std::map<std::string, ths::HParamValue>{
                {"augment", false}, {"batch", 0}, {"lr", 0}, {"optimizer", ""}}));
  EXPECT_EQ(experiment.metrics, declared().metrics);
  EXPECT_EQ(experiment.time_secs, 1700000000.5);

  const auto& [start_step, start] = found[1];
  EXPECT_EQ(start_step, 0);
  EXPECT_EQ(start.kind, ths::HParamsValue::Kind::kSessionStart);
  EXPECT_EQ(start.values, declared().values);
  EXPECT_EQ(start.values.at("batch").number(), 64.0);
  EXPECT_EQ(start.group_name, "sweep-1");
  EXPECT_EQ(start.model_uri, "runs/a");
  EXPECT_EQ(start.time_secs, 1700000000.5);

  const auto& [end_step, end] = found[2];
  EXPECT_EQ(end_step, 2);  // the global step at the end
  EXPECT_EQ(end.kind, ths::HParamsValue::Kind::kSessionEnd);
  EXPECT_EQ(end.status, ths::HParamsStatus::kSuccess);
  EXPECT_EQ(end.time_secs, 1700000100.25);
}

TEST_F(HParamsHookTest, ARunThatEndsWithAnErrorEndsWithFailure) {
  struct Failing : th::SessionRunHook {
    void after_run(th::SessionRunContext&, const th::SessionRunValues&) override {
      throw th::InternalError("boom");
    }
  };
  EXPECT_THROW(
      {
        auto sess =
            th::testing::chief_session(m.g, {hook(), std::make_shared<Failing>()}, fake.env());
        sess->run(m.train, m.feed());
      },
      th::InternalError);
  const auto found = hparams_in(dir.path());
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[2].second.kind, ths::HParamsValue::Kind::kSessionEnd);
  EXPECT_EQ(found[2].second.status, ths::HParamsStatus::kFailure);
}

TEST_F(HParamsHookTest, ARunStoppedByASignalWritesNoEndSoThatItsContinuationCan) {
  {
    th::PreemptionHandler handler;
    auto sess = th::testing::chief_session(m.g, {hook()}, fake.env());
    sess->run(m.train, m.feed());
    std::raise(SIGTERM);
    sess->close();
  }
  th::PreemptionHandler::clear();
  const auto found = hparams_in(dir.path());
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[1].second.kind, ths::HParamsValue::Kind::kSessionStart);
  EXPECT_THAT(fake.log->messages(),
              ::testing::Contains(
                  "HParamsHook: stopped by SIGTERM: no session end written, so that the run, "
                  "continued, can still end with its status."));
}

TEST_F(HParamsHookTest, RejectsWhatTensorBoardCouldNotShow) {
  auto error = [](th::HParamsHookOptions o) {
    return th::testing::error_message<th::InvalidArgument>(
        [&] { th::HParamsHook hook(std::move(o)); });
  };
  EXPECT_EQ(error({.hparams = declared()}), "HParamsHook: output_dir must not be empty");
  EXPECT_EQ(error({.output_dir = "x"}), "HParamsHook: hparams has neither values nor metrics");
  EXPECT_EQ(error({.hparams = {.values = {{"", 1}}}, .output_dir = "x"}),
            "hparams: a hyperparameter has an empty name");
  EXPECT_EQ(error({.hparams = {.values = {{"lr", std::nan("")}}}, .output_dir = "x"}),
            "hparams: 'lr' is nan, not a finite number");
  EXPECT_EQ(error({.hparams = {.metrics = {{.tag = "loss"}, {.tag = "loss"}}}, .output_dir = "x"}),
            "hparams: metric 'loss' of group '' is listed twice");
  EXPECT_EQ(error({.hparams = {.metrics = {{.group = "eval"}}}, .output_dir = "x"}),
            "hparams: metrics[0] has no tag");
}

TEST(MonitoredTrainingSessionHParamsTest, TheChiefWritesThemToTheSummaryDirWithItsCheckpointDir) {
  th::testing::TempDir dir;
  th::testing::FakeEnv fake;
  th::testing::TinyModel m;
  ths::HParams hp = declared();
  hp.model_uri.clear();
  {
    th::MonitoredTrainingSession sess(
        m.g, {.checkpoint_dir = dir.path(), .hparams = hp, .env = fake.env()});
    sess.run(m.train, m.feed());
    sess.close();
  }
  const auto found = hparams_in(dir.path());
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[1].second.model_uri, dir.path());
  EXPECT_EQ(found[2].second.status, ths::HParamsStatus::kSuccess);

  EXPECT_TRUE(th::resolve_training_options({.checkpoint_dir = "d", .hparams = hp}).write_hparams);
  EXPECT_FALSE(th::resolve_training_options({.checkpoint_dir = "d"}).write_hparams);
  // A worker writes none.
  EXPECT_FALSE(
      th::resolve_training_options({.is_chief = false, .checkpoint_dir = "d", .hparams = hp})
          .write_hparams);
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [&] { th::resolve_training_options({.hparams = hp}); }),
            "MonitoredTrainingSession: hparams were given without summary_dir or checkpoint_dir");
}

}  // namespace hparams_hook_test
