// The CNN of the Fashion-MNIST example, shared with its benchmark (bench/fashion_mnist_bench.cpp),
// which trains it by hand and through MonitoredTrainingSession, and matched layer for layer by
// the PyTorch peer (bench/fashion_mnist_pytorch.py).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <vector>

namespace fashion_mnist {

// conv 1->32 3x3, [batch norm,] ReLU, 2x2 max-pool; conv 32->64 3x3, [batch norm,] ReLU, 2x2
// max-pool; [dropout;] linear 1600->10.
struct NetOptions {
  double dropout = 0;  // 0: none
  bool batch_norm = false;
};

struct NetImpl : torch::nn::Module {
  explicit NetImpl(NetOptions options = {})
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3)))),
        drop(register_module("drop", torch::nn::Dropout(options.dropout))),
        fc(register_module("fc", torch::nn::Linear(64 * 5 * 5, 10))) {
    if (options.batch_norm) {
      bn1 = register_module("bn1", torch::nn::BatchNorm2d(32));
      bn2 = register_module("bn2", torch::nn::BatchNorm2d(64));
    }
  }

  torch::Tensor forward(const torch::Tensor& x) {
    auto h = conv1->forward(x);
    if (bn1) h = bn1->forward(h);
    h = torch::max_pool2d(torch::relu(h), 2);
    h = conv2->forward(h);
    if (bn2) h = bn2->forward(h);
    h = torch::max_pool2d(torch::relu(h), 2);
    h = h.flatten(1);
    if (drop->options.p() > 0) h = drop->forward(h);
    return fc->forward(h);
  }

  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Dropout drop;
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

}  // namespace fashion_mnist

namespace fashion_mnist {

// Training-time augmentation, as the training input's transform (InputOptions::transform): each
// image mirrored left-right with probability 1/2 (clothes look alike either way). It draws from
// the generator the input gives each batch, seeded from the batch's place in the data alone, so a
// batch comes out the same made ahead by worker threads or in the step, and after a restore.
inline void random_flips(std::vector<torch::Tensor>& batch, at::Generator& generator) {
  torch::Tensor& images = batch.at(0);
  auto flip = torch::rand({images.size(0), 1, 1, 1}, generator) < 0.5;
  images = torch::where(flip, images.flip({3}), images);
}

}  // namespace fashion_mnist
