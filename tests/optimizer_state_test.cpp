#include "optimizer_state.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;
namespace in = trainhooks::internal;

namespace optimizer_state_test {

using MakeOptimizer =
    std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor>)>;

std::vector<torch::Tensor> make_params(int seed) {
  torch::manual_seed(seed);
  return {torch::randn({3, 4}).requires_grad_(), torch::randn({4}).requires_grad_(),
          torch::randn({2}).requires_grad_()};
}

// Steps with fixed gradients; the last parameter gets none, so it has no state (but Adagrad's).
void steps(torch::optim::Optimizer& opt, const std::vector<torch::Tensor>& params, int n,
           int seed) {
  torch::manual_seed(seed);
  for (int i = 0; i < n; ++i) {
    for (size_t j = 0; j + 1 < params.size(); ++j)
      params[j].mutable_grad() = torch::randn_like(params[j]);
    opt.step();
  }
}

std::vector<torch::Tensor> values(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone());
  return out;
}

void expect_bit_identical(const std::vector<torch::Tensor>& a,
                          const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
}

struct Case {
  std::string type;
  MakeOptimizer make;
};

class OptimizerStateTest : public ::testing::TestWithParam<Case> {};

// Encoded after 3 steps and loaded into a fresh optimizer over copies of the parameters, both
// continue bit-identically; the options come back with the state.
TEST_P(OptimizerStateTest, RoundTripContinuesBitIdentically) {
  auto params = make_params(1);
  auto opt = GetParam().make(params);
  steps(*opt, params, 3, 2);
  size_t bytes = 0;
  auto encoded = in::encode_optimizer(*opt, /*copy=*/true, bytes);
  ASSERT_TRUE(encoded.has_value());
  EXPECT_GT(bytes, 0u);
  EXPECT_EQ(in::encoded_optimizer_type(*encoded), GetParam().type);
  EXPECT_NO_THROW(in::validate_encoded_optimizer(*encoded));

  std::vector<torch::Tensor> copies;
  for (const auto& p : params) copies.push_back(p.detach().clone().requires_grad_());
  auto other = GetParam().make(copies);
  other->param_groups()[0].options().set_lr(123.0);  // replaced by the saved options
  in::load_encoded_optimizer(*encoded, *other);
  EXPECT_EQ(other->param_groups()[0].options().get_lr(), opt->param_groups()[0].options().get_lr());
  EXPECT_EQ(other->state().size(), opt->state().size());

  steps(*opt, params, 2, 3);
  steps(*other, copies, 2, 3);
  expect_bit_identical(values(params), values(copies));

  // The archive made from the encoding is what Optimizer::save writes: loading it gives the same.
  auto from_archive_params = std::vector<torch::Tensor>();
  for (const auto& p : copies) from_archive_params.push_back(p.detach().clone().requires_grad_());
  size_t ignored = 0;
  auto again = in::encode_optimizer(*other, /*copy=*/false, ignored);
  const std::string archive_bytes = in::encoded_optimizer_archive(*again);
  torch::serialize::InputArchive archive;
  archive.load_from(archive_bytes.data(), archive_bytes.size());
  auto third = GetParam().make(from_archive_params);
  third->load(archive);
  steps(*other, copies, 1, 4);
  steps(*third, from_archive_params, 1, 4);
  expect_bit_identical(values(copies), values(from_archive_params));
}

