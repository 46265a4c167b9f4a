// MetricMonitor (metric_monitor.h) and the comparison rule every watcher of a metric uses
// (improves, metric_mode.h).
#include "trainhooks/metric_monitor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/latest_metrics.h"

namespace th = trainhooks;

namespace metric_monitor_test {

TEST(MetricModeTest, ImprovesByMoreThanMinDeltaAndNeverWithNaN) {
  EXPECT_TRUE(th::improves(th::MetricMode::kMin, 0.9, 1.0));
  EXPECT_FALSE(th::improves(th::MetricMode::kMin, 1.0, 1.0));
  EXPECT_FALSE(th::improves(th::MetricMode::kMin, 0.95, 1.0, 0.05));  // by exactly min_delta
  EXPECT_TRUE(th::improves(th::MetricMode::kMin, 0.94, 1.0, 0.05));
  EXPECT_TRUE(th::improves(th::MetricMode::kMax, 1.1, 1.0));
  EXPECT_FALSE(th::improves(th::MetricMode::kMax, 0.9, 1.0));
  const double nan = std::nan("");
  EXPECT_FALSE(th::improves(th::MetricMode::kMin, nan, 1.0));
  EXPECT_FALSE(th::improves(th::MetricMode::kMax, nan, 1.0));
}

TEST(MetricMonitorTest, PollReturnsEachPublishOnceAndNothingFromBeforeStart) {
  th::LatestMetrics metrics;
  metrics.publish("eval/loss", 0.5, 100, 0);
  th::MetricMonitor monitor({.name = "eval/loss"});
  monitor.start(metrics);
  EXPECT_FALSE(monitor.poll(metrics));        // measured before start
  metrics.publish("eval/loss", 0.5, 200, 0);  // the same value, a new measurement
  auto m = monitor.poll(metrics);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->step, 200);
  EXPECT_FALSE(monitor.poll(metrics));
  metrics.publish("eval/accuracy", 0.9, 300, 0);
  EXPECT_FALSE(monitor.poll(metrics));  // another metric
}

TEST(MetricMonitorTest, RecordsTheBestAndCountsTheWaitUpToPatience) {
  th::MetricMonitor monitor({.name = "eval/loss", .min_delta = 0.01, .patience = 2});
  EXPECT_EQ(monitor.best(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(monitor.best_step(), -1);
  EXPECT_TRUE(monitor.record(1.0, 10));
  EXPECT_FALSE(monitor.record(0.995, 20));  // not by more than min_delta
  EXPECT_EQ(monitor.wait(), 1);
  EXPECT_FALSE(monitor.patience_exhausted());
  EXPECT_FALSE(monitor.record(1.2, 30));
  EXPECT_TRUE(monitor.patience_exhausted());
  EXPECT_EQ(monitor.best(), 1.0);
  EXPECT_EQ(monitor.best_step(), 10);
  EXPECT_TRUE(monitor.record(0.5, 40));
  EXPECT_EQ(monitor.wait(), 0);
  monitor.reset(/*baseline=*/0.4);
  EXPECT_EQ(monitor.best(), 0.4);
  EXPECT_FALSE(monitor.record(0.45, 50));
  EXPECT_EQ(monitor.best_step(), -1);
  monitor.restore(0.3, 60, 1);
  EXPECT_EQ(monitor.best(), 0.3);
  EXPECT_EQ(monitor.best_step(), 60);
  EXPECT_EQ(monitor.wait(), 1);
}

TEST(MetricMonitorTest, BadOptionsNameTheOwnerAndTheOption) {
  auto message = [](th::MetricMonitorOptions o) {
    return th::testing::error_message<th::InvalidArgument>(
        [&] { th::MetricMonitor monitor(o, "MyHook"); });
  };
  EXPECT_EQ(message({.mode = th::MetricMode{3}}), "MyHook: mode must be kMin or kMax, got 3");
  EXPECT_EQ(message({.min_delta = -1}),
            "MyHook: min_delta must be a finite, non-negative number, got -1");
  EXPECT_EQ(message({.patience = -2}), "MyHook: patience must be non-negative, got -2");
}

}  // namespace metric_monitor_test
