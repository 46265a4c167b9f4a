#include "trainhooks/input.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/tensor.h>

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <utility>

#include "input_group.h"
#include "trainhooks/errors.h"

namespace trainhooks {

namespace {

class TensorSource final : public InputSource {
 public:
  TensorSource(std::vector<at::Tensor> tensors, std::vector<std::string> names)
      : tensors_(std::move(tensors)), names_(std::move(names)) {}
  size_t size() const override { return static_cast<size_t>(tensors_.front().size(0)); }
  std::vector<std::string> component_names() const override { return names_; }
  std::vector<at::Tensor> get_batch(const std::vector<int64_t>& indices) override {
    auto index = at::tensor(indices, at::kLong);
    std::vector<at::Tensor> out;
    out.reserve(tensors_.size());
    for (const auto& t : tensors_) out.push_back(t.index_select(0, index));
    return out;
  }

 private:
  std::vector<at::Tensor> tensors_;
  std::vector<std::string> names_;
};

}  // namespace

std::shared_ptr<InputSource> tensor_source(std::vector<at::Tensor> tensors,
                                           std::vector<std::string> names) {
  if (tensors.empty()) throw InvalidArgument("tensor_source: tensors is empty");
  if (names.size() != tensors.size()) {
    throw InvalidArgument(
        fmt::format("tensor_source: {} names given for {} tensors", names.size(), tensors.size()));
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined() || tensors[i].dim() == 0) {
      throw InvalidArgument(
          fmt::format("tensor_source: tensor '{}' must have a batch dimension", names[i]));
    }
    if (tensors[i].size(0) != tensors[0].size(0)) {
      throw InvalidArgument(fmt::format("tensor_source: tensor '{}' has {} examples, '{}' has {}",
                                        names[i], tensors[i].size(0), names[0],
                                        tensors[0].size(0)));
    }
  }
  return std::make_shared<TensorSource>(std::move(tensors), std::move(names));
}

namespace internal {

namespace {

void build_order(InputGroup& g) {
  auto n = static_cast<int64_t>(g.source->size());
  g.order.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) g.order[i] = i;
  if (g.options.shuffle) {
    // Fisher-Yates with a generator seeded from (seed, epoch) only: the order of any epoch is
    // reproducible from a saved position, on every platform.
    std::mt19937_64 rng(g.options.seed * 0x9E3779B97F4A7C15ULL +
                        static_cast<uint64_t>(g.position.epoch) + 1);
    for (int64_t i = n - 1; i > 0; --i) {
      auto j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
      std::swap(g.order[i], g.order[j]);
    }
  }
  g.order_epoch = g.position.epoch;
}

// The examples of a whole epoch that each shard reads: the same number for every shard, so that
// the shards' epochs end at the same step (the last size % num_shards examples of each epoch's
// order are left out, a different few each epoch when shuffled).
int64_t examples_per_shard(const InputGroup& g) {
  return static_cast<int64_t>(g.source->size()) / g.options.num_shards;
}

// The examples of this epoch each shard still reads, from the (global) position: what is left of
// the epoch's order, shared out evenly. After a change in the number of shards that may leave out
// a few more than size % num_shards at the end of that one epoch (fewer than num_shards).
int64_t left_per_shard(const InputGroup& g) {
  const auto size = static_cast<int64_t>(g.source->size());
  return g.position.offset >= size ? 0 : (size - g.position.offset) / g.options.num_shards;
}

}  // namespace

void next_batch(InputGroup& g) {
  const auto& o = g.options;
  auto exhausted = [&] { return o.num_epochs > 0 && g.position.epoch >= o.num_epochs; };
  auto epoch_done = [&] {
    const int64_t left = left_per_shard(g);
    return left <= 0 || (o.drop_last && left < o.batch_size);
  };
  if (examples_per_shard(g) == 0)
    throw OutOfRangeError(
        fmt::format("End of input '{}': the dataset has no examples for this shard", g.name));
  if (!exhausted() && epoch_done()) {
    g.position.epoch += 1;
    g.position.offset = 0;
  }
  if (exhausted() || epoch_done()) {
    throw OutOfRangeError(
        fmt::format("End of input '{}' after {} epoch(s)", g.name, g.position.epoch));
  }
  if (g.order_epoch != g.position.epoch) build_order(g);
  const int64_t k = std::min(o.batch_size, left_per_shard(g));
  g.indices.resize(static_cast<size_t>(k));
  const int64_t* first = g.order.data() + g.position.offset + o.shard_index;
  for (int64_t i = 0; i < k; ++i) g.indices[i] = first[i * o.num_shards];
  auto batch = g.source->get_batch(g.indices);
  if (batch.size() != g.nodes.size()) {
    throw InternalError(fmt::format("input '{}': the source returned {} components, expected {}",
                                    g.name, batch.size(), g.nodes.size()));
  }
  g.batch = std::move(batch);
  g.position.offset += k * o.num_shards;
}

std::optional<int64_t> batches_left(const InputGroup& g) {
  const auto& o = g.options;
  if (o.num_epochs <= 0) return std::nullopt;
  if (g.position.epoch >= o.num_epochs) return 0;
  auto batches = [&](int64_t examples) {
    return o.drop_last ? examples / o.batch_size : (examples + o.batch_size - 1) / o.batch_size;
  };
  return batches(left_per_shard(g)) +
         (o.num_epochs - g.position.epoch - 1) * batches(examples_per_shard(g));
}

}  // namespace internal

}  // namespace trainhooks
