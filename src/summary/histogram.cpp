#include "summary/histogram.h"

#include <algorithm>
#include <cfloat>

#include "proto/summary.pb.h"
#include "summary/wire.h"

namespace trainhooks::summary {
namespace {

std::vector<double> make_default_limits() {
  std::vector<double> positive;
  // Repeated multiplication, not pow(): the limits must be TF's to the last bit.
  for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) positive.push_back(v);
  positive.push_back(DBL_MAX);
  std::vector<double> limits;
  limits.reserve(2 * positive.size() + 1);
  for (auto it = positive.rbegin(); it != positive.rend(); ++it) limits.push_back(-*it);
  limits.push_back(0.0);
  limits.insert(limits.end(), positive.begin(), positive.end());
  return limits;
}

}  // namespace

const std::vector<double>& default_bucket_limits() {
  static const std::vector<double> limits = make_default_limits();
  return limits;
}

HistogramValue build_histogram(const double* values, size_t count, bool preserve_zero_buckets) {
  const std::vector<double>& limits = default_bucket_limits();
  std::vector<double> counts(limits.size(), 0.0);
  HistogramValue h;
  h.min = limits.back();  // TF's empty histogram: min DBL_MAX, max -DBL_MAX
  h.max = -DBL_MAX;
  for (size_t i = 0; i < count; ++i) {
    const double v = values[i];
    size_t b = std::upper_bound(limits.begin(), limits.end(), v) - limits.begin();
    counts[std::min(b, limits.size() - 1)] += 1.0;
    h.min = std::min(h.min, v);
    h.max = std::max(h.max, v);
    h.num += 1;
    h.sum += v;
    h.sum_squares += v * v;
  }
  for (size_t i = 0; i < counts.size();) {
    double end = limits[i];
    double c = counts[i];
    ++i;
    if (!preserve_zero_buckets && c <= 0.0) {
      while (i < counts.size() && counts[i] <= 0.0) {
        end = limits[i];
        c = counts[i];
        ++i;
      }
    }
    h.bucket_limits.push_back(end);
    h.buckets.push_back(c);
  }
  return h;
}

std::string encode_histogram_field(const HistogramValue& h) {
  proto::HistogramProto msg;
  msg.set_min(h.min);
  msg.set_max(h.max);
  msg.set_num(h.num);
  msg.set_sum(h.sum);
  msg.set_sum_squares(h.sum_squares);
  msg.mutable_bucket_limit()->Add(h.bucket_limits.begin(), h.bucket_limits.end());
  msg.mutable_bucket()->Add(h.buckets.begin(), h.buckets.end());
  std::string out;
  wire::put_bytes_field(out, 5, msg.SerializeAsString());
  return out;
}

}  // namespace trainhooks::summary
