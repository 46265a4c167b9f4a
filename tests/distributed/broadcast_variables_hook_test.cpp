// BroadcastVariablesHook over the in-process fake group: two graphs in one process, the worker's
// initialised differently from the chief's, hold the chief's variables bit for bit once their
// sessions are created.
#include "trainhooks/distributed/broadcast_variables_hook.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/zeros.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "distributed/fake_ranks.h"
#include "test_util.h"
#include "trainhooks/distributed/process_group.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/monitored_session.h"
#include "trainhooks/testing/fake_process_group.h"

namespace th = trainhooks;
namespace dist = trainhooks::distributed;
using ::testing::HasSubstr;

namespace broadcast_variables_hook_test {

// Rank r's graph: variables of three dtypes whose initial values depend on r (no RNG: the ranks'
// threads would share its state).
void build(th::Graph& g, int rank) {
  g.variable("w", at::sin(at::arange(12, at::kFloat) * (rank + 1.5)).view({4, 3}));
  g.variable("b", at::cos(at::arange(3, at::kDouble) * (rank + 0.5)));
  g.variable("count", at::arange(2, at::kLong) + 1000 * rank, {.trainable = false});
  g.global_step();
}

bool same_bytes(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes().equals(b.sizes()) &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

TEST(BroadcastVariablesHookTest, TheWorkerReceivesTheChiefsVariablesBitForBit) {
  auto groups = dist::make_fake_process_groups(2);
  th::Graph graphs[2];
  std::shared_ptr<dist::BroadcastVariablesHook> hooks[2];
  auto errors = dist::run_ranks(2, [&](int rank) {
    build(graphs[rank], rank);
    hooks[rank] = std::make_shared<dist::BroadcastVariablesHook>(groups[rank]);
    th::MonitoredSession sess(std::make_unique<th::ChiefSessionCreator>(graphs[rank]),
                              {hooks[rank]});
    sess.close();
  });
  for (int rank = 0; rank < 2; ++rank) ASSERT_EQ(th::testing::error_text(errors[rank]), "");
  th::Graph chief_initial;
  build(chief_initial, 0);
  for (const char* name : {"w", "b", "count"}) {
    SCOPED_TRACE(name);
    const at::Tensor& chief = graphs[0].variable_value(graphs[0].find(name));
    EXPECT_TRUE(same_bytes(graphs[1].variable_value(graphs[1].find(name)), chief));
    // The chief's own are untouched.
    EXPECT_TRUE(same_bytes(chief, chief_initial.variable_value(chief_initial.find(name))));
  }
  EXPECT_EQ(hooks[0]->broadcasts(), 1);
  EXPECT_EQ(hooks[1]->broadcasts(), 1);
}

TEST(BroadcastVariablesHookTest, GraphsThatDifferFailOnEveryRankNamingTheVariable) {
  auto groups = dist::make_fake_process_groups(2);
  th::Graph graphs[2];
  auto errors = dist::run_ranks(2, [&](int rank) {
    graphs[rank].variable("w", at::zeros({rank == 0 ? 3 : 4}));
    th::MonitoredSession sess(std::make_unique<th::ChiefSessionCreator>(graphs[rank]),
                              {std::make_shared<dist::BroadcastVariablesHook>(groups[rank])});
  });
  ASSERT_TRUE(errors[0] && errors[1]);
  const auto message = [&](int rank) {
    return th::testing::error_message<th::InvalidArgument>(
        [&] { std::rethrow_exception(errors[rank]); });
  };
  EXPECT_THAT(message(0), HasSubstr("BroadcastVariablesHook: the graphs of the ranks differ (rank "
                                    "0 of 2: another rank's graph does not match rank 0's)"));
  EXPECT_THAT(message(1), HasSubstr("BroadcastVariablesHook: the graphs of the ranks differ (rank "
                                    "1 of 2: variable 'w' is Float [4] here, Float [3] on the "
                                    "root)"));
}

}  // namespace broadcast_variables_hook_test
