#include "summary/histogram.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "trainhooks/errors.h"

#include <cfloat>
#include <random>

#include "trainhooks/summary/summary.h"

namespace trainhooks::summary {
namespace histogram_test {

TEST(HistogramTest, DefaultLimitsAre1551EdgesSymmetricAroundZero) {
  const auto& limits = default_bucket_limits();
  ASSERT_EQ(limits.size(), 1551u);
  EXPECT_EQ(limits.front(), -DBL_MAX);
  EXPECT_EQ(limits.back(), DBL_MAX);
  EXPECT_EQ(limits[775], 0.0);
  EXPECT_EQ(limits[776], 1e-12);
  EXPECT_EQ(limits[774], -1e-12);
  for (size_t i = 0; i < limits.size(); ++i) {
    ASSERT_EQ(limits[i], -limits[limits.size() - 1 - i]) << i;
    if (i > 0) {
      ASSERT_LT(limits[i - 1], limits[i]) << i;
    }
  }
}

TEST(HistogramTest, PositiveLimitsGrowByTenPercentFrom1e12BelowThe1e20Cap) {
  const auto& limits = default_bucket_limits();
  // 774 finite positive limits, each 1.1 times the previous, then DBL_MAX.
  std::vector<double> positive(limits.begin() + 776, limits.end() - 1);
  ASSERT_EQ(positive.size(), 774u);
  double v = 1e-12;
  for (double limit : positive) {
    ASSERT_EQ(limit, v);
    v *= 1.1;
  }
  EXPECT_LT(positive.back(), 1e20);
  EXPECT_GE(positive.back() * 1.1, 1e20);
}

// Independent reference: a linear scan for the first limit strictly greater than the value.
std::vector<double> reference_counts(const std::vector<double>& values) {
  const auto& limits = default_bucket_limits();
  std::vector<double> counts(limits.size(), 0.0);
  for (double v : values) {
    size_t b = 0;
    while (b + 1 < limits.size() && !(limits[b] > v)) ++b;
    counts[b] += 1;
  }
  return counts;
}

// Independent reference for the encoding: each non-empty bucket as it is; each maximal run of
// empty buckets as one empty bucket ending at the run's last limit.
std::pair<std::vector<double>, std::vector<double>> reference_merge(
    const std::vector<double>& counts) {
  const auto& limits = default_bucket_limits();
  std::vector<double> out_limits, out_counts;
  bool in_run = false;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > 0) {
      out_limits.push_back(limits[i]);
      out_counts.push_back(counts[i]);
      in_run = false;
    } else if (in_run) {
      out_limits.back() = limits[i];
    } else {
      out_limits.push_back(limits[i]);
      out_counts.push_back(0);
      in_run = true;
    }
  }
  return {out_limits, out_counts};
}

TEST(HistogramTest, BucketCountsMatchAnIndependentComputation) {
  std::mt19937 rng(7);
  std::normal_distribution<double> normal(0.0, 3.0);
  std::vector<double> values = {0.0, 1e-12, -1e-12, 1e-13, -1e-13, 5.0, 5.0, 1e25, -1e25};
  for (int i = 0; i < 2000; ++i) values.push_back(normal(rng));
  for (const auto& limit : default_bucket_limits()) {
    if (std::abs(limit) < 1e6 && std::abs(limit) > 1e-3) values.push_back(limit);  // edges
  }
  const auto counts = reference_counts(values);

  HistogramValue full = build_histogram(values.data(), values.size(), true);
  EXPECT_EQ(full.buckets, counts);
  EXPECT_EQ(full.bucket_limits, default_bucket_limits());

  HistogramValue merged = build_histogram(values.data(), values.size());
  auto [limits, merged_counts] = reference_merge(counts);
  EXPECT_EQ(merged.bucket_limits, limits);
  EXPECT_EQ(merged.buckets, merged_counts);
}

TEST(HistogramTest, AValueOnALimitGoesToTheNextBucket) {
  const double values[] = {0.0, 1e-12};
  HistogramValue h = build_histogram(values, 2, true);
  EXPECT_EQ(h.buckets[775], 0);  // (-1e-12, 0]: nothing; 0.0 is not < 0.0
  EXPECT_EQ(h.buckets[776], 1);  // [0, 1e-12)
  EXPECT_EQ(h.buckets[777], 1);  // [1e-12, 1.1e-12)
}

TEST(HistogramTest, StatisticsAreMinMaxCountSumAndSumOfSquares) {
  const double values[] = {-1.0, 0.5, 0.5, 3.0};
  HistogramValue h = build_histogram(values, 4);
  EXPECT_EQ(h.min, -1.0);
  EXPECT_EQ(h.max, 3.0);
  EXPECT_EQ(h.num, 4.0);
  EXPECT_EQ(h.sum, 3.0);
  EXPECT_EQ(h.sum_squares, 10.5);
  // Three occupied buckets (0.5 twice) and the empty runs before, between and after them.
  double total = 0;
  int occupied = 0;
  for (double c : h.buckets) {
    total += c;
    occupied += c > 0;
  }
  EXPECT_EQ(total, 4.0);
  EXPECT_EQ(occupied, 3);
  EXPECT_EQ(h.buckets.size(), 7u);
  EXPECT_EQ(h.bucket_limits.back(), DBL_MAX);
}

TEST(HistogramTest, EmptyInputEncodesOneEmptyBucketUpToDblMax) {
  HistogramValue h = build_histogram(nullptr, 0);
  EXPECT_EQ(h.bucket_limits, std::vector<double>{DBL_MAX});
  EXPECT_EQ(h.buckets, std::vector<double>{0.0});
  EXPECT_EQ(h.min, DBL_MAX);
  EXPECT_EQ(h.max, -DBL_MAX);
  EXPECT_EQ(h.num, 0.0);
}

TEST(HistogramTest, NanValuesAreRejectedWithTensorFlowsMessage) {
  Summary s;
  at::Tensor t = at::tensor({1.0f, NAN});
  try {
    s.add_histogram("weights", t);
    FAIL() << "expected trainhooks::InvalidArgument";
  } catch (const trainhooks::InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "Nan in summary histogram for: weights");
  }
  EXPECT_TRUE(s.empty());
}

TEST(HistogramTest, InfiniteValuesAreRejectedWithTensorFlowsMessage) {
  Summary s;
  EXPECT_THROW(
      {
        try {
          s.add_histogram("w", at::tensor({INFINITY}));
        } catch (const trainhooks::InvalidArgument& e) {
          EXPECT_STREQ(e.what(), "Infinity in summary histogram for: w");
          throw;
        }
      },
      trainhooks::InvalidArgument);
}

}  // namespace histogram_test
}  // namespace trainhooks::summary
