// TensorFlow's histogram: fixed bucket limits growing by 10% from 1e-12 to 1e20 on both sides of
// zero (1551 limits), a value counted in the first bucket whose limit is greater than it, and runs
// of empty buckets merged when encoded. Matching TF keeps histograms comparable across tools.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "trainhooks/summary/event_reader.h"

namespace trainhooks::summary {

// -DBL_MAX, ..., -1e-12, 0.0, 1e-12, ..., DBL_MAX.
const std::vector<double>& default_bucket_limits();

// Counts `values` (finite) into the default buckets and returns what TF's EncodeToProto
// produces: min, max, num, sum, sum_squares, and the buckets with every run of empty buckets
// merged into its last limit (all of them kept when `preserve_zero_buckets`).
HistogramValue build_histogram(const double* values, size_t count,
                               bool preserve_zero_buckets = false);

// The Summary.Value `histo` field (key, length, HistogramProto).
std::string encode_histogram_field(const HistogramValue& histogram);

}  // namespace trainhooks::summary
