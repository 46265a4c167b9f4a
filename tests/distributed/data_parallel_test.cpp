// DataParallel and the session's check of it, over the in-process fake group: one object gives
// the train op's averaging and the session's group, the ranks then train one model bit for bit,
// and a session whose train op does not average across its group (or averages across a group it
// was not given) is refused before any collective. A peer failing mid-training ends every rank
// with the named error.
#include "trainhooks/distributed/data_parallel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "distributed/fake_ranks.h"
#include "test_util.h"
#include "trainhooks/distributed/model_average_hook.h"
#include "trainhooks/distributed/process_group.h"
#include "trainhooks/errors.h"
#include "trainhooks/hooks/stop_at_step_hook.h"
#include "trainhooks/testing/fake_process_group.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;
namespace dist = trainhooks::distributed;
using ::testing::HasSubstr;
using th::testing::error_message;
using th::testing::error_text;

namespace data_parallel_test {

th::MonitoredTrainingSessionOptions options_for(std::shared_ptr<dist::ProcessGroup> pg,
                                                int64_t last_step) {
  return {.hooks = {std::make_shared<th::StopAtStepHook>(
              th::StopAtStepHookOptions{.last_step = last_step})},
          .summaries = {.log_step_count_steps = 0},
          .distributed = {.process_group = std::move(pg)},
          .handle_preemption_signals = false};
}

TEST(DataParallelTest, MinimizeOptionsAverageAfterTheProgramsTransformsAndClipTheAverage) {
  auto groups = dist::make_fake_process_groups(2);
  auto dp = dist::data_parallel(groups[0]);
  EXPECT_EQ(dp.process_group(), groups[0]);
  th::Graph g;
  const auto model = th::testing::build_linear_model(
      g, 0,
      dp.minimize_options(
          {.clip_global_norm = 1.0, .gradient_transforms = {[](std::span<at::Tensor>) {}}}));
  const auto transforms = g.gradient_transforms(model.train_op);
  ASSERT_EQ(transforms.size(), 3u);
  EXPECT_EQ(dist::averaging_group(transforms[0]), nullptr);    // the program's
  EXPECT_EQ(dist::averaging_group(transforms[1]), groups[0]);  // the average
  EXPECT_EQ(dist::averaging_group(transforms[2]), nullptr);    // the clip, of the average
  EXPECT_EQ(error_message<th::InvalidArgument>([] { dist::data_parallel(nullptr); }),
            "data_parallel: the process group is null");
}

TEST(DataParallelTest, TwoRanksOnTheirOwnExamplesTrainOneModelBitForBit) {
  auto groups = dist::make_fake_process_groups(2);
  th::Graph graphs[2];
  std::vector<th::testing::LinearModel> models(2);
  auto errors = dist::run_ranks(2, [&](int rank) {
    auto dp = dist::data_parallel(groups[rank]);
    models[rank] = th::testing::build_linear_model(graphs[rank], rank, dp.minimize_options());
    th::MonitoredTrainingSession sess(graphs[rank], options_for(dp.process_group(), 5));
    while (!sess.should_stop()) sess.run(models[rank].train_op);
    sess.close();
  });
  for (int rank = 0; rank < 2; ++rank) ASSERT_EQ(error_text(errors[rank]), "");
  for (const char* name : {"w", "b"}) {
    const at::Tensor& a = graphs[0].variable_value(graphs[0].find(name));
    const at::Tensor& b = graphs[1].variable_value(graphs[1].find(name));
    EXPECT_EQ(std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()), 0) << name;
    EXPECT_FALSE(at::equal(a, at::zeros_like(a))) << name;  // it trained
  }
  EXPECT_EQ(graphs[1].global_step_value(), 5);
}

TEST(DataParallelTest, SessionRefusesAGroupOfSeveralRanksWhoseTrainOpDoesNotAverage) {
  auto groups = dist::make_fake_process_groups(2);
  th::Graph g;
  th::testing::build_linear_model(g, 0);
  EXPECT_EQ(error_message<th::InvalidArgument>(
                [&] { th::MonitoredTrainingSession(g, options_for(groups[0], 5)); }),
            "trainhooks distributed: train op 'train_op' does not average its gradients across "
            "the process group (rank 0 of 2), so the ranks would drift apart: build it with "
            "g.minimize(..., distributed::data_parallel(pg).minimize_options()) (or "
            "distributed::average_gradients(pg) in MinimizeOptions::gradient_transforms), or add "
            "a distributed::ModelAverageHook to the hooks for local SGD");
  // Local SGD averages the variables instead; a group of one has nothing to average.
  EXPECT_NO_THROW(dist::check_data_parallel(
      g, groups[0], {std::make_shared<dist::ModelAverageHook>(groups[0], 4)}));
  EXPECT_NO_THROW(dist::check_data_parallel(g, std::make_shared<dist::ProcessGroup>(), {}));
  EXPECT_NO_THROW(dist::check_data_parallel(g, nullptr, {}));
}

TEST(DataParallelTest, SessionRefusesATrainOpAveragingAcrossAGroupItWasNotGiven) {
  auto groups = dist::make_fake_process_groups(2);
  auto others = dist::make_fake_process_groups(2);
  th::Graph g;
  th::testing::build_linear_model(g, 0, dist::data_parallel(groups[0]).minimize_options());
  EXPECT_EQ(error_message<th::InvalidArgument>(
                [&] { th::MonitoredTrainingSession(g, options_for(nullptr, 5)); }),
            "trainhooks distributed: train op 'train_op' averages its gradients across a process "
            "group (rank 0 of 2) but the session has no distributed.process_group: give both the "
            "same group, e.g. dp = distributed::data_parallel(pg), dp.minimize_options() for the "
            "train op and MonitoredTrainingSessionOptions::distributed.process_group = "
            "dp.process_group(), so that the ranks start from the chief's state and stop together");
  EXPECT_THAT(
      error_message<th::InvalidArgument>([&] { dist::check_data_parallel(g, others[0], {}); }),
      HasSubstr("averages its gradients across a process group (rank 0 of 2) other than "
                "the session's: give both the same group"));
  EXPECT_NO_THROW(dist::check_data_parallel(g, groups[0], {}));
}

TEST(DataParallelTest, APeerFailingMidTrainingEndsEveryRankWithTheNamedError) {
  // Rank 1's 30th collective: past the session's creation, in the middle of training.
  auto groups = dist::make_fake_process_groups(2, {.failures = {{.rank = 1, .collective = 30}}});
  std::vector<int64_t> steps(2, 0);
  auto errors = dist::run_ranks(2, [&](int rank) {
    auto dp = dist::data_parallel(groups[rank]);
    th::Graph g;
    const auto model = th::testing::build_linear_model(g, rank, dp.minimize_options());
    th::MonitoredTrainingSession sess(g, options_for(dp.process_group(), 1000));
    while (!sess.should_stop()) {
      sess.run(model.train_op);
      steps[rank] = g.global_step_value();
    }
  });
  ASSERT_TRUE(errors[0] && errors[1]);
  EXPECT_THAT(error_message<th::UnavailableError>([&] { std::rethrow_exception(errors[0]); }),
              HasSubstr("on rank 0 of 2 failed: rank 1 left the group"));
  EXPECT_THAT(error_message<th::UnavailableError>([&] { std::rethrow_exception(errors[1]); }),
              HasSubstr("on rank 1 of 2 failed: scripted failure of collective 30"));
  EXPECT_GT(steps[0], 5);
  EXPECT_LT(steps[0], 30);
}

}  // namespace data_parallel_test
