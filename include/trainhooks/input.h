// Inputs: datasets that feed batches into a graph, with a position that checkpoints can save.
//
// An InputSource is a map-style dataset: a size and a way to collate the examples at given
// indices into one tensor per component. Graph::input() wraps it with batching, a seedable
// shuffle (a permutation per epoch that depends only on seed and epoch, so a restored position
// continues the same order), epochs, and OutOfRangeError at the end of data.
//
//   auto batch = g.input("train", th::tensor_source({xs, ys}, {"x", "y"}),
//                        {.batch_size = 32, .shuffle = true, .seed = 7, .num_epochs = 10});
//   auto logits = g.op("logits", [=](th::Run& r) { return net->forward(r[batch[0]]); });
//
// For a torch::data dataset (MNIST, a user's Dataset<...>), see trainhooks/data.h.
//
// Working ahead: with `prefetch` and `num_workers`, threads make the next batches (the source's
// get_batch, then the options' transform) while the graph runs; the runs still read them
// strictly in order, and each batch depends only on the seed, the epoch and its place in the
// epoch's order, never on the threads' timing, so a run sees bit for bit the batches it would
// see without them. The position (input_position, checkpoints) is the runs', never the threads'.
//
//   auto batch = g.input("train", source, {.batch_size = 64, .shuffle = true, .num_epochs = 0,
//                                          .num_workers = 2, .transform = random_flips});
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainhooks/node.h"

namespace trainhooks {

class InputSource {
 public:
  virtual ~InputSource() = default;
  virtual size_t size() const = 0;
  // Names of the batch components, e.g. {"data", "target"}; at least one.
  virtual std::vector<std::string> component_names() const = 0;
  // One tensor per component, each with the batch as its first dimension.
  virtual std::vector<at::Tensor> get_batch(const std::vector<int64_t>& indices) = 0;
};

// Changes a collated batch (one tensor per component; replace or change them, keep their number),
// e.g. a random augmentation. `generator` is a CPU generator seeded from the input's seed, the
// epoch and the place of the batch's first example in the epoch's order, and from nothing else:
// draw every random number from it (`at::rand(sizes, generator)`), never from the global
// generator, and the batch comes out the same on a worker thread or in the run, and again after a
// restore. With num_workers > 0 it runs on several threads at once: it must not touch the graph,
// and whatever it shares must be safe to use concurrently.
using BatchTransform =
    std::function<void(std::vector<at::Tensor>& batch, at::Generator& generator)>;

// In-memory tensors that share their first dimension; component i is tensors[i][indices].
std::shared_ptr<InputSource> tensor_source(std::vector<at::Tensor> tensors,
                                           std::vector<std::string> names);

struct InputOptions {
  int64_t batch_size = 1;  // per shard (per rank)
  // > 0: the batch of all shards together; each shard's batch is global_batch_size / num_shards
  // (InvalidArgument when it does not divide), so that the global batch stays the same when the
  // number of ranks changes. Leave batch_size at 1 then.
  int64_t global_batch_size = 0;
  bool shuffle = false;
  uint64_t seed = 0;
  int64_t num_epochs = 1;  // <= 0: repeat forever
  bool drop_last = false;  // drop a last partial batch of each epoch
  // Shards for data-parallel training: this input reads examples shard_index, shard_index +
  // num_shards, ... of each epoch's order, size / num_shards of them, so that every shard has
  // the same number of batches and the shards' epochs end together (the last size % num_shards
  // examples of each epoch's order are left out). Graph::shard_inputs() (which
  // MonitoredTrainingSession calls with the process group's size and rank) sets these for inputs
  // that leave them at 1 and 0, unless shard_across_ranks is false.
  int64_t num_shards = 1;
  int64_t shard_index = 0;
  // false: with a process group, every rank reads all of this input (e.g. an evaluation input
  // that only the chief's EvaluationHook reads).
  bool shard_across_ranks = true;
  // Batches made ahead of the runs that read them, at most `prefetch` at a time (those being
  // made and those ready), by `num_workers` threads that call the source's get_batch and the
  // transform, several batches at once. 0 and 0 (the default): each batch is made in the run
  // that reads it, on the calling thread, with no thread started. num_workers > 0 with prefetch
  // 0: prefetch 2 x num_workers; prefetch > 0 with num_workers 0: one thread. With more than one
  // worker the source's get_batch is called concurrently (tensor_source and idx_source allow
  // that; dataset_source serialises the dataset's get() unless told it is thread-safe). The
  // threads start at the first batch, begin again at a new position (set_input_position, a
  // restore, shard_inputs) and stop when the graph is destroyed; a worker's error is thrown by
  // the run that reads that batch. Graph::input_options() shows the values in effect.
  int64_t prefetch = 0;
  int64_t num_workers = 0;
  // Applied to every batch after get_batch (see BatchTransform); none by default.
  BatchTransform transform;
};

// Where an input is: the first `offset` examples of epoch `epoch`'s order (0-based) have been
// consumed, by all shards together. The same on every shard, and independent of their number: a
// position saved by 2 ranks continues the same order on 1 or 4, every example of the epoch read
// once (the shards read examples offset + shard_index, offset + shard_index + num_shards, ...).
struct InputPosition {
  int64_t epoch = 0;
  int64_t offset = 0;
  bool operator==(const InputPosition&) const = default;
};

// The nodes of one input, one per component: `batch[0]`, `batch.data()`, `batch.target()`.
struct InputNodes {
  std::vector<Node> components;
  Node operator[](size_t i) const { return components.at(i); }
  size_t size() const { return components.size(); }
  Node data() const { return components.at(0); }
  Node target() const { return components.at(1); }
};

}  // namespace trainhooks
