// Adapter from LibTorch's map-style datasets (torch::data::datasets::Dataset with
// Example<Tensor, Tensor>) to an InputSource with components {"data", "target"}.
//
//   auto mnist = torch::data::datasets::MNIST(dir);
//   auto batch = g.input("train", th::dataset_source(std::move(mnist)), {.batch_size = 64});
//   // batch.data(): images, batch.target(): labels
//
// Include this header only where the dataset is built: it pulls in torch/data.
#pragma once

#include <torch/data/datasets/base.h>
#include <torch/data/example.h>

#include <ATen/ATen.h>

#include <memory>
#include <utility>

#include "trainhooks/errors.h"
#include "trainhooks/input.h"

namespace trainhooks {

template <typename Dataset>
class DatasetSource final : public InputSource {
 public:
  explicit DatasetSource(Dataset dataset) : dataset_(std::move(dataset)) {
    auto n = dataset_.size();
    if (!n.has_value()) throw InvalidArgument("dataset_source: the dataset has no size");
    size_ = *n;
  }
  size_t size() const override { return size_; }
  std::vector<std::string> component_names() const override { return {"data", "target"}; }
  std::vector<at::Tensor> get_batch(const std::vector<int64_t>& indices) override {
    std::vector<at::Tensor> data, target;
    data.reserve(indices.size());
    target.reserve(indices.size());
    for (int64_t i : indices) {
      auto example = dataset_.get(static_cast<size_t>(i));
      data.push_back(std::move(example.data));
      target.push_back(std::move(example.target));
    }
    return {at::stack(data), at::stack(target)};
  }

 private:
  Dataset dataset_;
  size_t size_ = 0;
};

template <typename Dataset>
std::shared_ptr<InputSource> dataset_source(Dataset dataset) {
  return std::make_shared<DatasetSource<Dataset>>(std::move(dataset));
}

}  // namespace trainhooks
