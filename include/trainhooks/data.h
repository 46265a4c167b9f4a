// Adapter from LibTorch's map-style datasets (torch::data::datasets::Dataset with
// Example<Tensor, Tensor>) to an InputSource with components {"data", "target"}.
//
//   auto mnist = torch::data::datasets::MNIST(dir);
//   auto batch = g.input("train", th::dataset_source(std::move(mnist)), {.batch_size = 64});
//   // batch.data(): images, batch.target(): labels
//
// With workers (InputOptions::num_workers, as a DataLoader's workers): get_batch is called from
// several threads at once. A torch::data dataset promises nothing about that, so by default the
// dataset's get() is called by one thread at a time (a mutex) and only the stacking and the
// input's transform run in parallel; {.thread_safe = true} says that get() may run concurrently
// (it only reads the dataset, as MNIST's does) and drops the mutex. The batches are the same
// as without workers provided get(i) depends on i alone: a dataset that draws random numbers in
// get() (its own augmentation, or a .map() of a random transform) draws them in whatever order
// the threads call it, so its batches then depend on the threads' timing. Draw them in the
// input's transform instead (InputOptions::transform), from the generator it is given. Only
// map-style datasets are accepted: a stateful (chunk) dataset has no index to resume from.
//
// Include this header only where the dataset is built: it pulls in torch/data.
#pragma once

#include <torch/data/datasets/base.h>
#include <torch/data/example.h>

#include <ATen/ATen.h>

#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "trainhooks/errors.h"
#include "trainhooks/input.h"

namespace trainhooks {

struct DatasetSourceOptions {
  // true: the dataset's get() may be called from several threads at once.
  bool thread_safe = false;
};

template <typename Dataset>
class DatasetSource final : public InputSource {
 public:
  explicit DatasetSource(Dataset dataset, DatasetSourceOptions options = {})
      : dataset_(std::move(dataset)) {
    auto n = dataset_.size();
    if (!n.has_value()) throw InvalidArgument("dataset_source: the dataset has no size");
    size_ = *n;
    if (!options.thread_safe) get_mutex_.emplace();
  }
  size_t size() const override { return size_; }
  std::vector<std::string> component_names() const override { return {"data", "target"}; }
  std::vector<at::Tensor> get_batch(const std::vector<int64_t>& indices) override {
    std::vector<at::Tensor> data, target;
    data.reserve(indices.size());
    target.reserve(indices.size());
    {
      std::unique_lock<std::mutex> lock;
      if (get_mutex_) lock = std::unique_lock(*get_mutex_);
      for (int64_t i : indices) {
        auto example = dataset_.get(static_cast<size_t>(i));
        data.push_back(std::move(example.data));
        target.push_back(std::move(example.target));
      }
    }
    return {at::stack(data), at::stack(target)};
  }

 private:
  Dataset dataset_;
  size_t size_ = 0;
  std::optional<std::mutex> get_mutex_;  // unless the dataset is thread-safe
};

template <typename Dataset>
std::shared_ptr<InputSource> dataset_source(Dataset dataset, DatasetSourceOptions options = {}) {
  return std::make_shared<DatasetSource<Dataset>>(std::move(dataset), options);
}

}  // namespace trainhooks
