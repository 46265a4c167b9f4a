// A training process for the distributed tests: TF's linear model y = W·x + b on 64 fixed
// examples, trained by MonitoredTrainingSession over a process group (distributed::init():
// torchrun's variables, or RANK / WORLD_SIZE and --file-store when a test starts the processes
// itself).
//
// Each rank reads its shard of a shuffled input in batches of B, averages the gradients across
// the ranks (--mode sync, the default) or averages the variables every K steps (--mode local K),
// and stops at global step L. After every step it prints, flushed,
//   step <global step> <W0> <W1> <W2> <b>          (the variables as C99 hex floats: exact)
// and at the end `final <rank> <step> <W0> <W1> <W2> <b>`. The chief saves checkpoints to DIR
// every S steps (and at the end). Exit status 0, or 1 with `error: <what>` on stderr.
//
//   distributed_trainer --last-step L --batch B [--dir DIR --save-steps S] [--file-store F]
//       [--mode sync|local] [--average-every K] [--check-every K]
//       [--die-at-step S]         rank 1 SIGKILLs itself there on the group's first start
//       [--stop-rank R --stop-at S]  rank R alone requests a stop at global step S
//       [--perturb-at S]          rank 1 changes b by 1e-3 there (the consistency check fails)
//       [--timeout SECS]
//       [--print-ids 1]           also print `ids <global step> <example ids of this rank's batch>`
//       [--print-ids 2]           print `ids <global step> <group> <rank> <world size> <ids>...`
//                                 instead, <group> a number that grows with each start of the
//                                 group (rank 0's clock at its start, in ns): of the lines of one
//                                 step, those of the greatest group are the ones that count
//       [--step-delay-ms MS]      sleep MS after each step (a test acts mid-run)
//       [--alone-delay-ms MS]     the same, when the group is of 1 rank (instead)
//       [--global-batch G]        InputOptions::global_batch_size G instead of --batch
#include <torch/torch.h>

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "trainhooks/distributed/average_gradients.h"
#include "trainhooks/distributed/model_average_hook.h"
#include "trainhooks/distributed/process_group.h"
#include "trainhooks/distributed/replica_consistency_hook.h"
#include "trainhooks/graph.h"
#include "trainhooks/hooks/stop_at_step_hook.h"
#include "trainhooks/input.h"
#include "trainhooks/optimizers.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;