INSTANTIATE_TEST_SUITE_P(
    BuiltIn, OptimizerStateTest,
    ::testing::Values(
        Case{"sgd",
             [](std::vector<torch::Tensor> p) {
               return std::make_unique<torch::optim::SGD>(
                   p, torch::optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
             }},
        Case{"adam",
             [](std::vector<torch::Tensor> p) {
               return std::make_unique<torch::optim::Adam>(
                   p, torch::optim::AdamOptions(0.01).amsgrad(true).betas({0.8, 0.99}));
             }},
        Case{"adamw",
             [](std::vector<torch::Tensor> p) {
               return std::make_unique<torch::optim::AdamW>(p, torch::optim::AdamWOptions(0.01));
             }},
        Case{"rmsprop",
             [](std::vector<torch::Tensor> p) {
               return std::make_unique<torch::optim::RMSprop>(
                   p, torch::optim::RMSpropOptions(0.01).momentum(0.5).centered(true));
             }},
        Case{"adagrad",
             [](std::vector<torch::Tensor> p) {
               return std::make_unique<torch::optim::Adagrad>(
                   p, torch::optim::AdagradOptions(0.1).initial_accumulator_value(0.5));
             }}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.type; });

TEST(OptimizerStateLayoutTest, IsLaidOutAsStateDictAndSharesOrCopiesTensors) {
  auto params = make_params(1);
  torch::optim::Adam opt(params, torch::optim::AdamOptions(0.01));
  steps(opt, params, 2, 2);
  size_t bytes = 0;
  auto shared = in::encode_optimizer(opt, /*copy=*/false, bytes);
  ASSERT_TRUE(shared.has_value());
  // Two moments of the two parameters that had gradients: (12 + 4) floats each, twice.
  EXPECT_EQ(bytes, 2u * (12 + 4) * 4);
  const auto tensors = in::encoded_optimizer_tensors(*shared);
  std::vector<std::string> names;
  for (const auto& [name, t] : tensors) names.push_back(name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"0/exp_avg", "0/exp_avg_sq", "1/exp_avg", "1/exp_avg_sq"}));
  const auto& live = static_cast<torch::optim::AdamParamState&>(
      *opt.state().at(c10::guts::to_string(params[0].unsafeGetTensorImpl())));
  EXPECT_TRUE(tensors[0].second.is_same(live.exp_avg()) ||
              tensors[0].second.data_ptr() == live.exp_avg().data_ptr());
  auto copied = in::encode_optimizer(opt, /*copy=*/true, bytes);
  EXPECT_NE(in::encoded_optimizer_tensors(*copied)[0].second.data_ptr(), live.exp_avg().data_ptr());

  const auto top = shared->toGenericDict();
  const auto group = top.at(std::string("param_groups")).toList().get(0).toGenericDict();
  EXPECT_EQ(group.at(std::string("params")).toIntVector(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(group.at(std::string("betas")).toDoubleVector(), (std::vector<double>{0.9, 0.999}));
  EXPECT_EQ(group.at(std::string("amsgrad")).toBool(), false);
  const auto state0 = top.at(std::string("state")).toGenericDict().at(int64_t{0}).toGenericDict();
  EXPECT_EQ(state0.at(std::string("step")).toInt(), 2);
}

TEST(OptimizerStateLayoutTest, OtherOptimizersHaveNoEncoding) {
  auto params = make_params(1);
  torch::optim::LBFGS opt(params, torch::optim::LBFGSOptions(0.1));
  size_t bytes = 0;
  EXPECT_FALSE(in::encode_optimizer(opt, false, bytes).has_value());
  EXPECT_EQ(bytes, 0u);
}

TEST(OptimizerStateLayoutTest, ChecksSayWhatDoesNotFit) {
  auto params = make_params(1);
  torch::optim::Adam adam(params, torch::optim::AdamOptions(0.01));
  steps(adam, params, 1, 2);
  size_t bytes = 0;
  const c10::IValue encoded = *in::encode_optimizer(adam, false, bytes);

  torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.1));
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [&] { in::check_encoded_optimizer(encoded, sgd); }),
            "the checkpoint holds the state of an optimizer of type 'adam'");

  auto fewer = make_params(1);
  fewer.pop_back();
  torch::optim::Adam two(fewer, torch::optim::AdamOptions(0.01));
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [&] { in::check_encoded_optimizer(encoded, two); }),
            "parameter group 0 has 3 parameter(s) in the checkpoint, 2 in the optimizer");

  std::vector<torch::Tensor> reshaped = {torch::zeros({4, 3}).requires_grad_(),
                                         torch::zeros({4}).requires_grad_(),
                                         torch::zeros({2}).requires_grad_()};
  torch::optim::Adam other_shape(reshaped, torch::optim::AdamOptions(0.01));
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [&] { in::check_encoded_optimizer(encoded, other_shape); }),
            "the state of parameter 0: 'exp_avg' has shape [3, 4] and dtype Float, the parameter "
            "shape [4, 3] and dtype Float");
  // Nothing changed: the check loads nothing.
  EXPECT_TRUE(other_shape.state().empty());

  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [&] { in::validate_encoded_optimizer(c10::IValue(int64_t{3})); }),
            "the optimizer state is not a dict");
}

}  // namespace optimizer_state_test
