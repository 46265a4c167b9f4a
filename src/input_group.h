// An input's batching state inside the graph (graph_state.h) and the step that pulls its next
// batch: epochs, a per-epoch shuffled order, shards and the end of data. Implemented in input.cpp
// beside InputSource; called by the evaluator once per run that needs the input.
//
//   if (group.batch_serial != run_serial) { next_batch(group); group.batch_serial = run_serial; }
//   const at::Tensor& x = group.batch[component];
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
};

// Pulls the next batch of `group` into group.batch and advances its position (OutOfRangeError
// at the end of data).
void next_batch(InputGroup& group);

// The batches next_batch() yields from the group's position until the end of data; nullopt when
// the group repeats forever.
std::optional<int64_t> batches_left(const InputGroup& group);

}  // namespace trainhooks::internal
