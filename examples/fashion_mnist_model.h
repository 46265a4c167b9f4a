// The CNN of the Fashion-MNIST example, shared with its benchmark (bench/fashion_mnist_bench.cpp),
// which trains it by hand and through MonitoredTrainingSession, and matched layer for layer by
// the PyTorch peer (bench/fashion_mnist_pytorch.py).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace fashion_mnist {

// conv 1->32 3x3, ReLU, 2x2 max-pool; conv 32->64 3x3, ReLU, 2x2 max-pool; linear 1600->10.
struct NetImpl : torch::nn::Module {
  NetImpl()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3)))),
        fc(register_module("fc", torch::nn::Linear(64 * 5 * 5, 10))) {}

  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::max_pool2d(torch::relu(conv1->forward(x)), 2);
    h = torch::max_pool2d(torch::relu(conv2->forward(h)), 2);
    return fc->forward(h.flatten(1));
  }

  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

}  // namespace fashion_mnist
