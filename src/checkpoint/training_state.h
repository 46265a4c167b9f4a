// The mapping between a Graph's training state and a checkpoint's contents (checkpoint_file.h):
// what a checkpoint holds of a graph, and how a checkpoint is checked against a graph and applied
// to it. The Saver calls these around the files:
//   save:    capture_training_state(graph) -> contents (+ path, time) -> write_checkpoint_files
//   restore: decode_checkpoint -> check_training_state(graph, contents) -> plan
//            -> apply_training_state(graph, contents, plan)
// check_training_state() changes nothing and throws for anything that cannot be applied (a
// missing variable, another shape or dtype, an optimizer state that does not fit, an unusable RNG
// state), so that a restore is all or nothing: apply_training_state() only fails if a
// StateProvider rejects its bytes, and then rolls the providers back before anything else is
// applied.
//
//   internal::CheckpointContents c = internal::capture_training_state(g, /*copy=*/true, bytes);
//   internal::RestorePlan plan = internal::check_training_state(g, decoded);
//   internal::apply_training_state(g, decoded, plan, env);
//
// On the thread that runs the graph's session, as Graph.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "trainhooks/env.h"
#include "trainhooks/graph.h"

namespace trainhooks::internal {

// Every variable (in the graph's order), the global step, every train op's optimizer state and
// learning rates, the default CPU generator's state, every input's position and every
// StateProvider's bytes; not the path or the wall time. `copy`: the tensors are copies (for a
// write while training goes on), else they may share the graph's memory. Adds the bytes of the
// tensors and optimizer archives it holds to `bytes`.
CheckpointContents capture_training_state(Graph& graph, bool copy, size_t& bytes);

// What a restore will apply, checked against the graph; refers into the contents it was made of.
struct RestorePlan {
  std::vector<std::pair<Node, at::Tensor>> variables;
  std::vector<std::pair<Node, const internal::OptimizerState*>> optimizers;
  std::vector<std::pair<Node, InputPosition>> inputs;
  std::vector<std::pair<std::string, StateProvider*>> providers;
  std::vector<const std::string*> provider_bytes;
  std::vector<std::string> notes;  // logged as INFO
  std::vector<std::string> warnings;
};

// NotFoundError or InvalidArgument naming the variable, train op or RNG state that the graph
// cannot take from `contents`. Parts the graph has and the checkpoint lacks (or the reverse)
// become warnings of the plan, but for variables, which must all be there.
RestorePlan check_training_state(Graph& graph, const CheckpointContents& contents);

// Applies a plan of check_training_state(graph, contents) and logs its warnings to `env`.
void apply_training_state(Graph& graph, const CheckpointContents& contents, const RestorePlan& plan,
                          const Env& env);

}  // namespace trainhooks::internal
