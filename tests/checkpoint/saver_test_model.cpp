#include "checkpoint/saver_test_model.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>

namespace trainhooks::testing::saver_fixture {

Model::Model(int64_t seed, th::OptimizerFactory optimizer) {
  torch::manual_seed(seed);  // different module initialisations for different seeds
  torch::nn::Linear linear(3, 2);
  net = linear.ptr();
  g.add_module("net", linear);
  auto xs = torch::arange(48, torch::kFloat).reshape({16, 3}) / 20;
  auto ys = torch::stack({xs.sum(1), xs.select(1, 0) - xs.select(1, 2)}, 1);
  batch = g.input("data", th::tensor_source({xs, ys}, {"x", "y"}),
                  {.batch_size = 3, .shuffle = true, .seed = 5, .num_epochs = 0});
  auto n = linear.ptr();  // a shared_ptr: forward() is non-const
  auto b = batch;
  loss = g.op("loss", [=](th::Run& r) { return (n->forward(r[b[0]]) - r[b[1]]).square().mean(); });
  train = g.minimize("train", loss, std::move(optimizer));
  g.register_state("test/counter", &counter);
}

std::vector<at::Tensor> Model::values() const {
  std::vector<at::Tensor> out;
  for (th::Node v : g.variables()) out.push_back(g.variable_value(v).detach().clone());
  return out;
}

}  // namespace trainhooks::testing::saver_fixture
