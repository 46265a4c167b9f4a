// Synchronous data parallelism: a gradient transform (gradient_transforms.h) that averages the
// train op's gradients across the ranks of a process group before the optimizer step, so that
// every rank applies the same update: the gradient of the mean loss over the global batch when
// each rank's loss is the mean over an equal share of it.
//
//   auto pg = th::distributed::init();
//   g.minimize("train", loss, th::sgd(0.1),
//              {.gradient_transforms = {th::distributed::average_gradients(pg)}});
//
// data_parallel.h's DataParallel::minimize_options() adds it for you; MonitoredTrainingSession
// refuses a group of several ranks whose train op averages neither through it nor through a
// transform of the program's own marked by averaging_transform().
//
// The gradients are packed, in variable order, into flat buckets of one dtype of at most
// bucket_bytes (a gradient larger than that has a bucket of its own), one allreduce per bucket,
// then scaled by 1 / world_size and copied back. The buckets are kept from step to step.
//
// Every rank must have the same gradients defined (the same variables reached by the loss, with
// the same shapes and dtypes): the first step checks it across the ranks and throws
// InvalidArgument otherwise; a later change of that layout on one rank only ends in the
// collective's timeout (DeadlineExceededError). MinimizeOptions::clip_global_norm clips each
// rank's own gradient before the average; to clip the averaged one, as a single process on the
// global batch would, list clip_by_global_norm after average_gradients instead.
#pragma once

#include <cstddef>
#include <memory>

#include "trainhooks/gradient_transforms.h"

namespace trainhooks::distributed {

class ProcessGroup;

struct AverageGradientsOptions {
  size_t bucket_bytes = 25u << 20;  // PyTorch DDP's default bucket size
};

// InvalidArgument when `group` is null or bucket_bytes is 0. A group of one returns the
// gradients unchanged.
GradientTransform average_gradients(std::shared_ptr<ProcessGroup> group,
                                    AverageGradientsOptions options = {});

// A transform of the program's own that averages the gradients across `group` (another bucketing,
// compression), marked as averaging so that MonitoredTrainingSession accepts its train op as
// data-parallel (data_parallel.h). Runs `average` unchanged. InvalidArgument when `group` is null
// or `average` empty.
GradientTransform averaging_transform(std::shared_ptr<ProcessGroup> group,
                                      GradientTransform average);

// The group that `transform` averages across when it is one of average_gradients() or
// averaging_transform(); null otherwise.
std::shared_ptr<ProcessGroup> averaging_group(const GradientTransform& transform);

}  // namespace trainhooks::distributed
