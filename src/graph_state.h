// The representation behind Graph: node table and training state. Private to src/: graph.cpp
// owns it, the evaluator (session.cpp and the units it calls) reaches it through GraphInternal
// (graph_internal.h), and no public header includes it.
#pragma once

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <typeindex>
#include <vector>

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

struct InputGroup {
  std::string name;
  std::shared_ptr<InputSource> source;
  InputOptions options;
  InputPosition position;
  std::vector<Node> nodes;
  // The batch of the run that last pulled one (graph run serial), shared by the components.
  std::vector<at::Tensor> batch;
  uint64_t batch_serial = 0;
  std::vector<int64_t> order;  // this epoch's example order
  int64_t order_epoch = -1;
  std::vector<int64_t> indices;  // scratch
};

struct TrainOp {
  Node loss;
  OptimizerFactory factory;
  MinimizeOptions options;
  std::vector<Node> vars;
  std::vector<at::Tensor> params;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

struct GraphState {
  std::vector<NodeEntry> nodes;
  std::map<std::string, int32_t, std::less<>> by_name;
  bool finalized = false;
  int32_t global_step = -1;
  int64_t global_step_value = 0;
  std::vector<InputGroup> inputs;
  std::vector<TrainOp> train_ops;
  std::vector<std::shared_ptr<torch::nn::Module>> modules;
  std::map<std::string, StateProvider*, std::less<>> state_providers;
  std::map<std::type_index, std::shared_ptr<void>> extensions;
  // Incremented at the start of every run of any session on this graph.
  uint64_t run_serial = 0;
};

// Pulls the next batch of `group` into group.batch (OutOfRangeError at the end of data).
void next_batch(InputGroup& group);

}  // namespace trainhooks::internal
