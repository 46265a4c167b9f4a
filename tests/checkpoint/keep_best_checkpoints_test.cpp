// Keep-best checkpoints: CheckpointManagerOptions::keep_best (checkpoint/keep_best.h), given to a
// manager directly or through MonitoredTrainingSession's keep_best; the CheckpointSaverHook
// passes the scores.
#include <ATen/core/Tensor.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/saver_test_model.h"
#include "test_util.h"
#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/checkpoint/checkpoint_state.h"
#include "trainhooks/checkpoint/inspect_checkpoint.h"
#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/errors.h"
#include "trainhooks/latest_metrics.h"
#include "trainhooks/session.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;
namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace keep_best_checkpoints_test {

using namespace th::testing::saver_fixture;

class KeepBestCheckpointsTest : public SaverTest {
 protected:
  th::CheckpointManagerOptions best_options(int max_to_keep, int keep_best_n,
                                            th::MetricMode mode = th::MetricMode::kMin) {
    return {.max_to_keep = max_to_keep,
            .keep_best = {.n = keep_best_n, .metric = "eval/loss", .mode = mode},
            .env = fe.env()};
  }
  // Saves step `step` with eval/loss = `value` measured at `metric_step` as its score.
  void save(th::CheckpointManager& manager, th::Session& s, int64_t step,
            std::optional<std::pair<int64_t, double>> metric) {
    fe.clock->advance(10);
    std::optional<th::CheckpointScore> score;
    if (metric) score = th::CheckpointScore{metric->first, metric->second};
    manager.save(s, step, score);
  }
  std::string ckpt(int64_t step) const { return dir.file("model.ckpt-" + std::to_string(step)); }
  bool on_disk(int64_t step) const {
    return fs::exists(ckpt(step)) && fs::exists(ckpt(step) + ".trainstate");
  }

  Model m;
};

TEST_F(KeepBestCheckpointsTest, MaxToKeepNeverDeletesTheBestN) {
  th::Session s(m.g);
  th::CheckpointManager manager(dir.path(), best_options(2, 2));
  const std::map<int64_t, double> losses{{1, 5.0}, {2, 1.0}, {3, 4.0},
                                         {4, 2.0}, {5, 6.0}, {6, 7.0}};
  for (const auto& [step, loss] : losses) save(manager, s, step, {{step, loss}});
  EXPECT_THAT(manager.checkpoints(), ElementsAre(ckpt(5), ckpt(6)));
  EXPECT_THAT(manager.best_checkpoints(), ElementsAre(th::ScoredCheckpoint{ckpt(2), 2, 1.0},
                                                      th::ScoredCheckpoint{ckpt(4), 4, 2.0}));
  EXPECT_TRUE(on_disk(2));
  EXPECT_TRUE(on_disk(4));
  EXPECT_FALSE(fs::exists(ckpt(1)));
  EXPECT_FALSE(fs::exists(ckpt(3)));
  // The state file is TensorFlow's, listing max_to_keep checkpoints.
  const auto st = th::get_checkpoint_state(dir.path());
  ASSERT_TRUE(st);
  EXPECT_EQ(st->model_checkpoint_path, ckpt(6));
  EXPECT_THAT(st->all_model_checkpoint_paths, ElementsAre(ckpt(5), ckpt(6)));

  // A better one displaces the worse of the two, which is deleted: it is no longer listed.
  save(manager, s, 7, {{7, 0.5}});
  EXPECT_THAT(manager.best_checkpoints(), ElementsAre(th::ScoredCheckpoint{ckpt(7), 7, 0.5},
                                                      th::ScoredCheckpoint{ckpt(2), 2, 1.0}));
  EXPECT_FALSE(fs::exists(ckpt(4)));
  EXPECT_FALSE(fs::exists(ckpt(4) + ".trainstate"));
  EXPECT_FALSE(fs::exists(ckpt(5)));
  EXPECT_TRUE(on_disk(2));
  EXPECT_THAT(manager.checkpoints(), ElementsAre(ckpt(6), ckpt(7)));
}

TEST_F(KeepBestCheckpointsTest, AnEvaluationAfterASaveScoresThatSavesCheckpoint) {
  // As with an EvaluationHook listed after the CheckpointSaverHook: the value of step N is
  // published after checkpoint N was written, and the next save gives it to checkpoint N.
  th::Session s(m.g);
  th::CheckpointManager manager(dir.path(), best_options(1, 1, th::MetricMode::kMax));
  save(manager, s, 2, std::nullopt);
  save(manager, s, 4, {{2, 0.75}});  // accuracy of step 2
  EXPECT_THAT(manager.best_checkpoints(), ElementsAre(th::ScoredCheckpoint{ckpt(2), 2, 0.75}));
  EXPECT_TRUE(on_disk(2));
  save(manager, s, 6, {{4, 0.5}});
  EXPECT_FALSE(fs::exists(ckpt(4)));  // not the best: max_to_keep deleted it
  EXPECT_TRUE(on_disk(2));
  save(manager, s, 8, {{6, 0.875}});
  EXPECT_THAT(manager.best_checkpoints(), ElementsAre(th::ScoredCheckpoint{ckpt(6), 6, 0.875}));
  EXPECT_FALSE(fs::exists(ckpt(2)));
  EXPECT_TRUE(on_disk(6));
  EXPECT_THAT(manager.checkpoints(), ElementsAre(ckpt(8)));
}

TEST_F(KeepBestCheckpointsTest, TheBestListAndItsValuesSurviveARestart) {
  th::Session s(m.g);
  {
    th::CheckpointManager manager(dir.path(), best_options(1, 2));
    for (int64_t step = 1; step <= 4; ++step) save(manager, s, step, {{step, 10.0 - step}});
  }
  const auto file = nlohmann::json::parse(read_bytes(dir.file("best_checkpoints.json")));
  EXPECT_EQ(file["metric"], "eval/loss");
  EXPECT_EQ(file["mode"], "min");
  EXPECT_EQ(file["keep_best_n"], 2);
  EXPECT_EQ(file["checkpoints"],
            nlohmann::json::parse(R"([{"path": "model.ckpt-3", "step": 3, "value": 7.0},
                                      {"path": "model.ckpt-4", "step": 4, "value": 6.0}])"));

  th::CheckpointManager manager(dir.path(), best_options(1, 2));
  EXPECT_THAT(manager.best_checkpoints(), ElementsAre(th::ScoredCheckpoint{ckpt(4), 4, 6.0},
                                                      th::ScoredCheckpoint{ckpt(3), 3, 7.0}));
  save(manager, s, 5, {{5, 9.0}});
  save(manager, s, 6, {{6, 6.5}});
  EXPECT_TRUE(on_disk(3) == false);  // displaced by 6.5
  EXPECT_TRUE(on_disk(4));
  EXPECT_TRUE(on_disk(6));
  EXPECT_FALSE(fs::exists(ckpt(5)));

  // Another metric: the file's checkpoints are no longer kept as best, and none is deleted.
  fe.log->clear();
  th::CheckpointManager other(
      dir.path(), {.max_to_keep = 1,
                   .keep_best = {.n = 1, .metric = "eval/accuracy", .mode = th::MetricMode::kMax},
                   .env = fe.env()});
  EXPECT_THAT(other.best_checkpoints(), ElementsAre());
  EXPECT_THAT(warnings(),
              ElementsAre(dir.file("best_checkpoints.json") +
                          " ranks checkpoints by eval/loss (min), this manager by eval/accuracy "
                          "(max): the checkpoints it ranks are no longer kept as best, and none "
                          "of them is deleted for it"));
}

TEST_F(KeepBestCheckpointsTest, CheckpointListMarksTheBest) {
  th::Session s(m.g);
  th::CheckpointManager manager(dir.path(), best_options(2, 1));
  save(manager, s, 1, {{1, 0.25}});
  save(manager, s, 2, {{2, 0.5}});
  save(manager, s, 3, {{3, 0.375}});
  std::ostringstream out;
  th::print_checkpoint_list(out, dir.path());
  const std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("2 checkpoints listed in " + dir.file("checkpoint") +
                              " (oldest first, * latest, #k the k-th best by eval/loss):\n"));
  EXPECT_THAT(text, HasSubstr("  best  path\n"));
  EXPECT_THAT(text, HasSubstr("\n1 best checkpoint by eval/loss (min, keep_best_n 1) in " +
                              dir.file("best_checkpoints.json") +
                              ", never deleted by max_to_keep:\n"
                              "  best  step  eval/loss  path\n"
                              "  #1       1       0.25  " +
                              ckpt(1) + "  (kept, no longer listed)\n"));

  save(manager, s, 4, {{4, 0.125}});
  std::ostringstream again;
  th::print_checkpoint_list(again, dir.path());
  EXPECT_THAT(again.str(), HasSubstr("  #1    " + ckpt(4) + "\n"));
}

