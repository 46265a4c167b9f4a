// An input's batching state inside the graph (graph_state.h) and the step that pulls its next
// batch: epochs, a per-epoch shuffled order, shards and the end of data. Implemented in input.cpp
// beside InputSource; called by the evaluator once per run that needs the input.
//
//   if (group.batch_serial != run_serial) { next_batch(group); group.batch_serial = run_serial; }
//   const at::Tensor& x = group.batch[component];
//
// The batches are a pure function of the position: next_place() says where the next one lies,
// fill_indices() which examples it holds and make_batch() collates and transforms them. An
// input that works ahead (InputOptions::prefetch, num_workers) has an InputPrefetcher
// (input_prefetcher.h) run the same three on its threads; next_batch() still moves the position
// itself, so that it is the runs' position, and takes the prefetcher's batch for that place.
//
// Not thread-safe, as Graph.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainhooks/input.h"
#include "trainhooks/node.h"

namespace trainhooks::internal {

class InputPrefetcher;
// Defined with InputPrefetcher, so that this header (and graph_state.h) need not include it.
struct InputPrefetcherDeleter {
  void operator()(InputPrefetcher* prefetcher) const noexcept;
};

struct InputGroup {
  std::string name;
  std::shared_ptr<InputSource> source;
  InputOptions options;  // as given, but for the shard and the batch of Graph::shard_inputs()
  bool sharded_by_graph = false;  // its shard is the graph's (Graph::shard_inputs())
  InputPosition position;
  std::vector<Node> nodes;
  // The batch of the run that last pulled one (graph run serial), shared by the components.
  std::vector<at::Tensor> batch;
  uint64_t batch_serial = 0;
  std::vector<int64_t> order;  // this epoch's example order
  int64_t order_epoch = -1;
  std::vector<int64_t> indices;  // scratch
  // With options.prefetch > 0: the threads that work ahead, started by the first next_batch().
  std::unique_ptr<InputPrefetcher, InputPrefetcherDeleter> prefetcher;
};

// Pulls the next batch of `group` into group.batch and advances its position (OutOfRangeError
// at the end of data).
void next_batch(InputGroup& group);

// Forgets the batches made ahead: the next next_batch() reads from group.position with
// group.options. Called whenever either changes other than by next_batch().
void discard_ahead(InputGroup& group);

// The batches next_batch() yields from the group's position until the end of data; nullopt when
// the group repeats forever.
std::optional<int64_t> batches_left(const InputGroup& group);

// Where a batch lies: `size` examples of each shard from `offset` (all shards together) of epoch
// `epoch`'s order.
struct BatchPlace {
  int64_t epoch = 0;
  int64_t offset = 0;
  int64_t size = 0;
  bool operator==(const BatchPlace&) const = default;
};

// The place of the batch at `position` of an input `name` over `size` examples: first moves
// `position` to the next epoch when this one has no batch left. OutOfRangeError at the end of
// data (`position` then stays at the epoch past the last). The caller moves `position` past the
// batch (skip()) once it has it, so that a failed batch is read again by the next run.
BatchPlace next_place(const std::string& name, int64_t size, const InputOptions& options,
                      InputPosition& position);
inline void skip(InputPosition& position, const BatchPlace& place, const InputOptions& options) {
  position.offset = place.offset + place.size * options.num_shards;
}

// Epoch `epoch`'s order of `size` examples: 0, 1, ... or, with options.shuffle, a permutation
// that depends only on options.seed and the epoch.
void build_order(const InputOptions& options, int64_t size, int64_t epoch,
                 std::vector<int64_t>& order);

// The examples of batch `place` that shard options.shard_index reads, from its epoch's order.
void fill_indices(const InputOptions& options, const std::vector<int64_t>& order,
                  const BatchPlace& place, std::vector<int64_t>& indices);

// source.get_batch(indices), then options.transform with a generator seeded from the seed and
// `place` only; InternalError naming the input when the number of components is not
// `num_components`. Safe to call from several threads when the source and transform are.
std::vector<at::Tensor> make_batch(const std::string& name, InputSource& source,
                                   const InputOptions& options, const BatchPlace& place,
                                   const std::vector<int64_t>& indices, size_t num_components);

}  // namespace trainhooks::internal
