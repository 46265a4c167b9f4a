// MetricMode: which way a metric improves, for what watches one (plateau, early stopping,
// keep-best checkpoints).
#pragma once

namespace trainhooks {

enum class MetricMode {
  kMin,  // lower is better (a loss)
  kMax,  // higher is better (an accuracy)
};

}  // namespace trainhooks
