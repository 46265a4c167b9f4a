#include "trainhooks/input.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/tensor.h>

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <utility>

#include "input_group.h"
#include "input_prefetcher.h"
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

// The examples of a whole epoch that each shard reads: the same number for every shard, so that
// the shards' epochs end at the same step (the last size % num_shards examples of each epoch's
// order are left out, a different few each epoch when shuffled).
int64_t examples_per_shard(int64_t size, const InputOptions& o) { return size / o.num_shards; }

// The examples of this epoch each shard still reads, from the (global) position: what is left of
// the epoch's order, shared out evenly. After a change in the number of shards that may leave out
// a few more than size % num_shards at the end of that one epoch (fewer than num_shards).
int64_t left_per_shard(int64_t size, const InputOptions& o, const InputPosition& p) {
  return p.offset >= size ? 0 : (size - p.offset) / o.num_shards;
}

int64_t size_of(const InputGroup& g) { return static_cast<int64_t>(g.source->size()); }

// SplitMix64's finaliser: nearby inputs (consecutive offsets) give unrelated seeds.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

BatchPlace next_place(const std::string& name, int64_t size, const InputOptions& o,
                      InputPosition& position) {
  auto exhausted = [&] { return o.num_epochs > 0 && position.epoch >= o.num_epochs; };
  auto epoch_done = [&] {
    const int64_t left = left_per_shard(size, o, position);
    return left <= 0 || (o.drop_last && left < o.batch_size);
  };
  if (examples_per_shard(size, o) == 0)
    throw OutOfRangeError(
        fmt::format("End of input '{}': the dataset has no examples for this shard", name));
  if (!exhausted() && epoch_done()) {
    position.epoch += 1;
    position.offset = 0;
  }
  if (exhausted() || epoch_done()) {
    throw OutOfRangeError(fmt::format("End of input '{}' after {} epoch(s)", name, position.epoch));
  }
  return {.epoch = position.epoch,
          .offset = position.offset,
          .size = std::min(o.batch_size, left_per_shard(size, o, position))};
}

void build_order(const InputOptions& o, int64_t size, int64_t epoch, std::vector<int64_t>& order) {
  order.resize(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) order[i] = i;
  if (o.shuffle) {
    // Fisher-Yates with a generator seeded from (seed, epoch) only: the order of any epoch is
    // reproducible from a saved position, on every platform.
    std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(epoch) + 1);
    for (int64_t i = size - 1; i > 0; --i) {
      auto j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
      std::swap(order[i], order[j]);
    }
  }
}

void fill_indices(const InputOptions& o, const std::vector<int64_t>& order, const BatchPlace& place,
                  std::vector<int64_t>& indices) {
  indices.resize(static_cast<size_t>(place.size));
  const int64_t* first = order.data() + place.offset + o.shard_index;
  for (int64_t i = 0; i < place.size; ++i) indices[i] = first[i * o.num_shards];
}

std::vector<at::Tensor> make_batch(const std::string& name, InputSource& source,
                                   const InputOptions& o, const BatchPlace& place,
                                   const std::vector<int64_t>& indices, size_t num_components) {
  auto batch = source.get_batch(indices);
  if (o.transform) {
    // The place of the batch's first example in the epoch's order tells this shard's batch from
    // every other batch of the epoch, on any shard.
    const auto first = static_cast<uint64_t>(place.offset + o.shard_index);
    auto generator = at::make_generator<at::CPUGeneratorImpl>(
        mix(mix(mix(o.seed) ^ static_cast<uint64_t>(place.epoch)) ^ first));
    o.transform(batch, generator);
  }
  if (batch.size() != num_components) {
    throw InternalError(fmt::format("input '{}': the {} returned {} components, expected {}", name,
                                    o.transform ? "source and transform" : "source", batch.size(),
                                    num_components));
  }
  return batch;
}

void next_batch(InputGroup& g) {
  const auto& o = g.options;
  const BatchPlace place = next_place(g.name, size_of(g), o, g.position);
  if (o.prefetch > 0) {
    if (!g.prefetcher) g.prefetcher = start_prefetcher(g);
    g.batch = g.prefetcher->take(place);
  } else {
    if (g.order_epoch != place.epoch) {
      build_order(o, size_of(g), place.epoch, g.order);
      g.order_epoch = place.epoch;
    }
    fill_indices(o, g.order, place, g.indices);
    g.batch = make_batch(g.name, *g.source, o, place, g.indices, g.nodes.size());
  }
  skip(g.position, place, o);
}

void discard_ahead(InputGroup& g) {
  if (g.prefetcher) g.prefetcher->restart(g.options, g.position);
}

std::optional<int64_t> batches_left(const InputGroup& g) {
  const auto& o = g.options;
  if (o.num_epochs <= 0) return std::nullopt;
  if (g.position.epoch >= o.num_epochs) return 0;
  auto batches = [&](int64_t examples) {
    return o.drop_last ? examples / o.batch_size : (examples + o.batch_size - 1) / o.batch_size;
  };
  return batches(left_per_shard(size_of(g), o, g.position)) +
         (o.num_epochs - g.position.epoch - 1) * batches(examples_per_shard(size_of(g), o));
}

}  // namespace internal

}  // namespace trainhooks
