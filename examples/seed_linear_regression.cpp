// The canonical hooks program: a linear model y = W·x + b trained by gradient descent inside
// MonitoredTrainingSession(hooks = {MyHook}), where MyHook fetches the loss every step, records
// and prints it, and saves the model in end().
//
// With --logdir it also writes TensorBoard summaries there: the loss and W every 10 steps, and
// the chief's global_step/sec.
//
//   seed_linear_regression [--steps N] [--model PATH] [--logdir DIR]
#include <torch/torch.h>

#include <trainhooks/trainhooks.h>

#include <cstdlib>
#include <iostream>
#include <string>

namespace th = trainhooks;

struct MyHook : th::SessionRunHook {
  th::Node loss;
  std::string model_path;
  std::vector<float> loss_values;
  int end_calls = 0;

  MyHook(th::Node l, std::string path) : loss(l), model_path(std::move(path)) {}

  th::SessionRunArgs before_run(th::SessionRunContext&) override { return {{loss}}; }

  void after_run(th::SessionRunContext&, const th::SessionRunValues& v) override {
    loss_values.push_back(v.results[loss].item<float>());
    std::cout << "Loss value: " << loss_values.back() << "\n";
  }

  void end(th::Session& s) override {
    ++end_calls;
    th::save_variables(s.graph(), model_path);
    std::cout << "Saved the model to " << model_path << "\n";
  }
};

int main(int argc, char** argv) {
  int steps = 100;
  std::string model_path = "model.pt";
  std::string logdir;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--steps") steps = std::atoi(argv[i + 1]);
    else if (flag == "--model") model_path = argv[i + 1];
    else if (flag == "--logdir") logdir = argv[i + 1];
    else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }

  // Synthetic data: y = 3x + 1 + noise.
  torch::manual_seed(0);
  auto xs = torch::randn({100});
  auto ys = 3 * xs + 1 + 0.1 * torch::randn({100});

  th::Graph g;
  auto x = g.placeholder("x", {.dtype = torch::kFloat, .shape = {-1}});
  auto y = g.placeholder("y", {.dtype = torch::kFloat, .shape = {-1}});
  auto W = g.variable("W", torch::zeros({1}));
  auto b = g.variable("b", torch::zeros({1}));
  auto y_pred = g.op("y_pred", [=](th::Run& r) { return r[x] * r[W] + r[b]; });
  auto loss = g.op("loss", [=](th::Run& r) { return (r[y_pred] - r[y]).square().mean(); });
  auto train_op = g.minimize("train", loss, th::sgd(0.1));  // also increments global_step
  th::summary::scalar(g, "loss", loss);
  th::summary::scalar(g, "W", W);
  th::summary::scalar(g, "b", b);

  auto hook = std::make_shared<MyHook>(loss, model_path);
  {
    th::MonitoredTrainingSessionOptions options{.hooks = {hook}, .log_step_count_steps = 10};
    if (!logdir.empty()) {
      options.save_summaries_steps = 10;
      options.summary_dir = logdir;
    }
    th::MonitoredTrainingSession sess(g, options);
    for (int i = 0; i < steps && !sess.should_stop(); ++i) sess.run(train_op, {{x, xs}, {y, ys}});
  }  // leaving scope closes the session: hooks' end() runs on a clean exit only

  std::cout << "W = " << g.variable_value(W).item<float>() << ", b = " << g.variable_value(b).item<float>()
            << ", global_step = " << g.global_step_value() << "\n";
  return 0;
}
