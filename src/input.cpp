#include "trainhooks/input.h"

#include <ATen/ATen.h>

#include <fmt/format.h>

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

}  // namespace trainhooks
