// agreed_stop_policy over the in-process fake group: one rank's stop stops every rank, and in a
// MonitoredTrainingSession every rank stops after the same step.
#include "trainhooks/distributed/agreed_stop_policy.h"

#include <gtest/gtest.h>

#include <vector>

#include "distributed/fake_ranks.h"
#include "trainhooks/distributed/data_parallel.h"
#include "trainhooks/distributed/process_group.h"
#include "trainhooks/hooks/stop_at_step_hook.h"
#include "trainhooks/testing/fake_process_group.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;
namespace dist = trainhooks::distributed;

namespace agreed_stop_policy_test {

TEST(AgreedStopPolicyTest, OneRanksStopIsEveryRanksStop) {
  auto groups = dist::make_fake_process_groups(3);
  std::vector<int> decided(3, -1);
  for (int wanting : {-1, 0, 2}) {
    SCOPED_TRACE(wanting);
    auto errors = dist::run_ranks(3, [&](int rank) {
      decided[rank] = dist::agreed_stop_policy(groups[rank])->decide(rank == wanting);
    });
    for (int rank = 0; rank < 3; ++rank) {
      ASSERT_EQ(th::testing::error_text(errors[rank]), "");
      EXPECT_EQ(decided[rank], wanting >= 0) << rank;
    }
  }
}

TEST(AgreedStopPolicyTest, OneRanksStopAtStepHookStopsEveryRankAfterTheSameStep) {
  auto groups = dist::make_fake_process_groups(2);
  std::vector<int64_t> last_step(2, -1), runs(2, 0);
  auto errors = dist::run_ranks(2, [&](int rank) {
    auto dp = dist::data_parallel(groups[rank]);
    th::Graph g;
    const auto model = th::testing::build_linear_model(g, rank, dp.minimize_options());
    // Rank 1 alone wants to stop, after step 3; rank 0 would go on to 50.
    th::MonitoredTrainingSession sess(
        g, {.hooks = {std::make_shared<th::StopAtStepHook>(
                th::StopAtStepHookOptions{.last_step = rank == 1 ? 3 : 50})},
            .summaries = {.log_step_count_steps = 0},
            .distributed = {.process_group = dp.process_group()},
            .handle_preemption_signals = false});
    while (!sess.should_stop()) {
      sess.run(model.train_op);
      ++runs[rank];
    }
    sess.close();
    last_step[rank] = g.global_step_value();
  });
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(th::testing::error_text(errors[rank]), "") << rank;
    EXPECT_EQ(last_step[rank], 3) << rank;
    EXPECT_EQ(runs[rank], 3) << rank;
  }
}

}  // namespace agreed_stop_policy_test
