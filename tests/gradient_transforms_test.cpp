#include "trainhooks/gradient_transforms.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros_like.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/types.h>  // clip_grad.h uses torch::Tensor without including it

#include <torch/nn/utils/clip_grad.h>

#include <cmath>
#include <span>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;

namespace gradient_transforms_test {

// Parameters with gradients, and copies of those gradients.
struct Gradients {
  explicit Gradients(std::vector<at::Tensor> grads) {
    for (auto& g : grads) {
      at::Tensor p = at::zeros_like(g).requires_grad_(true);
      p.mutable_grad() = g.clone();
      params.push_back(p);
      copies.push_back(g.clone());
    }
  }
  std::vector<at::Tensor> params;
  std::vector<at::Tensor> copies;
};

TEST(GradientTransformsTest, ClipByGlobalNormIsClipGradNormBitForBit) {
  at::manual_seed(11);
  for (double max_norm : {0.01, 0.3, 1.0, 1e6}) {
    Gradients g({at::randn({5, 7}) * 3, at::randn({7}), at::randn({2, 3, 4}) / 7});
    torch::nn::utils::clip_grad_norm_(g.params, max_norm);
    th::clip_by_global_norm(max_norm)(std::span<at::Tensor>(g.copies));
    for (size_t i = 0; i < g.params.size(); ++i)
      EXPECT_TRUE(at::equal(g.params[i].grad(), g.copies[i]))
          << "max_norm " << max_norm << ", " << i;
  }
}

TEST(GradientTransformsTest, ClipByGlobalNormSkipsUndefinedGradients) {
  std::vector<at::Tensor> grads{at::Tensor(), at::full({4}, 2.0), at::Tensor()};
  th::clip_by_global_norm(1.0)(std::span<at::Tensor>(grads));
  EXPECT_FALSE(grads[0].defined());
  EXPECT_FALSE(grads[2].defined());
  EXPECT_NEAR(grads[1].norm().item<double>(), 1.0, 1e-5);  // the norm was 4
  std::vector<at::Tensor> none{at::Tensor()};
  th::clip_by_global_norm(1.0)(std::span<at::Tensor>(none));  // nothing to clip
  EXPECT_FALSE(none[0].defined());
}

TEST(GradientTransformsTest, ClipByGlobalNormNeedsAPositiveMaxNorm) {
  for (double bad : {0.0, -1.0, std::nan("")}) {
    EXPECT_THAT(
        th::testing::error_message<th::InvalidArgument>([&] { th::clip_by_global_norm(bad); }),
        ::testing::HasSubstr("clip_by_global_norm: invalid max_norm"));
  }
}

}  // namespace gradient_transforms_test