namespace {

struct Args {
  std::string dir, file_store, mode = "sync";
  int64_t last_step = 10, batch = 8, save_steps = 0, average_every = 1, check_every = 0;
  int64_t die_at = -1, stop_rank = -1, stop_at = -1, perturb_at = -1, global_batch = 0;
  int print_ids = 0;
  int64_t step_delay_ms = 0, alone_delay_ms = 0;
  double timeout = 60;
};

std::string hex(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

std::string variables_line(th::Graph& g, th::Node w, th::Node b) {
  auto wv = g.variable_value(w).contiguous();
  std::string line;
  for (int64_t i = 0; i < wv.numel(); ++i) line += " " + hex(wv.data_ptr<float>()[i]);
  line += " " + hex(g.variable_value(b).item<float>());
  return line;
}

class StepHook : public th::SessionRunHook {
 public:
  StepHook(const Args& a, const th::distributed::ProcessGroup& pg, int64_t group, th::Node w,
           th::Node b, th::Node ids)
      : a_(a),
        rank_(pg.rank()),
        world_(pg.world_size()),
        restarts_(pg.restart_count()),
        group_(group),
        w_(w),
        b_(b),
        ids_(ids) {}
  th::SessionRunArgs before_run(th::SessionRunContext&) override {
    if (a_.print_ids) return {{ids_}};
    return {};
  }
  void after_run(th::SessionRunContext& ctx, const th::SessionRunValues& values) override {
    th::Graph& g = ctx.session().graph();
    const int64_t step = ctx.session().global_step();
    if (a_.print_ids) {
      const torch::Tensor ids = values.results[ids_].contiguous();
      std::string line = "ids " + std::to_string(step);
      if (a_.print_ids == 2) line += fmt::format(" {} {} {}", group_, rank_, world_);
      for (int64_t i = 0; i < ids.numel(); ++i)
        line += " " + std::to_string(ids.data_ptr<int64_t>()[i]);
      std::printf("%s\n", line.c_str());
    }
    if (rank_ == 1 && step == a_.perturb_at) {
      torch::NoGradGuard no_grad;
      g.variable_value(b_).add_(1e-3);
    }
    std::printf("step %lld%s\n", static_cast<long long>(step), variables_line(g, w_, b_).c_str());
    std::fflush(stdout);
    if (rank_ == 1 && restarts_ == 0 && step == a_.die_at) std::raise(SIGKILL);
    if (rank_ == a_.stop_rank && step == a_.stop_at) ctx.request_stop();
    const int64_t delay =
        world_ == 1 && a_.alone_delay_ms > 0 ? a_.alone_delay_ms : a_.step_delay_ms;
    if (delay > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  }

 private:
  Args a_;
  int rank_, world_, restarts_;
  int64_t group_;
  th::Node w_, b_, ids_;
};

int run(const Args& a) {
  th::distributed::InitOptions init{.file_store = a.file_store, .timeout_secs = a.timeout};
  auto pg = th::distributed::init(init);
  // A number that grows with each start of the group: rank 0's clock, the same on every rank.
  torch::Tensor group =
      torch::tensor({static_cast<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count())},
                    torch::kLong);
  if (a.print_ids == 2) pg->broadcast(group);

  // 64 fixed examples of y = x·[1, -2, 3] + 0.5.
  torch::Tensor xs = torch::sin(torch::arange(192, torch::kFloat)).reshape({64, 3});
  torch::Tensor ys = torch::matmul(xs, torch::tensor({{1.f}, {-2.f}, {3.f}})) + 0.5f;
  torch::Tensor ids = torch::arange(64, torch::kLong);

  th::Graph g;
  th::InputOptions input{.shuffle = true, .seed = 7, .num_epochs = 0};
  if (a.global_batch > 0)
    input.global_batch_size = a.global_batch;
  else
    input.batch_size = a.batch;
  auto batch = g.input("train", th::tensor_source({xs, ys, ids}, {"x", "y", "id"}), input);
  th::Node w = g.variable("w", torch::zeros({3, 1}));
  th::Node b = g.variable("b", torch::zeros({1}));
  th::Node loss = g.op("loss", [=](th::Run& r) {
    return torch::mse_loss(torch::matmul(r[batch[0]], r[w]) + r[b], r[batch[1]]);
  });
  g.global_step();
  th::MinimizeOptions minimize;
  if (a.mode == "sync") minimize.gradient_transforms = {th::distributed::average_gradients(pg)};
  th::Node train = g.minimize("train_op", loss, th::sgd(0.1), minimize);

  th::Hooks hooks{
      std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.last_step = a.last_step})};
  if (a.mode == "local")
    hooks.push_back(std::make_shared<th::distributed::ModelAverageHook>(pg, a.average_every));
  if (a.check_every > 0)
    hooks.push_back(std::make_shared<th::distributed::ReplicaConsistencyHook>(pg, a.check_every));
  hooks.push_back(std::make_shared<StepHook>(a, *pg, group.item<int64_t>(), w, b, batch[2]));

  th::MonitoredTrainingSessionOptions options{
      .checkpoint_dir = a.dir,
      .hooks = hooks,
      .summaries = {.log_step_count_steps = 0},
      .distributed = {.process_group = pg, .max_wait_secs = a.timeout}};
  if (!a.dir.empty()) {
    options.checkpoints.save_steps = a.save_steps;
    options.summaries.save_steps = 0;
  }
  th::MonitoredTrainingSession sess(g, options);
  while (!sess.should_stop()) sess.run(train);
  sess.close();
  std::printf("final %d %lld%s\n", pg->rank(), static_cast<long long>(g.global_step_value()),
              variables_line(g, w, b).c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--dir")
      a.dir = value;
    else if (flag == "--file-store")
      a.file_store = value;
    else if (flag == "--mode")
      a.mode = value;
    else if (flag == "--last-step")
      a.last_step = std::stoll(value);
    else if (flag == "--batch")
      a.batch = std::stoll(value);
    else if (flag == "--save-steps")
      a.save_steps = std::stoll(value);
    else if (flag == "--average-every")
      a.average_every = std::stoll(value);
    else if (flag == "--check-every")
      a.check_every = std::stoll(value);
    else if (flag == "--die-at-step")
      a.die_at = std::stoll(value);
    else if (flag == "--stop-rank")
      a.stop_rank = std::stoll(value);
    else if (flag == "--stop-at")
      a.stop_at = std::stoll(value);
    else if (flag == "--perturb-at")
      a.perturb_at = std::stoll(value);
    else if (flag == "--print-ids")
      a.print_ids = std::stoi(value);
    else if (flag == "--global-batch")
      a.global_batch = std::stoll(value);
    else if (flag == "--step-delay-ms")
      a.step_delay_ms = std::stoll(value);
    else if (flag == "--alone-delay-ms")
      a.alone_delay_ms = std::stoll(value);
    else if (flag == "--timeout")
      a.timeout = std::stod(value);
    else {
      std::cerr << "error: unknown flag " << flag << "\n";
      return 2;
    }
  }
  try {
    return run(a);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
