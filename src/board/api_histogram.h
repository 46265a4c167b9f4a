// TensorBoard's compressed histogram (its distributions dashboard): a histogram reduced to the
// values at fixed cumulative weights, so that one step is nine numbers and a tag's history is a
// set of bands.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <vector>

#include "trainhooks/summary/event_reader.h"

namespace trainhooks::board::internal {

// Basis points (1/100 of a percent) of the normal distribution's CDF at -inf, -1.5, -1, -0.5,
// 0, 0.5, 1, 1.5 and +inf standard deviations: the bands are 1, 2 and 3 sigma wide.
inline constexpr std::array<int, 9> kHistogramBasisPoints = {0,    668,  1587, 3085, 5000,
                                                             6915, 8413, 9332, 10000};

// The value at each basis point, as TensorBoard computes it: the counts' running sum scaled to
// 10000, the bucket where it first exceeds the basis point, and linear interpolation across that
// bucket's range clamped to the histogram's min and max (a first bucket, or one after only empty
// ones, starts at min). Basis points past the last weight get max; an empty histogram is all 0.
inline std::array<double, 9> compress_histogram(const summary::HistogramValue& h) {
  std::array<double, 9> out{};
  if (h.num == 0) return out;
  const size_t n = std::min(h.buckets.size(), h.bucket_limits.size());
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += h.buckets[i];
  if (total == 0) total = 1;
  std::vector<double> weights(n);
  double running = 0;
  for (size_t i = 0; i < n; ++i) {
    running += h.buckets[i] * 10000.0 / total;
    weights[i] = running;
  }
  size_t j = 0;
  for (; j < kHistogramBasisPoints.size(); ++j) {
    const double bp = kHistogramBasisPoints[j];
    size_t i = std::upper_bound(weights.begin(), weights.end(), bp) - weights.begin();
    bool found = false;
    for (; i < n; ++i) {
      const double cumsum = weights[i];
      const double prev = i > 0 ? weights[i - 1] : 0.0;
      if (cumsum == prev) continue;  // an empty bucket: nothing to interpolate across
      const double lhs = (i == 0 || prev == 0) ? h.min : std::max(h.bucket_limits[i - 1], h.min);
      const double rhs = std::min(h.bucket_limits[i], h.max);
      out[j] = lhs + (bp - prev) * (rhs - lhs) / (cumsum - prev);
      found = true;
      break;
    }
    if (!found) break;
  }
  for (; j < kHistogramBasisPoints.size(); ++j) out[j] = h.max;
  return out;
}

}  // namespace trainhooks::board::internal
