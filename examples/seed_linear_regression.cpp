// The canonical hooks program: a linear model y = W·x + b trained by gradient descent inside
// MonitoredTrainingSession(hooks = {MyHook}), where MyHook fetches the loss every step, records
// and prints it, and saves the model with a Saver in end().
//
// With --logdir it also writes TensorBoard summaries there: the loss and W every 10 steps, and
// the chief's global_step/sec. With --checkpoint_dir the session saves checkpoints there every
// --save_steps steps and at the end, and a later run with the same directory resumes from the
// newest one: it trains N more steps from the global step where the previous run stopped.
//
//   seed_linear_regression [--steps N] [--model PATH] [--logdir DIR] [--checkpoint_dir DIR]
//                          [--save_steps N]
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
  std::unique_ptr<th::Saver> saver;

  MyHook(th::Node l, std::string path) : loss(l), model_path(std::move(path)) {}

  void begin() override { saver = std::make_unique<th::Saver>(graph()); }

  th::SessionRunArgs before_run(th::SessionRunContext&) override { return {{loss}}; }

  void after_run(th::SessionRunContext&, const th::SessionRunValues& v) override {
    loss_values.push_back(v.results[loss].item<float>());
    std::cout << "Loss value: " << loss_values.back() << "\n";
  }

  void end(th::Session& s) override {
    // model_path: the variables, which Python reads with torch.load; model_path.trainstate: the
    // rest of the training state.
    saver->save(s, model_path);
    std::cout << "Saved the model to " << model_path << "\n";
  }
};

int main(int argc, char** argv) {
  int steps = 100;
  std::string model_path = "model.pt";
  std::string logdir;
  std::string checkpoint_dir;
  int save_steps = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--steps") steps = std::atoi(argv[i + 1]);
    else if (flag == "--model") model_path = argv[i + 1];
    else if (flag == "--logdir") logdir = argv[i + 1];
    else if (flag == "--checkpoint_dir") checkpoint_dir = argv[i + 1];
    else if (flag == "--save_steps") save_steps = std::atoi(argv[i + 1]);
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
    if (!checkpoint_dir.empty()) {
      options.checkpoint_dir = checkpoint_dir;  // restores the newest checkpoint found there
      options.save_checkpoint_steps = save_steps;
    }
    th::MonitoredTrainingSession sess(g, options);
    std::cout << "Starting at global step " << g.global_step_value() << "\n";
    for (int i = 0; i < steps && !sess.should_stop(); ++i) sess.run(train_op, {{x, xs}, {y, ys}});
  }  // leaving scope closes the session: hooks' end() runs on a clean exit only

  std::cout << "W = " << g.variable_value(W).item<float>() << ", b = " << g.variable_value(b).item<float>()
            << ", global_step = " << g.global_step_value() << "\n";
  return 0;
}
