// The model that checkpoint_trainer trains, shared with the tests that check its checkpoints.
//
// Everything that a resumed run must restore to be bit-identical to an uninterrupted one is
// here: a dropout layer (the CPU RNG state), an Adam optimizer (its per-parameter state and step
// counts) and a shuffled, endlessly repeating input (its position and epoch). make() seeds the
// CPU RNG first, so every process builds the same initial state.
//
//   auto m = th::testing::CheckpointModel::make();
//   th::MonitoredTrainingSession sess(m->g, {.checkpoint_dir = dir,
//                                            .checkpoints = {.save_steps = 1}});
//   while (!sess.should_stop()) sess.run(m->train);
//   th::testing::save_training_state(m->g, m->train, "state.pt");
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>

#include "trainhooks/graph.h"

namespace trainhooks::testing {

struct CheckpointModel {
  static constexpr int64_t kExamples = 64;
  static constexpr int64_t kBatchSize = 8;

  // torch::manual_seed(0), then the data, the network and the graph.
  static std::unique_ptr<CheckpointModel> make();

  Graph g;
  InputNodes batch;  // {x, y}
  Node loss;
  Node train;  // Adam; increments the global step
};

// The state a resumed run must reproduce, as name -> tensor: `var/<name>` for every variable,
// `adam/<i>/{step,exp_avg,exp_avg_sq}` for the i-th parameter of the train op's optimizer,
// `global_step`, `input/position` ([epoch, offset]) and `rng/cpu`.
std::map<std::string, at::Tensor> training_state(Graph& g, Node train);

// Writes training_state() to `path` as a torch pickle (torch.load gives the dict), and reads it.
void save_training_state(Graph& g, Node train, const std::string& path);
std::map<std::string, at::Tensor> load_training_state(const std::string& path);

// One line per entry that is in only one of the states or differs in dtype, shape or any bit;
// "" when they are identical.
std::string state_differences(const std::map<std::string, at::Tensor>& a,
                              const std::map<std::string, at::Tensor>& b);

// Keeps the process-wide CPU RNG state of its construction and puts it back at destruction: tests
// that seed it or restore checkpoints leave it as they found it for the tests after them.
class CpuRngGuard {
 public:
  CpuRngGuard();
  ~CpuRngGuard();
  CpuRngGuard(const CpuRngGuard&) = delete;
  CpuRngGuard& operator=(const CpuRngGuard&) = delete;

 private:
  at::Tensor state_;
};

}  // namespace trainhooks::testing
