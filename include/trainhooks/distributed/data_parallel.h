// Synchronous data parallelism through one object (the part TF's tf.distribute strategy plays):
// a DataParallel holds the process group and gives both places that need it, the train op's
// gradient averaging and the session's process group, so that the two cannot disagree.
//
//   auto dp = th::distributed::data_parallel(th::distributed::init());  // RANK, WORLD_SIZE, ...
//   auto train_op = g.minimize("train_op", loss, th::sgd(0.1), dp.minimize_options());
//   th::MonitoredTrainingSession sess(
//       g, {.checkpoint_dir = dir, .distributed = {.process_group = dp.process_group()}});
//
// MonitoredTrainingSession checks the pair at construction, before any collective
// (check_data_parallel below): a group of several ranks whose train op does not average its
// gradients, or a train op that averages across a group the session was not given, is an
// InvalidArgument naming the train op and the fix, instead of ranks that silently drift apart.
#pragma once

#include <memory>

#include "trainhooks/distributed/average_gradients.h"
#include "trainhooks/graph.h"
#include "trainhooks/monitored_session.h"

namespace trainhooks::distributed {

class ProcessGroup;

class DataParallel {
 public:
  // InvalidArgument when `group` is null or options.bucket_bytes is 0.
  explicit DataParallel(std::shared_ptr<ProcessGroup> group, AverageGradientsOptions options = {});

  // For MonitoredTrainingSessionOptions::distributed.process_group.
  const std::shared_ptr<ProcessGroup>& process_group() const { return group_; }

  // `options` for Graph::minimize with the gradients averaged across the group: its
  // gradient_transforms first (on this rank's gradients), then a new average_gradients (one per
  // train op: each keeps its own buckets), then clip_global_norm, which thus clips the averaged
  // gradient as one process on the global batch would (MinimizeOptions::clip_global_norm alone
  // clips each rank's own gradient before any transform).
  MinimizeOptions minimize_options(MinimizeOptions options = {}) const;

 private:
  std::shared_ptr<ProcessGroup> group_;
  AverageGradientsOptions options_;
};

// DataParallel(group, options).
DataParallel data_parallel(std::shared_ptr<ProcessGroup> group,
                           AverageGradientsOptions options = {});

// InvalidArgument naming the train op and the fix when, `group` being the session's process group
// (null: none):
// - the group has several ranks and a train op of `graph` does not average its gradients across
//   it (no average_gradients(group) or averaging_transform(group, ...) among its
//   gradient_transforms), unless `hooks` hold a ModelAverageHook (local SGD averages the
//   variables instead);
// - a train op averages across a group of several ranks that is not `group`.
// MonitoredTrainingSession calls it with its options' hooks.
void check_data_parallel(const Graph& graph, const std::shared_ptr<ProcessGroup>& group,
                         const Hooks& hooks);

}  // namespace trainhooks::distributed
