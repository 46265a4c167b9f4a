// Display downsampling of a scalar series: which points of a long range to send to the page.
//
// The range is split into max_points / 4 buckets of equal index width, and each bucket keeps
// its first, lowest, highest and last point (in index order, none twice). A spike that a stride
// or an average would hide survives, and the chart's envelope is the full series'. NaN is
// neither lowest nor highest (a bucket of NaNs keeps its first and last). Below four points per
// request (max_points 2 or 3) one bucket keeps its first and last point and, with 3, the
// extreme farther from them.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace trainhooks::board::internal {

// The indices in [begin, end) to keep, ascending: all of them when the range holds at most
// max_points (at least 2), else at most max_points chosen as above.
inline std::vector<size_t> downsample_indices(const std::vector<float>& values, size_t begin,
                                              size_t end, int64_t max_points) {
  std::vector<size_t> kept;
  const size_t n = end - begin;
  if (n <= static_cast<size_t>(max_points)) {
    kept.reserve(n);
    for (size_t i = begin; i < end; ++i) kept.push_back(i);
    return kept;
  }
  // Lowest and highest non-NaN point of [lo, hi); `lo` when all are NaN.
  const auto extremes = [&](size_t lo, size_t hi, size_t& min_i, size_t& max_i) {
    min_i = max_i = lo;
    bool any = false;
    for (size_t i = lo; i < hi; ++i) {
      const float v = values[i];
      if (std::isnan(v)) continue;
      if (!any) {
        min_i = max_i = i;
        any = true;
      } else if (v < values[min_i]) {
        min_i = i;
      } else if (v > values[max_i]) {
        max_i = i;
      }
    }
  };
  const auto push = [&](size_t i) {
    if (kept.empty() || kept.back() != i) kept.push_back(i);
  };
  const size_t buckets = static_cast<size_t>(max_points / 4);
  if (buckets == 0) {
    size_t min_i = 0, max_i = 0;
    extremes(begin + 1, end - 1, min_i, max_i);
    push(begin);
    if (max_points >= 3) {
      const double mid = (static_cast<double>(values[begin]) + values[end - 1]) / 2;
      const double low = std::abs(values[min_i] - mid), high = std::abs(values[max_i] - mid);
      push(std::isnan(low) || high >= low ? max_i : min_i);
    }
    push(end - 1);
    return kept;
  }
  kept.reserve(buckets * 4);
  for (size_t b = 0; b < buckets; ++b) {
    const size_t lo = begin + n * b / buckets, hi = begin + n * (b + 1) / buckets;
    size_t min_i = 0, max_i = 0;
    extremes(lo, hi, min_i, max_i);
    push(lo);
    push(std::min(min_i, max_i));
    push(std::max(min_i, max_i));
    push(hi - 1);
  }
  return kept;
}

}  // namespace trainhooks::board::internal
