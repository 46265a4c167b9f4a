// The optimizer state of LibTorch's built-in optimizers (SGD, Adam, AdamW, RMSprop, Adagrad) as
// plain values, laid out as PyTorch's Optimizer.state_dict():
//
//   {"type": "adam",
//    "state": {0: {"step": 12, "exp_avg": <tensor>, "exp_avg_sq": <tensor>}, 1: {...}},
//    "param_groups": [{"lr": 0.001, "betas": [0.9, 0.999], "eps": 1e-08, "weight_decay": 0.0,
//                      "amsgrad": false, "params": [0, 1]}]}
//
// Parameters are numbered across the groups in order; a parameter without state (no step taken
// for it yet) has no entry; undefined state tensors (max_exp_avg_sq without amsgrad) are left out.
// The tensors are pickled next to the rest of the training state, so a checkpoint writes them from
// their memory once; LibTorch's Optimizer::save archive, which other optimizers use, is a zip of
// its own nested in the training-state file. docs/formats.md "Checkpoints" documents both.
#pragma once

#include <ATen/core/ivalue.h>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace trainhooks::internal {

// The encoding of `opt`, or nullopt when it is not one of the built-in optimizers (or holds a
// parameter state of another type). `copy`: the tensors are cloned (for a write on another thread
// while training goes on); else shared with the optimizer. Adds the tensors' bytes to `bytes`.
std::optional<c10::IValue> encode_optimizer(const torch::optim::Optimizer& opt, bool copy,
                                            size_t& bytes);

// Whether `encoded` fits `opt`: its type, the number of groups and of parameters in each, the
// options, and the state tensors' shapes and dtypes against the parameters. Throws
// InvalidArgument saying what does not fit; changes nothing.
void check_encoded_optimizer(const c10::IValue& encoded, const torch::optim::Optimizer& opt);

// The checks of check_encoded_optimizer() that need no optimizer: a well-formed encoding of a
// known type. Throws InvalidArgument.
void validate_encoded_optimizer(const c10::IValue& encoded);

// Replaces the state and the options of `opt` with those of `encoded` (checked first).
void load_encoded_optimizer(const c10::IValue& encoded, torch::optim::Optimizer& opt);

// The "type" of an encoding ("" when it has none).
std::string encoded_optimizer_type(const c10::IValue& encoded);

// Its state tensors by "<parameter index>/<name>", e.g. "0/exp_avg", in index order.
std::vector<std::pair<std::string, at::Tensor>> encoded_optimizer_tensors(
    const c10::IValue& encoded);

// The archive that Optimizer::save would write for this state (what Optimizer::load reads), made
// with an optimizer of the encoded type over placeholder parameters. Throws InvalidArgument when
// the encoding is malformed.
std::string encoded_optimizer_archive(const c10::IValue& encoded);

// LibTorch's Optimizer::save and Optimizer::load through an archive held as bytes, for optimizers
// that are not built in. Here rather than where they are used so that only this file parses
// <torch/serialize/archive.h> (about 12 s of compile time).
std::string optimizer_archive(const torch::optim::Optimizer& opt);
void load_optimizer_archive(const std::string& archive, torch::optim::Optimizer& opt);

// Reads `archive` as Optimizer::load begins, throwing what LibTorch throws when it cannot.
void read_optimizer_archive(const std::string& archive);

}  // namespace trainhooks::internal
