// The storage of one tag's series in the board's index (logdir_index.cpp): TensorBoard's
// reservoir sampling for images, histograms, text and the rest, and full columns for scalars.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "trainhooks/board/logdir_index.h"

namespace trainhooks::board::internal {

// SplitMix64: the reservoirs' random choices, with 8 bytes of state per tag.
class Random {
 public:
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
    z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_ = 0;
};

template <typename T>
struct Sample {
  int64_t step = 0;
  double wall_time = 0;
  T payload{};
};

// TensorBoard's reservoir bucket with always_keep_last: the first max_size values, then the
// n-th value replaces a random kept one with probability max_size / n and otherwise the last
// kept one, so the newest value is always there. max_size 0 keeps every value. Kept values stay
// in read order.
template <typename T>
class Reservoir {
 public:
  explicit Reservoir(int64_t max_size) : max_size_(max_size) {}

  void add(Sample<T> sample) {
    if (max_size_ == 0 || std::ssize(items_) < max_size_) {
      items_.push_back(std::move(sample));
    } else {
      const uint64_t r = random_.next() % (seen_ + 1);
      if (r < static_cast<uint64_t>(max_size_)) {
        items_.erase(items_.begin() + static_cast<ptrdiff_t>(r));
        items_.push_back(std::move(sample));
      } else {
        items_.back() = std::move(sample);
      }
    }
    ++seen_;
  }

  // Drops the values with step >= `step`; returns how many.
  int64_t purge(int64_t step) {
    const size_t before = items_.size();
    std::erase_if(items_, [&](const Sample<T>& s) { return s.step >= step; });
    if (before == items_.size()) return 0;
    // TensorBoard's estimate of how many of the values seen the kept ones now stand for.
    seen_ = static_cast<uint64_t>(
        std::llround(static_cast<double>(seen_) * static_cast<double>(items_.size()) /
                     static_cast<double>(before)));
    return static_cast<int64_t>(before - items_.size());
  }

  // Kept values in step order (equal steps in read order).
  std::vector<Sample<T>> in_step_order() const {
    std::vector<Sample<T>> out = items_;
    std::stable_sort(out.begin(), out.end(),
                     [](const Sample<T>& a, const Sample<T>& b) { return a.step < b.step; });
    return out;
  }

  TagInfo info() const {
    TagInfo t{.count = std::ssize(items_)};
    bool first = true;
    for (const Sample<T>& s : items_) {
      if (first || s.step < t.min_step) t.min_step = s.step;
      if (first || s.step >= t.max_step) {
        t.max_step = s.step;
        t.last_wall_time = s.wall_time;
      }
      first = false;
    }
    return t;
  }

 private:
  int64_t max_size_;
  std::vector<Sample<T>> items_;
  uint64_t seen_ = 0;
  Random random_;
};

// Appends with a growth of 1/8 rather than the vector's doubling: a column's unused capacity,
// which the doubling could make as large as its points, stays a small part of it.
template <typename T>
void append(std::vector<T>& column, T value) {
  if (column.size() == column.capacity()) {
    column.reserve(column.size() + std::max<size_t>(column.size() / 8, 64));
  }
  column.push_back(value);
}

// A tag's scalars in full, as columns kept in step order. An out-of-order append marks the column
// unsorted until the end of the batch it came in (or a purge) sorts the part out of order.
struct ScalarColumn {
  std::vector<int64_t> steps;
  std::vector<double> wall_times;
  std::vector<float> values;
  bool sorted = true;

  // Returns true when this append left the column out of order.
  bool add(int64_t step, double wall_time, float value) {
    const bool was_sorted = sorted;
    if (!steps.empty() && step < steps.back()) sorted = false;
    append(steps, step);
    append(wall_times, wall_time);
    append(values, value);
    return was_sorted && !sorted;
  }

  void sort() {
    if (sorted) return;
    sorted = true;
    const auto prefix_end = std::is_sorted_until(steps.begin(), steps.end());
    const int64_t lowest = *std::min_element(prefix_end, steps.end());
    // Values of the ordered prefix up to `lowest` stay where they are.
    const auto first =
        static_cast<size_t>(std::upper_bound(steps.begin(), prefix_end, lowest) - steps.begin());
    std::vector<size_t> order(steps.size() - first);
    std::iota(order.begin(), order.end(), first);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return steps[a] < steps[b]; });
    auto permute = [&](auto& column) {
      std::vector<typename std::decay_t<decltype(column)>::value_type> region;
      region.reserve(order.size());
      for (size_t i : order) region.push_back(column[i]);
      std::copy(region.begin(), region.end(), column.begin() + static_cast<ptrdiff_t>(first));
    };
    permute(steps);
    permute(wall_times);
    permute(values);
  }

  int64_t purge(int64_t step) {
    sort();
    const auto keep =
        static_cast<size_t>(std::lower_bound(steps.begin(), steps.end(), step) - steps.begin());
    const auto removed = static_cast<int64_t>(steps.size() - keep);
    steps.resize(keep);
    wall_times.resize(keep);
    values.resize(keep);
    return removed;
  }

  TagInfo info() const {
    if (steps.empty()) return {};
    return {.count = std::ssize(steps),
            .min_step = steps.front(),
            .max_step = steps.back(),
            .last_wall_time = wall_times.back()};
  }
};

}  // namespace trainhooks::board::internal
