#include "checkpoint/checkpoint_test_model.h"

#include <ATen/ATen.h>

namespace trainhooks::testing {

CheckpointTestModel::CheckpointTestModel() {
  Node weight = g.variable("net/weight", at::arange(6, at::kFloat).reshape({2, 3}) * 0.25);
  Node bias = g.variable("net/bias", at::tensor({-1.5f, 2.0f}));
  g.variable("scale", at::tensor({3}, at::kLong), {.trainable = false});
  auto xs = at::arange(36, at::kFloat).reshape({12, 3}) / 36;
  auto ys = at::stack({xs.sum(1), xs.select(1, 0) - xs.select(1, 2)}, 1);
  InputNodes batch =
      g.input("data", tensor_source({xs, ys}, {"x", "y"}), {.batch_size = 3, .num_epochs = 0});
  Node loss = g.op("loss", [=](Run& r) {
    return (at::matmul(r[batch[0]], r[weight].t()) + r[bias] - r[batch[1]]).square().mean();
  });
  train = g.minimize("train", loss, adam(0.05));
  g.register_state("test/counter", &counter);
}

}  // namespace trainhooks::testing
