#include "trainhooks/latest_metrics.h"

#include <gtest/gtest.h>

#include "trainhooks/graph.h"

namespace th = trainhooks;

namespace latest_metrics_test {

TEST(LatestMetricsTest, LatestValueAndVersionPerName) {
  th::Graph g;
  auto& board = th::latest_metrics(g);
  EXPECT_FALSE(board.latest("eval/loss").has_value());
  board.publish("eval/loss", 0.5, 100, 1000.0);
  board.publish("eval/loss", 0.5, 200, 1010.0);  // the same value is still a new measurement
  board.publish("eval/accuracy", 0.9, 200, 1010.0);
  auto loss = board.latest("eval/loss");
  ASSERT_TRUE(loss.has_value());
  EXPECT_EQ(loss->value, 0.5);
  EXPECT_EQ(loss->step, 200);
  EXPECT_EQ(loss->wall_time, 1010.0);
  EXPECT_EQ(loss->version, 2u);
  EXPECT_EQ(board.latest("eval/accuracy")->version, 1u);
  EXPECT_EQ(board.names(), (std::vector<std::string>{"eval/accuracy", "eval/loss"}));
  // One board per graph.
  EXPECT_EQ(&th::latest_metrics(g), &board);
  th::Graph other;
  EXPECT_TRUE(th::latest_metrics(other).names().empty());
}

}  // namespace latest_metrics_test
