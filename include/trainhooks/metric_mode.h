// MetricMode: which way a metric improves, for what watches one (plateau, early stopping,
// keep-best checkpoints), and the one rule all of them compare values by.
#pragma once

namespace trainhooks {

enum class MetricMode {
  kMin,  // lower is better (a loss)
  kMax,  // higher is better (an accuracy)
};

// Whether `value` is better than `than` by more than `min_delta` in `mode`; NaN never is.
inline bool improves(MetricMode mode, double value, double than, double min_delta = 0) {
  return mode == MetricMode::kMin ? value < than - min_delta : value > than + min_delta;
}

}  // namespace trainhooks
