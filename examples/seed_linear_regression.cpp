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
//                          [--save_steps N] [--preempted_exit_code N]
//
// Exit status: 0 when the steps are done; 1 on an error, said in one line
// (`seed_linear_regression: <what>`, naming the file and the cause); 2 for a usage error; after
// SIGTERM or SIGINT (the session stops after the current step and saves), 128 + the signal
// (143, 130) or --preempted_exit_code.
#include <torch/torch.h>

#include <trainhooks/trainhooks.h>
#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

namespace th = trainhooks;

namespace {

struct MyHook : th::SessionRunHook {
  th::Node loss;
  std::string model_path;
  std::vector<float> loss_values;
  std::unique_ptr<th::compat::v1::Saver> saver;  // tf.compat.v1.train.Saver

  MyHook(th::Node l, std::string path) : loss(l), model_path(std::move(path)) {}

  void begin() override { saver = std::make_unique<th::compat::v1::Saver>(graph()); }

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

struct Flags {
  int64_t steps = 100;
  std::string model_path = "model.pt";
  std::string logdir;
  std::string checkpoint_dir;
  int64_t save_steps = 50;
  std::optional<int> preempted_exit_code;  // default: 128 + the signal
};

int train(const Flags& f) {
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

  auto hook = std::make_shared<MyHook>(loss, f.model_path);
  th::MonitoredTrainingSessionOptions options{.hooks = {hook},
                                              .summaries = {.log_step_count_steps = 10}};
  if (!f.logdir.empty()) {
    options.summaries.save_steps = 10;
    options.summary_dir = f.logdir;
  }
  if (!f.checkpoint_dir.empty()) {
    options.checkpoint_dir = f.checkpoint_dir;  // restores the newest checkpoint found there
    options.checkpoints.save_steps = f.save_steps;
  }
  th::MonitoredTrainingSession sess(g, options);
  std::cout << "Starting at global step " << g.global_step_value() << "\n";
  for (int64_t i = 0; i < f.steps && !sess.should_stop(); ++i) {
    sess.run(train_op, {{x, xs}, {y, ys}});
  }
  // The hooks' end(): the final checkpoint and MyHook's model. Closed explicitly, so that a
  // failure (a full disk) is an error of the program, not a line in the destructor's log.
  try {
    sess.close();
  } catch (const std::exception& e) {
    std::string error = e.what();
    if (const std::string lost = sess.unsaved_steps(); !lost.empty()) {
      if (error.ends_with('.')) error.pop_back();
      error += "; " + lost;
    }
    std::cerr << "seed_linear_regression: " << error << "\n";
    return 1;
  }

  std::cout << "W = " << g.variable_value(W).item<float>()
            << ", b = " << g.variable_value(b).item<float>()
            << ", global_step = " << g.global_step_value() << "\n";
  if (const int sig = sess.stopped_by_signal()) {
    std::cout << "Stopped by " << th::signal_name(sig) << " at step " << g.global_step_value();
    if (!f.checkpoint_dir.empty()) {
      std::cout << "; the checkpoint is in " << f.checkpoint_dir
                << ". Run the same command again to continue";
    }
    std::cout << ".\n";
    return f.preempted_exit_code.value_or(th::exit_status_for_signal(sig));
  }
  return 0;
}

// CLI11 takes the argument after a flag as its value even when it is the next flag: a value left
// out (`--steps --model x`) is said as such.
std::string flag_as_value(const std::string& value) {
  if (value.size() > 2 && value.starts_with("--"))
    return "value missing (the next argument is the flag '" + value + "')";
  return {};
}

const CLI::Validator kNotAFlag(flag_as_value, "");

// A whole-string integer of at least `min` (CLI11's own conversion accepts "5abc" as 5 in places
// and its range messages print the type's limits).
CLI::Validator integer_at_least(int64_t min) {
  return CLI::Validator(
      [min](std::string& value) -> std::string {
        if (std::string e = flag_as_value(value); !e.empty()) return e;
        int64_t n = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (ec == std::errc() && end == value.data() + value.size() && n >= min) return {};
        return min == 1 ? "must be a positive integer, got '" + value + "'"
                        : "must be an integer of at least " + std::to_string(min) + ", got '" +
                              value + "'";
      },
      min == 1 ? "POSITIVE" : "INT>=" + std::to_string(min));
}

}  // namespace

int main(int argc, char** argv) {
  // Each line as it is printed, also into a pipe or a log file, so that the `Loss value:` lines
  // come out in order with the log lines (stderr, unbuffered).
  std::setvbuf(stdout, nullptr, _IOLBF, BUFSIZ);
  Flags f;
  CLI::App app{
      "Trains y = W*x + b inside MonitoredTrainingSession with a hook that prints the "
      "loss and saves the model.\nExit status: 0 done, 1 error, 2 usage error, 128 + the "
      "signal (130, 143) when stopped by SIGINT or SIGTERM."};
  app.add_option("--steps", f.steps, "Training steps of this run")
      ->check(integer_at_least(1))
      ->capture_default_str();
  app.add_option("--model", f.model_path, "Where MyHook saves the model at the end")
      ->check(kNotAFlag)
      ->capture_default_str();
  app.add_option("--logdir", f.logdir, "TensorBoard summaries every 10 steps (none if not given)")
      ->check(kNotAFlag);
  app.add_option("--checkpoint_dir", f.checkpoint_dir,
                 "Checkpoints: restored at the start, saved every --save_steps and at the end")
      ->check(kNotAFlag);
  app.add_option("--save_steps", f.save_steps, "Save a checkpoint every N steps")
      ->check(integer_at_least(1))
      ->capture_default_str();
  app.add_option("--preempted_exit_code", f.preempted_exit_code,
                 "Exit status after SIGTERM or SIGINT (default: 128 + the signal)")
      ->check(kNotAFlag)
      ->check(CLI::Range(0, 255));
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "seed_linear_regression: " << e.what() << " (see --help)\n";
    return 2;
  }
  try {
    return train(f);
  } catch (const std::exception& e) {
    std::cerr << "seed_linear_regression: " << e.what() << "\n";
    return 1;
  }
}
