// TrainingSnapshot: everything a graph's training holds, as values in host memory, independent of
// any file format: what a checkpoint stores (checkpoint/checkpoint_format.h writes and reads it),
// and what distributed training broadcasts from one rank to the others.
//
//   capture:  capture_training_state(graph) -> snapshot
//   restore:  restore_training_state(graph, snapshot, source, env)
//
// restore_training_state() checks the whole snapshot against the graph before it changes
// anything (a missing variable, another shape or dtype, an optimizer state that does not fit, an
// unusable RNG state are errors naming `source`), so a restore is all or nothing; parts the graph
// has and the snapshot lacks (or the reverse) are left as they are, with a warning, but for
// variables, which must all be there. A snapshot of variables only (variables_only, e.g. an
// exported weights file) restores the variables and, when it has one, the global step, and warns
// about nothing else.
//
// On the thread that runs the graph's session, as Graph.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainhooks/env.h"
#include "trainhooks/input.h"

namespace trainhooks {

class Graph;

// A train op's optimizer state: one of `encoded` (LibTorch's built-in optimizers, as plain values
// laid out as PyTorch's Optimizer.state_dict()) or `archive` (the bytes of Optimizer::save, for
// any other optimizer), and the learning rate of each parameter group.
struct OptimizerSnapshot {
  c10::IValue encoded;
  std::string archive;
  std::vector<double> lrs;  // per parameter group; empty when the optimizer has no get_lr

  bool is_encoded() const { return !encoded.isNone(); }
};

struct TrainingSnapshot {
  std::vector<std::pair<std::string, at::Tensor>> variables;  // in the graph's order
  int64_t global_step = 0;
  // When it was taken (seconds since the Unix epoch); 0 when unknown.
  double wall_time = 0;
  std::map<std::string, OptimizerSnapshot> optimizers;  // by train op name
  std::optional<at::Tensor> cpu_rng;                    // the default CPU generator's state
  // Each input's position as a global position in its epoch's order (examples read by all ranks
  // together), by input node name.
  std::map<std::string, InputPosition> inputs;
  // The ranks that trained it (Graph::num_shards()). nullopt in a checkpoint of an earlier
  // version, whose input offsets count the examples of one rank's shard.
  std::optional<int64_t> world_size;
  std::map<std::string, std::string> state;  // StateProvider bytes by key
  // Only variables (and the global step) are meaningful: a weights file, not a training state.
  bool variables_only = false;

  const at::Tensor* find_variable(const std::string& name) const;
};

// Every variable (in the graph's order), the global step, every train op's optimizer state and
// learning rates, the default CPU generator's state, every input's position, the world size and
// every StateProvider's bytes. `copy`: the tensors are copies (for a write while training goes
// on), else they share the graph's memory. Adds the bytes of the tensors and optimizer archives it
// holds to `*bytes` when given. wall_time is left 0.
TrainingSnapshot capture_training_state(Graph& graph, bool copy = true, size_t* bytes = nullptr);

// Throws what restore_training_state() would throw for `snapshot`, and changes nothing.
void check_training_state(Graph& graph, const TrainingSnapshot& snapshot,
                          const std::string& source);

// Checks `snapshot` against the graph, then applies it: the StateProviders first (the only part
// that may still reject its bytes; they are rolled back if one does, before anything else
// changed), then variables, optimizer states and learning rates, the global step, the RNG and the
// inputs' positions. Notes (a change of world size) are logged to `env` as INFO, warnings as
// WARNING. `source` names the snapshot in messages (a checkpoint's path).
void restore_training_state(Graph& graph, const TrainingSnapshot& snapshot,
                            const std::string& source, const Env& env);

}  // namespace trainhooks
