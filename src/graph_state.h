// The representation behind Graph: node table and training state. Private to src/: graph.cpp
// owns it, the evaluator (session.cpp and the units it calls) reaches it through GraphInternal
// (graph_internal.h), and no public header includes it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <typeindex>
#include <vector>

#include "input_group.h"
#include "train_op.h"
#include "trainhooks/graph.h"

namespace trainhooks::internal {

struct NodeEntry {
  std::string name;
  NodeKind kind;
  PlaceholderOptions placeholder;  // kPlaceholder
  at::Tensor value;                // kVariable (live), kConstant
  at::Tensor initial;              // kVariable
  bool trainable = false;          // kVariable
  OpFn fn;                         // kOp
  int32_t input_group = -1;        // kInput
  int32_t component = -1;          // kInput
  int32_t train_index = -1;        // kTrainOp
};

struct GraphState {
  std::vector<NodeEntry> nodes;
  std::map<std::string, int32_t, std::less<>> by_name;
  bool finalized = false;
  int32_t global_step = -1;
  int64_t global_step_value = 0;
  std::vector<InputGroup> inputs;
  int64_t num_shards = 1;  // Graph::shard_inputs()
  int64_t shard_index = 0;
  std::vector<TrainOp> train_ops;
  std::vector<std::shared_ptr<torch::nn::Module>> modules;
  std::map<std::string, StateProvider*, std::less<>> state_providers;
  std::map<std::type_index, std::shared_ptr<void>> extensions;
  // Incremented at the start of every run of any session on this graph.
  uint64_t run_serial = 0;
  // By node index: what recording runs saw (Session::record_trace); sized by the first one.
  std::vector<std::optional<NodeTrace>> traces;
};

}  // namespace trainhooks::internal