TEST_F(KeepBestCheckpointsTest, MonitoredTrainingSessionKeepsTheBestEvaluation) {
  // Evaluations (published after the checkpoint of their step, as an EvaluationHook in `hooks`
  // does) at every even step; checkpoints every 2 steps, one kept by max_to_keep.
  struct Publisher : th::SessionRunHook {
    void after_run(th::SessionRunContext&, const th::SessionRunValues&) override {
      static const std::map<int64_t, double> losses{{2, 3.0}, {4, 1.0}, {6, 2.0}, {8, 4.0}};
      const int64_t step = graph().global_step_value();
      if (auto it = losses.find(step); it != losses.end())
        services().metrics().publish("eval/loss", it->second, step, 0);
    }
  };
  th::testing::TinyModel tiny;
  th::MonitoredTrainingSession sess(
      tiny.g,
      {.checkpoint_dir = dir.path(),
       .hooks = {std::make_shared<Publisher>()},
       .checkpoints = {.save_steps = 2,
                       .manager = {.max_to_keep = 1, .keep_best = {.n = 1, .metric = "eval/loss"}}},
       .summaries = {.save_steps = 0, .log_step_count_steps = 0},
       .handle_preemption_signals = false,
       .env = fe.env()});
  for (int i = 0; i < 10; ++i) sess.run(tiny.train, tiny.feed());
  sess.close();
  EXPECT_TRUE(on_disk(4));
  EXPECT_TRUE(on_disk(10));
  for (int64_t step : {0, 2, 6, 8}) EXPECT_FALSE(fs::exists(ckpt(step))) << step;
  EXPECT_EQ(th::CheckpointManager(dir.path()).checkpoints(), std::vector<std::string>{ckpt(10)});
}

TEST_F(KeepBestCheckpointsTest, BadOptionsAreInvalidArgumentsNamingThem) {
  auto manager_message = [&](th::CheckpointManagerOptions o) {
    return th::testing::error_message<th::InvalidArgument>(
        [&] { th::CheckpointManager manager(dir.path(), o); });
  };
  EXPECT_EQ(manager_message({.keep_best = {.n = -1}}),
            "CheckpointManager: invalid keep_best.n -1 (must be >= 0)");
  EXPECT_EQ(manager_message({.keep_best = {.n = 2}}),
            "CheckpointManager: keep_best.n needs keep_best.metric (a metric name, e.g. "
            "'eval/loss')");
  EXPECT_EQ(manager_message({.keep_best = {.n = 1, .metric = "l", .mode = th::MetricMode{5}}}),
            "CheckpointManager: invalid keep_best.mode 5 (kMin or kMax)");
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>([&] {
              th::resolve_training_options(
                  {.checkpoints = {.manager = {.keep_best = {.n = 1, .metric = "eval/loss"}}}});
            }),
            "MonitoredTrainingSession: checkpoint options were given without checkpoint_dir");
}

}  // namespace keep_best_checkpoints_test
