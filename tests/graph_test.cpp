#include "trainhooks/graph.h"

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "test_util.h"

#include "trainhooks/errors.h"
#include "trainhooks/optimizers.h"
#include "trainhooks/session.h"

namespace th = trainhooks;

namespace graph_test {

TEST(GraphTest, NodesAreIndexedAndFoundByName) {
  th::Graph g;
  auto x = g.placeholder("x");
  auto w = g.variable("w", torch::ones({2}));
  auto c = g.constant("c", torch::tensor({1.0f}));
  auto y = g.op("y", [=](th::Run& r) { return r[x] * r[w]; });
  EXPECT_EQ(x.index, 0);
  EXPECT_EQ(y.index, 3);
  EXPECT_EQ(g.find("w"), w);
  EXPECT_EQ(g.find("c"), c);
  EXPECT_EQ(g.name(y), "y");
  EXPECT_EQ(g.kind(x), th::NodeKind::kPlaceholder);
  EXPECT_EQ(g.kind(w), th::NodeKind::kVariable);
  EXPECT_EQ(g.kind(c), th::NodeKind::kConstant);
  EXPECT_EQ(g.kind(y), th::NodeKind::kOp);
  EXPECT_EQ(g.size(), 4u);
  EXPECT_FALSE(g.find_if_exists("nope").has_value());
}

TEST(GraphTest, UnknownNameIsNotFound) {
  th::Graph g;
  EXPECT_THROW(g.find("missing"), th::NotFoundError);
  EXPECT_EQ(th::testing::error_message([&] { g.find("missing"); }),
            "No node named 'missing' in the graph");
}

TEST(GraphTest, DuplicateNameIsRejected) {
  th::Graph g;
  g.variable("w", torch::zeros({1}));
  EXPECT_THROW(g.placeholder("w"), th::AlreadyExistsError);
  EXPECT_EQ(
      th::testing::error_message([&] { g.op("w", [](th::Run&) { return torch::zeros({1}); }); }),
      "Duplicate node name 'w': a variable with that name exists");
}

TEST(GraphTest, FinalizedGraphRejectsNewNodes) {
  th::Graph g;
  g.placeholder("x");
  g.finalize();
  EXPECT_TRUE(g.finalized());
  EXPECT_THROW(g.placeholder("y"), th::FailedPreconditionError);
  EXPECT_EQ(th::testing::error_message([&] { g.constant("k", torch::ones({1})); }),
            "Graph is finalized and cannot be modified (adding constant 'k')");
}

TEST(GraphTest, InvalidArgumentsNameTheArgument) {
  th::Graph g;
  EXPECT_EQ(th::testing::error_message([&] { g.placeholder("x", {.shape = {-2}}); }),
            "placeholder 'x': invalid dimension -2 in shape (use -1 for any size)");
  EXPECT_EQ(th::testing::error_message([&] { g.variable("v", torch::zeros({1}, torch::kLong)); }),
            "variable 'v': a trainable variable must have a floating-point dtype, got Long");
  EXPECT_EQ(th::testing::error_message([&] { g.op("o", nullptr); }), "op 'o': fn is empty");
  EXPECT_EQ(th::testing::error_message([&] { g.variable("", torch::zeros({1})); }),
            "variable name must not be empty");
  EXPECT_EQ(th::testing::error_message([&] { th::sgd(-0.1); }), "sgd: Invalid learning rate: -0.1");
}

TEST(GraphTest, NonTrainableIntegerVariableIsAllowed) {
  th::Graph g;
  auto v = g.variable("count", torch::zeros({1}, torch::kLong), {.trainable = false});
  EXPECT_FALSE(g.is_trainable(v));
  EXPECT_TRUE(g.trainable_variables().empty());
}

TEST(GraphTest, VariableCopiesItsInitialValue) {
  th::Graph g;
  auto init = torch::ones({2});
  auto w = g.variable("w", init);
  init.fill_(5);
  EXPECT_TRUE(torch::equal(g.variable_value(w).detach(), torch::ones({2})));
  EXPECT_TRUE(g.variable_value(w).requires_grad());
}

TEST(GraphTest, AddModuleMakesEveryParameterAndBufferAVariableSharingStorage) {
  th::Graph g;
  torch::nn::Sequential net(torch::nn::Linear(3, 2), torch::nn::BatchNorm1d(2));
  auto vars = g.add_module("net", net);
  std::vector<std::string> names;
  for (auto v : vars) names.push_back(g.name(v));
  EXPECT_EQ(names, (std::vector<std::string>{"net/0.weight", "net/0.bias", "net/1.weight",
                                             "net/1.bias", "net/1.running_mean",
                                             "net/1.running_var", "net/1.num_batches_tracked"}));
  EXPECT_TRUE(g.is_trainable(g.find("net/0.weight")));
  EXPECT_FALSE(g.is_trainable(g.find("net/1.running_mean")));
  // The variable is the module's tensor: changing one changes the other.
  auto& w = g.variable_value(g.find("net/0.bias"));
  {
    torch::NoGradGuard no_grad;
    w.fill_(7);
  }
  EXPECT_TRUE(torch::equal(net[0]->named_parameters()["bias"].detach(), torch::full({2}, 7.0f)));
}

TEST(GraphTest, AddModuleNameClashAddsNothing) {
  th::Graph g;
  g.variable("net/weight", torch::zeros({1}));
  size_t before = g.size();
  EXPECT_THROW(g.add_module("net", torch::nn::Linear(2, 2)), th::AlreadyExistsError);
  EXPECT_EQ(g.size(), before);
}

TEST(GraphTest, GlobalStepIsGetOrCreateAndNotTrainable) {
  th::Graph g;
  EXPECT_FALSE(g.has_global_step());
  auto gs = g.global_step();
  EXPECT_EQ(g.global_step(), gs);
  EXPECT_EQ(g.name(gs), "global_step");
  EXPECT_EQ(g.kind(gs), th::NodeKind::kGlobalStep);
  EXPECT_TRUE(g.variables().empty());
  th::Session s(g);
  g.set_global_step_value(42);
  auto v = s.run(gs)[gs];
  EXPECT_EQ(v.scalar_type(), torch::kLong);
  EXPECT_EQ(v.dim(), 0);
  EXPECT_EQ(v.item<int64_t>(), 42);
}

TEST(GraphTest, MinimizeStepsTheOptimizerAndIncrementsGlobalStep) {
  th::Graph g;
  auto w = g.variable("w", torch::tensor({2.0f}));
  auto loss = g.op("loss", [=](th::Run& r) { return r[w].square().sum(); });
  auto train = g.minimize("train", loss, th::sgd(0.25));
  EXPECT_TRUE(g.has_global_step());
  th::Session s(g);
  auto r = s.run({train, loss});
  // loss = w^2 = 4 before the step; grad 2w = 4; w <- 2 - 0.25 * 4 = 1.
  EXPECT_FLOAT_EQ(r[loss].item<float>(), 4.0f);
  EXPECT_FALSE(r[train].defined());
  EXPECT_FLOAT_EQ(g.variable_value(w).item<float>(), 1.0f);
  EXPECT_EQ(g.global_step_value(), 1);
  s.run(train);
  EXPECT_FLOAT_EQ(g.variable_value(w).item<float>(), 0.5f);
  EXPECT_EQ(g.global_step_value(), 2);
}

TEST(GraphTest, MinimizeClipsTheGlobalNorm) {
  th::Graph g;
  auto w = g.variable("w", torch::tensor({3.0f, 4.0f}));
  // grad = w = (3, 4), norm 5; clipped to norm 1: (0.6, 0.8).
  auto loss = g.op("loss", [=](th::Run& r) { return 0.5 * r[w].square().sum(); });
  auto train = g.minimize("train", loss, th::sgd(1.0), {.clip_global_norm = 1.0});
  th::Session s(g);
  s.run(train);
  auto v = g.variable_value(w).detach();
  EXPECT_NEAR(v[0].item<float>(), 2.4f, 1e-5);
  EXPECT_NEAR(v[1].item<float>(), 3.2f, 1e-5);
}

TEST(GraphTest, MinimizeTrainsOnlyItsVarList) {
  th::Graph g;
  auto a = g.variable("a", torch::tensor({1.0f}));
  auto b = g.variable("b", torch::tensor({1.0f}));
  auto loss = g.op("loss", [=](th::Run& r) { return (r[a] * r[b]).sum(); });
  auto train = g.minimize("train", loss, th::sgd(0.5), {.var_list = {a}});
  th::Session s(g);
  s.run(train);
  EXPECT_FLOAT_EQ(g.variable_value(a).item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(g.variable_value(b).item<float>(), 1.0f);
}

TEST(GraphTest, MinimizeRejectsBadArguments) {
  th::Graph g;
  auto loss = g.op("loss", [](th::Run&) { return torch::zeros({}); });
  EXPECT_EQ(th::testing::error_message([&] { g.minimize("t", loss, th::sgd(0.1)); }),
            "minimize 't': there are no trainable variables to optimize");
  auto w = g.variable("w", torch::zeros({1}));
  EXPECT_EQ(th::testing::error_message(
                [&] { g.minimize("t", loss, th::sgd(0.1), {.clip_global_norm = 0.0}); }),
            "minimize 't': invalid clip_global_norm 0");
  EXPECT_EQ(th::testing::error_message([&] { g.minimize("t", "nope", th::sgd(0.1)); }),
            "No node named 'nope' in the graph");
  EXPECT_EQ(th::testing::error_message(
                [&] { g.minimize("t", loss, th::sgd(0.1), {.var_list = {loss}}); }),
            "minimize 't': var_list entry loss is not a variable");
  (void)w;
}

TEST(GraphTest, TrainOpWithoutGradientPathIsAClearError) {
  th::Graph g;
  auto w = g.variable("w", torch::zeros({1}));
  auto loss = g.op("loss", [](th::Run&) { return torch::zeros({}); });
  auto train = g.minimize("train", loss, th::sgd(0.1));
  th::Session s(g);
  EXPECT_THROW(s.run(train), th::FailedPreconditionError);
  (void)w;
}

TEST(GraphTest, InitializeRestoresInitialStateAndFreshOptimizer) {
  th::Graph g;
  auto w = g.variable("w", torch::tensor({1.0f}));
  auto loss = g.op("loss", [=](th::Run& r) { return r[w].sum(); });
  auto train = g.minimize("train", loss, th::sgd(0.1, {.momentum = 0.9}));
  th::Session s(g);
  s.run(train);
  s.run(train);
  EXPECT_EQ(g.global_step_value(), 2);
  g.initialize();
  EXPECT_EQ(g.global_step_value(), 0);
  EXPECT_FLOAT_EQ(g.variable_value(w).item<float>(), 1.0f);
  s.run(train);  // no momentum carried over: a plain first step of 0.1
  EXPECT_FLOAT_EQ(g.variable_value(w).item<float>(), 0.9f);
}

TEST(GraphTest, LearningRateCanBeReadAndChanged) {
  th::Graph g;
  auto w = g.variable("w", torch::tensor({1.0f}));
  auto loss = g.op("loss", [=](th::Run& r) { return r[w].sum(); });
  auto train = g.minimize("train", loss, th::adam(0.01));
  EXPECT_DOUBLE_EQ(th::learning_rate(g.optimizer(train)), 0.01);
  th::set_learning_rate(g.optimizer(train), 0.5);
  EXPECT_DOUBLE_EQ(th::learning_rate(g.optimizer(train)), 0.5);
  EXPECT_THROW(g.optimizer(w), th::InvalidArgument);
}

TEST(GraphTest, MakeOptimizerGivesAFreshOptimizerOfTheTrainOpsKind) {
  th::Graph g;
  torch::nn::Linear net(2, 1);
  auto vars = g.add_module("net", net);
  auto loss = g.op("loss", [n = net.ptr()](th::Run&) {
    return n->forward(torch::ones({3, 2})).sum();
  });
  auto train = g.minimize("train", loss, th::sgd(0.1, {.momentum = 0.9}), {.var_list = {vars[0]}});
  th::Session(g).run(train);
  EXPECT_EQ(g.optimizer_name(train), "sgd");
  auto fresh = g.make_optimizer(train);
  ASSERT_NE(dynamic_cast<torch::optim::SGD*>(fresh.get()), nullptr);
  EXPECT_TRUE(fresh->state().empty());
  EXPECT_EQ(g.optimizer(train).state().size(), 1u);  // the live one keeps its momentum
  ASSERT_EQ(fresh->parameters().size(), 1u);
  EXPECT_TRUE(fresh->parameters()[0].is_same(g.variable_value(vars[0])));
  EXPECT_THROW(g.make_optimizer(vars[0]), th::InvalidArgument);
  EXPECT_THROW(g.optimizer_name(loss), th::InvalidArgument);
}

}  // namespace graph_test

namespace graph_test {

struct Counter : th::StateProvider {
  int value = 0;
  std::string save_state() const override { return std::to_string(value); }
  void load_state(std::string_view bytes) override { value = std::stoi(std::string(bytes)); }
};

TEST(GraphTest, StateProvidersAreRegisteredByUniqueKey) {
  th::Graph g;
  Counter a, b;
  g.register_state("hooks/a", &a);
  g.register_state("hooks/b", &b);
  EXPECT_THROW(g.register_state("hooks/a", &b), th::AlreadyExistsError);
  EXPECT_THROW(g.register_state("", &b), th::InvalidArgument);
  auto providers = g.state_providers();
  ASSERT_EQ(providers.size(), 2u);
  EXPECT_EQ(providers[0].first, "hooks/a");
  EXPECT_EQ(providers[0].second, &a);
  g.unregister_state("hooks/a");
  EXPECT_EQ(g.state_providers().size(), 1u);
}

TEST(GraphTest, StateRegistrationEndsWithItsObject) {
  th::Graph g;
  Counter a;
  auto keys = [&] {
    std::vector<std::string> out;
    for (const auto& [key, provider] : g.state_providers()) out.push_back(key);
    return out;
  };
  {
    th::StateRegistration reg(g, "hooks/a", &a);
    EXPECT_EQ(keys(), std::vector<std::string>{"hooks/a"});
    EXPECT_THROW(th::StateRegistration(g, "hooks/a", &a), th::AlreadyExistsError);
    th::StateRegistration moved = std::move(reg);
    reg.reset();  // moved from: owns nothing, so this unregisters nothing
    EXPECT_EQ(keys(), std::vector<std::string>{"hooks/a"});
    moved = th::StateRegistration(g, "hooks/b", &a);  // ends "hooks/a"
    EXPECT_EQ(keys(), std::vector<std::string>{"hooks/b"});
  }
  EXPECT_TRUE(keys().empty());
  th::StateRegistration again(g, "hooks/a", &a);
  again.reset();
  EXPECT_TRUE(keys().empty());
}

struct Collection {
  std::vector<int> items;
};

TEST(GraphTest, ExtensionsAreOnePerGraphAndType) {
  th::Graph g1, g2;
  g1.extension<Collection>().items.push_back(1);
  g1.extension<Collection>().items.push_back(2);
  EXPECT_EQ(g1.extension<Collection>().items.size(), 2u);
  EXPECT_TRUE(g2.extension<Collection>().items.empty());
}

}  // namespace graph_test
