// The main job: a small CNN trained on Fashion-MNIST inside MonitoredTrainingSession, with the
// hooks a real run needs.
//
//   - data: Debian's dataset-fashion-mnist IDX files (th::fashion_mnist_source), shuffled per
//     epoch; the test split evaluated by an EvaluationHook every --eval-every steps and at the end
//   - model: conv 1->32 3x3, ReLU, 2x2 max-pool; conv 32->64 3x3, ReLU, 2x2 max-pool; linear
//     1600->10 (a torch::nn::Module added to the graph)
//   - optimizer: Adam (or SGD with momentum), learning rate warmed up linearly for
//     --warmup-steps (default: 200, or a tenth of a shorter run) and then decayed by a cosine to 0
//     at the last step
//   - checkpoints in --logdir every 60 s and at the end; Ctrl-C (or SIGTERM) stops after the
//     current step and saves, and running the same command again continues the same schedule
//   - TensorBoard summaries in --logdir (loss, train accuracy, learning_rate, weight histograms,
//     a grid of the batch's images) and --logdir/eval (test accuracy and loss)
//   - a progress bar on a terminal, plain progress lines every 30 s otherwise
//   - --precision bf16-mixed: the forward passes under LibTorch's CPU autocast in bfloat16, the
//     weights, gradients and optimizer state in float32 (default fp32: all float32)
//   - --accumulate-steps K: each step adds up the gradients of K batches before the optimizer
//     step (one step on a batch K times as large, in the memory of one); steps count optimizer
//     steps
//   - --ema DECAY: an exponential moving average of the weights (decay warmed up as TF's
//     num_updates), updated after every step, saved in the checkpoints, and evaluated in place of
//     the trained weights
//   - --num-workers N: N threads make the training batches ahead (gather, normalise, the random
//     flips), --prefetch P of them at most (default 2 x N); the same batches as without, bit for
//     bit, so neither is part of the plan
//   - --distributed: data-parallel over the processes torchrun starts (docs/distributed.md), each
//     on its shard of the training split with a batch of --batch-size, the gradients averaged;
//     rank 0 plans, evaluates, writes checkpoints and summaries. --global-batch-size G instead
//     keeps the batch of all ranks together at G (G / ranks each) when torchrun --nnodes 1:2
//     restarts the run on another number of ranks
//
// The budget is --minutes (default 3) or --steps. Minutes are turned into a number of steps by
// timing a few steps of the model on this machine before training, so that the schedule can end
// exactly at the last step; the plan is kept in <logdir>/plan.json and a resumed run follows it.
// Unless --threads is given, a minutes budget planned while other work keeps the CPUs busy
// trains on the CPUs that are left (LibTorch's threads would wait for each other at every
// operation); the plan records the thread count, so that a resumed run sums in the same order.
// When the steps turn out slower than timed (a machine that gets busier), a TimeBudgetHook
// re-plans while training: it moves the last step, and the schedule's end with it, to what still
// fits in the budget, and the new plan goes into plan.json, so that the run ends on time with its
// learning rate decayed and a resumed run continues the same schedule. (Not with --distributed,
// where the ranks would have to agree: there, and as a backstop for a step that hangs, the
// TimeLimitHook below holds the budget.) A TimeLimitHook stops the run at --time-limit minutes
// (default 1.25 x --minutes; none with --steps unless given) with its checkpoint; the same command
// continues it.
//
//   fashion_mnist [--minutes 3 | --steps N] [--data-dir DIR] [--logdir DIR]
//                 [--batch-size 64 | --global-batch-size G]
//                 [--lr 0.002] [--optimizer adam|sgd] [--warmup-steps 200] [--eval-every N]
//                 [--accumulate-steps K]
//                 [--ema DECAY] [--precision fp32|bf16-mixed] [--preempted-exit-code N]
//                 [--time-limit-exit-code N] [--num-workers N] [--prefetch P]
//                 [--distributed] ...
//   torchrun --no_python --redirects 2 --tee 2 --nnodes=1 --nproc_per_node=2
//            fashion_mnist --distributed --steps 2000     (one command line)
//
// Exit status: 0 when the run is complete; 1 on an error, said in one line
// (`fashion_mnist: <what>`, naming the file and the cause); 2 for a usage error; after SIGTERM
// or SIGINT (stopped after the current step, checkpoint saved), 128 + the signal (143, 130) or
// --preempted-exit-code; 75 (EX_TEMPFAIL: run again to continue) or --time-limit-exit-code when
// the time limit stopped the run before its last step (checkpoint saved).
//
// --step-delay-ms N (not in --help) adds N ms to every training step: a machine slower than the
// one that was timed, for trying and testing the re-planning.
#include <fcntl.h>
#include <torch/torch.h>
#include <unistd.h>

#include <fmt/format.h>
#include <trainhooks/trainhooks.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "fashion_mnist_model.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace th = trainhooks;
namespace fs = std::filesystem;

namespace {

struct Flags {
  std::string data_dir = th::kFashionMnistDefaultDir;
  std::string logdir = "fashion_mnist_logs";
  double minutes = 3;
  int64_t steps = 0;
  double time_limit = -1;  // minutes; < 0: 1.25 x --minutes for a minutes budget, none for --steps
  int time_limit_exit_code = 75;
  int step_delay_ms = 0;
  int64_t batch_size = 64;
  int64_t global_batch_size = 0;  // > 0: the batch of all ranks together, instead of batch_size
  int64_t accumulate_steps = 1;   // micro-batches per optimizer step
  double lr = 2e-3;
  std::string optimizer = "adam";
  std::optional<int64_t> warmup_steps;  // default: 200, or a tenth of a shorter run
  int64_t eval_every = 1000;
  int64_t summary_steps = 100;
  int64_t save_steps = 0;  // 0: every 60 seconds
  int threads = 0;
  uint64_t seed = 0;
  bool progress = true;
  std::string regularize = "auto";
  double ema = 0;  // > 0: the decay of a moving average of the weights, evaluated
  std::string precision = "fp32";
  std::optional<int> preempted_exit_code;  // default: 128 + the signal
  bool distributed = false;
  int num_workers = 0;  // threads that make the training batches ahead
  int prefetch = 0;     // 0: 2 x num_workers
};

using fashion_mnist::Net;

// A re-planning while training (TimeBudgetHook): from at_step on, the run ends at last_step.
struct Replanned {
  int64_t at_step = 0;
  int64_t last_step = 0;
};

// The plan of a run: how many steps the schedule spans, its warm-up, whether the model is
// regularised, and how it was re-planned while training. Written at the start and at each
// re-planning, read by resumed runs so that they continue the same schedule whatever the budget
// flags say.
struct Plan {
  int64_t total_steps = 0;        // as first planned
  int64_t batch_size = 0;         // per rank, with --batch-size
  int64_t global_batch_size = 0;  // all ranks together, with --global-batch-size (0: not used)
  int64_t accumulate_steps = 1;   // micro-batches of the batch per step
  bool regularize = false;
  double ema = 0;             // the --ema decay it was planned with; 0: none
  int64_t warmup_steps = -1;  // < 0: not recorded (a plan of an earlier version): the flag's
  double budget_minutes = 0;  // the --minutes budget it was planned for; 0: --steps
  double eval_seconds = 0;    // one evaluation pass, as timed when planning
  int threads = 0;            // intra-op threads it trains with; 0: not recorded (the default)
  std::vector<Replanned> replans;

  int64_t last_step() const { return replans.empty() ? total_steps : replans.back().last_step; }
};

constexpr int64_t kDefaultWarmupSteps = 200;

// The warm-up of a new plan: the flag's, else 200 steps or a tenth of a shorter run.
int64_t warmup_for(const std::optional<int64_t>& flag, int64_t total_steps) {
  return flag ? *flag : std::min(kDefaultWarmupSteps, total_steps / 10);
}

// The learning rate of every step of `plan`: warm-up and cosine to 0 at the planned end, each
// re-planning compressing what was left into the steps that fit (th::rescaled), so that a
// resumed run rebuilds the very same rates.
th::LearningRateSchedule plan_schedule(const Plan& plan, double lr) {
  auto schedule = th::linear_warmup(plan.warmup_steps,
                                    th::cosine_decay(lr, plan.total_steps - plan.warmup_steps));
  int64_t end = plan.total_steps;
  for (const auto& r : plan.replans) {
    schedule = th::rescaled(schedule, r.at_step, end, r.last_step);
    end = r.last_step;
  }
  return schedule;
}

// Regularisation (batch norm after the convolutions, dropout 0.25 before the last layer, random
// left-right flips) costs accuracy in a short run, which underfits, and wins it back in a long
// one, which would overfit. Measured here (test accuracy at the end of a budget):
//                                         3 min (8 epochs)   10 min (25-30 epochs)
//   none                                  91.5 %             ~91 %, test loss rising from epoch 9
//   dropout 0.4 + flips                   90.7 %             91.6 %
//   batch norm + dropout 0.25 + flips     90.7 %             92.1 %, 91.9 %
//   the same, evaluated with mirrors                         92.2 %
// (with the flips drawn in the forward pass from LibTorch's generator; they are now drawn per
// batch by the input's transform: the same distribution, other draws). "auto" regularises runs
// of more than 10 epochs.
constexpr double kRegularizeAfterEpochs = 10;
constexpr double kDropout = 0.25;

fashion_mnist::NetOptions net_options(bool regularize) {
  return {.dropout = regularize ? kDropout : 0.0, .batch_norm = regularize};
}

nlohmann::json plan_json(const Plan& plan) {
  nlohmann::json replans = nlohmann::json::array();
  for (const auto& r : plan.replans)
    replans.push_back({{"at_step", r.at_step}, {"last_step", r.last_step}});
  return {{"total_steps", plan.total_steps},
          {"batch_size", plan.batch_size},
          {"global_batch_size", plan.global_batch_size},
          {"accumulate_steps", plan.accumulate_steps},
          {"regularize", plan.regularize},
          {"ema", plan.ema},
          {"warmup_steps", plan.warmup_steps},
          {"budget_minutes", plan.budget_minutes},
          {"eval_seconds", plan.eval_seconds},
          {"threads", plan.threads},
          {"replans", replans}};
}

Plan plan_from_json(const nlohmann::json& j) {
  Plan plan{.total_steps = j.at("total_steps").get<int64_t>(),
            .batch_size = j.at("batch_size").get<int64_t>(),
            .global_batch_size = j.value("global_batch_size", int64_t{0}),
            .accumulate_steps = j.value("accumulate_steps", int64_t{1}),
            .regularize = j.value("regularize", false),
            .ema = j.value("ema", 0.0),
            .warmup_steps = j.value("warmup_steps", int64_t{-1}),
            .budget_minutes = j.value("budget_minutes", 0.0),
            .eval_seconds = j.value("eval_seconds", 0.0),
            .threads = j.value("threads", 0)};
  if (j.contains("replans")) {
    for (const auto& r : j.at("replans"))
      plan.replans.push_back({r.at("at_step").get<int64_t>(), r.at("last_step").get<int64_t>()});
  }
  return plan;
}

// Written crash-safe (aside, flushed to disk, renamed, the directory flushed): a run killed
// meanwhile leaves the old plan or the new one, never half of one.
void write_plan(const fs::path& path, const Plan& plan) {
  const std::string text = plan_json(plan).dump(2) + "\n";
  const fs::path tmp = path.string() + ".tmp";
  const auto fail = [&](const fs::path& what) {
    return th::FileError(
        fmt::format("{}: cannot write the plan: {}", what.string(), std::strerror(errno)));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw fail(tmp);
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  errno = saved;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) throw fail(tmp);
  const int dir = ::open(path.parent_path().empty() ? "." : path.parent_path().c_str(),
                         O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

// Whether the batch flags differ from a plan's: "" when they agree, else what differs (the
// caller says from whose plan).
std::string batch_differs(const Plan& plan, const Flags& f) {
  if (f.accumulate_steps != plan.accumulate_steps) {
    return fmt::format("--accumulate-steps {} differs from the {}", f.accumulate_steps,
                       plan.accumulate_steps);
  }
  if (plan.global_batch_size > 0) {
    if (f.global_batch_size == plan.global_batch_size) return "";
    return f.global_batch_size > 0
               ? fmt::format("--global-batch-size {} differs from the {}", f.global_batch_size,
                             plan.global_batch_size)
               : fmt::format("--batch-size {} differs from the --global-batch-size {}",
                             f.batch_size, plan.global_batch_size);
  }
  if (f.global_batch_size > 0) {
    return fmt::format("--global-batch-size {} differs from the --batch-size {}",
                       f.global_batch_size, plan.batch_size);
  }
  if (f.batch_size == plan.batch_size) return "";
  return fmt::format("--batch-size {} differs from the {}", f.batch_size, plan.batch_size);
}

std::optional<Plan> read_plan(const fs::path& path) {
  if (!fs::exists(path)) return std::nullopt;
  std::ifstream in(path);
  if (!in) throw th::FileError(fmt::format("Cannot read the plan {}", path.string()));
  const auto not_a_plan = [&] {
    return th::DataLossError(fmt::format("{}: not a plan written by fashion_mnist", path.string()));
  };
  auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("total_steps") || !j.contains("batch_size"))
    throw not_a_plan();
  try {
    return plan_from_json(j);
  } catch (const nlohmann::json::exception&) {  // a field of the wrong type
    throw not_a_plan();
  }
}

// How long a training step and an evaluation pass of `net` take on this machine, timed on
// random data without changing the parameters: forward and backward at the batch size, and a
// forward of 1,000 images without gradients (test_size / 1000 of those per pass over the test
// split, twice as many when each image is evaluated with its mirror).
struct Timing {
  double step_seconds = 0;
  double eval_seconds = 0;
};

template <typename Fn>
double median_seconds(int n, Fn&& fn) {
  // The median of single runs: a burst of load on a shared machine moves it little.
  std::vector<double> times;
  for (int i = 0; i < n; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

Timing time_model(Net& net, int64_t batch_size, size_t test_size, bool mirrored_eval, bool bf16) {
  auto x = torch::randn({batch_size, 1, 28, 28});
  auto y = torch::randint(0, 10, {batch_size}, torch::kLong);
  // In the precision that training will use.
  auto forward = [&](const torch::Tensor& in) {
    std::optional<th::AutocastScope> autocast;
    if (bf16) autocast.emplace();
    return net->forward(in).to(torch::kFloat);
  };
  auto step = [&] {
    torch::cross_entropy_loss(forward(x), y).backward();
    for (auto& p : net->parameters()) p.mutable_grad() = torch::Tensor();
  };
  auto x_eval = torch::randn({1000, 1, 28, 28});
  auto eval = [&] {
    torch::NoGradGuard no_grad;
    forward(x_eval);
  };
  for (int i = 0; i < 3; ++i) step();
  eval();
  Timing t;
  // Forward and backward alone: the optimizer step, the batch and the hooks add a few percent,
  // and timed cold here they take longer than in training, which evens out (measured: a 3-minute
  // budget trains for about 2.5 minutes plus the evaluations).
  t.step_seconds = median_seconds(15, step);
  t.eval_seconds =
      (mirrored_eval ? 2 : 1) * static_cast<double>(test_size) / 1000 * median_seconds(3, eval);
  return t;
}

// The CPUs that other processes kept busy during `seconds` (/proc/stat's busy time; this process
// sleeps meanwhile); 0 where /proc/stat cannot be read.
double cpus_busy_elsewhere(double seconds) {
  auto busy_ticks = [] {
    std::ifstream in("/proc/stat");
    std::string cpu;
    int64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    return in ? user + nice + system + irq + softirq + steal : int64_t{-1};
  };
  const int64_t before = busy_ticks();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const int64_t after = busy_ticks();
  if (before < 0 || after < 0) return 0;
  return static_cast<double>(after - before) / static_cast<double>(sysconf(_SC_CLK_TCK)) / seconds;
}

// torchrun's LOCAL_WORLD_SIZE: the processes on this machine.
int local_processes() {
  const char* value = std::getenv("LOCAL_WORLD_SIZE");
  return value ? std::max(1, std::atoi(value)) : 1;
}

// Sleeps after every step: a machine slower than the one that was timed (--step-delay-ms).
class StepDelayHook : public th::SessionRunHook {
 public:
  explicit StepDelayHook(int ms) : ms_(ms) {}
  void after_run(th::SessionRunContext&, const th::SessionRunValues&) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
  }
  Calls calls() const override { return {.before_run = false}; }

 private:
  int ms_;
};

int run(const Flags& f) {
  // The budget counts from here: start-up and planning are part of it.
  const auto program_start = std::chrono::steady_clock::now();
  // The first Session would tune malloc (malloc_tuning.h); the timing below comes before it, and
  // must see the speed that training will have (with glibc's defaults an evaluation pass here
  // takes about four times as long).
  th::apply_malloc_tuning();
  // Each line as it is printed, also into a pipe or a log file (the log lines go to stderr).
  std::cout << std::unitbuf;
  // With --distributed, torchrun's processes; else a group of one.
  // One object gives the train op's gradient averaging and the session's process group.
  std::optional<th::distributed::DataParallel> dp;
  if (f.distributed) dp = th::distributed::data_parallel(th::distributed::init());
  const std::shared_ptr<th::distributed::ProcessGroup> pg = dp ? dp->process_group() : nullptr;
  const bool chief = !pg || pg->is_chief();
  const int world = pg ? pg->world_size() : 1;
  const bool bf16 = f.precision == "bf16-mixed";
  // The examples of one step, all ranks together, and each rank's share of them.
  if (f.global_batch_size % world != 0) {
    throw th::InvalidArgument(
        fmt::format("--global-batch-size {} does not divide among {} ranks: give a multiple of {}",
                    f.global_batch_size, world, world));
  }
  const int64_t global_batch = f.global_batch_size > 0 ? f.global_batch_size : f.batch_size * world;
  const int64_t rank_batch = global_batch / world;
  // LibTorch's default may be one thread (it counts physical cores as it sees them): use them
  // all, shared by the processes of this machine.
  torch::set_num_threads(f.threads > 0
                             ? f.threads
                             : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) /
                                               (pg ? local_processes() : 1)));
  torch::manual_seed(static_cast<uint64_t>(f.seed));
  if (chief) fs::create_directories(f.logdir);

  auto train_source = th::fashion_mnist_source(f.data_dir, th::FashionMnistSplit::kTrain);
  auto test_source = th::fashion_mnist_source(f.data_dir, th::FashionMnistSplit::kTest);

  // The plan: from a previous run of this logdir, or the budget; decided by the chief.
  const fs::path plan_path = fs::path(f.logdir) / "plan.json";
  std::optional<Plan> plan = chief ? read_plan(plan_path) : Plan{};
  if (!chief) {
    // Given by the chief below.
  } else if (plan) {
    if (std::string e = batch_differs(*plan, f); !e.empty())
      throw th::InvalidArgument(
          fmt::format("{} of the run in {}: use the same, or a new --logdir", e, f.logdir));
    // The averages are variables of the checkpoints: a run must keep what it started with.
    if (f.ema != plan->ema) {
      throw th::InvalidArgument(fmt::format(
          "--ema {} differs from the {} of the run in {}: use the same, or a new --logdir", f.ema,
          plan->ema, f.logdir));
    }
    if (plan->warmup_steps < 0) plan->warmup_steps = f.warmup_steps.value_or(kDefaultWarmupSteps);
    if (f.warmup_steps && *f.warmup_steps != plan->warmup_steps) {
      throw th::InvalidArgument(fmt::format(
          "--warmup-steps {} differs from the {} of the run in {}: use the same, or a new --logdir",
          *f.warmup_steps, plan->warmup_steps, f.logdir));
    }
    // The threads it was planned with: another count sums in another order, and the resumed run
    // would not continue bit for bit.
    if (f.threads == 0 && !pg && plan->threads > 0) torch::set_num_threads(plan->threads);
    std::cout << fmt::format("Continuing the run in {}: {} steps in all\n", f.logdir,
                             plan->last_step());
  } else {
    const double per_epoch = static_cast<double>(train_source->size()) /
                             static_cast<double>(global_batch * f.accumulate_steps);
    plan = Plan{.total_steps = f.steps,
                .batch_size = f.global_batch_size > 0 ? 0 : f.batch_size,
                .global_batch_size = f.global_batch_size,
                .accumulate_steps = f.accumulate_steps,
                .regularize = f.regularize == "on",
                .ema = f.ema};
    if (f.steps == 0) {
      // Start-up and the evaluations (every --eval-every steps and at the end) come out of the
      // budget first.
      // With the CPUs busy with other work, LibTorch's threads wait for each other at every
      // operation, one of them always descheduled: beside two busy loops on 2 CPUs, a step took
      // 25-260 ms on 2 threads and 34 ms on 1. Unless --threads says otherwise, a run planned on
      // a busy machine trains on the CPUs that are left, at least one.
      const int all_threads = torch::get_num_threads();
      if (f.threads == 0 && !pg && all_threads > 1) {
        const double busy = cpus_busy_elsewhere(0.5);
        const int left = std::max(1, static_cast<int>(std::lround(all_threads - busy)));
        if (left < all_threads) {
          torch::set_num_threads(left);
          std::cout << fmt::format(
              "The CPUs are busy with other work ({:.1f} of {} in use): training on {} thread{}\n",
              busy, all_threads, left, left == 1 ? "" : "s");
        }
      }
      struct Fit {
        Timing timing;
        int64_t steps = 0;
      };
      auto fit_budget = [&](bool regularize) {
        Net probe(net_options(regularize));
        Fit fit{time_model(probe, rank_batch, test_source->size(), regularize, bf16)};
        fit.timing.step_seconds *= static_cast<double>(f.accumulate_steps);  // K batches a step
        const Timing& t = fit.timing;
        const double budget = f.minutes * 60 - 5;
        const int64_t evals = static_cast<int64_t>(budget / t.step_seconds) / f.eval_every + 1;
        fit.steps = std::max<int64_t>(
            static_cast<int64_t>((budget - evals * t.eval_seconds) / t.step_seconds) / 100 * 100,
            100);
        return fit;
      };
      Fit fit = fit_budget(plan->regularize);
      // The regularised model is slower per step: time it too when it is chosen.
      if (f.regularize == "auto" && fit.steps / per_epoch > kRegularizeAfterEpochs) {
        plan->regularize = true;
        fit = fit_budget(true);
      }
      plan->total_steps = fit.steps;
      plan->budget_minutes = f.minutes;
      if (f.threads == 0 && !pg) plan->threads = torch::get_num_threads();
      plan->eval_seconds = fit.timing.eval_seconds;
      std::cout << fmt::format(
          "Budget {:g} min at {:.1f} ms per step and {:.1f} s per evaluation on this machine: {} "
          "steps of batch {}{}\n",
          f.minutes, fit.timing.step_seconds * 1e3, fit.timing.eval_seconds, fit.steps, rank_batch,
          f.accumulate_steps > 1 ? fmt::format(" x {} micro-batches", f.accumulate_steps) : "");
    } else if (f.regularize == "auto") {
      plan->regularize = plan->total_steps / per_epoch > kRegularizeAfterEpochs;
    }
    plan->warmup_steps = warmup_for(f.warmup_steps, plan->total_steps);
    if (plan->warmup_steps >= plan->total_steps) {
      throw th::InvalidArgument(fmt::format("--warmup-steps {} must be less than the {} steps",
                                            plan->warmup_steps, plan->total_steps));
    }
    std::cout << fmt::format(
        "{:.1f} epochs; regularisation (batch norm, dropout {:g}, random flips): {}\n",
        plan->total_steps / per_epoch, kDropout, plan->regularize ? "on" : "off");
    write_plan(plan_path, *plan);
  }
  if (pg) {
    const auto j = nlohmann::json::parse(pg->broadcast_bytes(chief ? plan_json(*plan).dump() : ""));
    plan = plan_from_json(j);
    if (std::string e = batch_differs(*plan, f); !e.empty())
      throw th::InvalidArgument(fmt::format("{} of the chief", e));
  }
  // The same initial weights whatever the planning did.
  torch::manual_seed(static_cast<uint64_t>(f.seed));
  Net net(net_options(plan->regularize));

  th::Graph g;
  g.add_module("net", net);
  // The random flips are the input's transform: drawn per batch from its place in the data, on
  // the workers with --num-workers.
  auto train = g.input("train", train_source,
                       {.batch_size = f.global_batch_size > 0 ? 1 : f.batch_size,
                        .global_batch_size = f.global_batch_size,
                        .shuffle = true,
                        .seed = f.seed,
                        .num_epochs = 0,
                        .drop_last = true,
                        .prefetch = f.prefetch,
                        .num_workers = f.num_workers,
                        .transform = plan->regularize ? fashion_mnist::random_flips : nullptr});
  // Read whole by the chief's EvaluationHook alone.
  auto test = g.input("test", test_source, {.batch_size = 1000, .shard_across_ranks = false});

  // Training: loss and accuracy of the batch (accuracy only when a summary asks for it).
  const th::Node images = train.data(), labels = train.target();
  // With --precision bf16-mixed, the model's forward passes under CPU autocast.
  auto in_precision = [bf16](th::OpFn fn) { return bf16 ? th::autocast(std::move(fn)) : fn; };
  auto logits =
      g.op("logits",
           in_precision([net, images](th::Run& r) mutable { return net->forward(r[images]); }));
  auto loss =
      g.op("loss", [=](th::Run& r) { return torch::cross_entropy_loss(r[logits], r[labels]); });
  auto accuracy = g.op("accuracy", [=](th::Run& r) {
    return r[logits].argmax(1).eq(r[labels]).to(torch::kFloat).mean();
  });
  // Evaluation: the same model over the test split.
  const th::Node test_images = test.data(), test_labels = test.target();
  // A model trained on mirrored images is evaluated on each image and its mirror, the two
  // predictions averaged (test-time augmentation: worth about 0.2 points here).
  auto test_logits =
      g.op("test/logits",
           in_precision([net, test_images, mirror = plan->regularize](th::Run& r) mutable {
             const at::Tensor& x = r[test_images];
             auto logits = net->forward(x).to(torch::kFloat);
             return mirror ? (logits + net->forward(x.flip({3})).to(torch::kFloat)) / 2 : logits;
           }));
  auto test_loss = g.op("test/loss", [=](th::Run& r) {
    return torch::cross_entropy_loss(r[test_logits], r[test_labels]);
  });
  auto test_accuracy = g.op("test/accuracy", [=](th::Run& r) {
    return r[test_logits].argmax(1).eq(r[test_labels]).to(torch::kFloat).mean();
  });

  auto optimizer = f.optimizer == "adam" ? th::adam(f.lr) : th::sgd(f.lr, {.momentum = 0.9});
  const th::MinimizeOptions minimize_options{.accumulate_steps = plan->accumulate_steps};
  auto train_op = g.minimize("train_op", loss, optimizer,
                             dp ? dp->minimize_options(minimize_options) : minimize_options);
  th::LearningRateSchedule schedule = plan_schedule(*plan, f.lr);
  // What each step runs: the train op, then the moving averages when there are any.
  std::shared_ptr<th::ExponentialMovingAverage> ema;
  th::Node step_op = train_op;
  if (plan->ema > 0) {
    ema = std::make_shared<th::ExponentialMovingAverage>(
        g, th::ExponentialMovingAverageOptions{.decay = plan->ema, .num_updates_warmup = true});
    step_op = ema->apply(train_op);
  }

  // Summaries of the training run (SummarySaverHook writes them every --summary-steps).
  th::summary::scalar(g, "loss", loss);
  th::summary::scalar(g, "accuracy", accuracy);
  for (const auto& item : net->named_parameters())
    if (item.key().find("weight") != std::string::npos)
      th::summary::histogram(g, "weights/" + item.key(), "net/" + item.key());
  auto grid = g.op("input_grid", [images](th::Run& r) {
    // The batch's first 16 images as one 4x4 grid, back in [0, 1].
    auto x = r[images].slice(0, 0, 16) * th::kFashionMnistStddev + th::kFashionMnistMean;
    if (x.size(0) < 16) x = torch::cat({x, torch::zeros({16 - x.size(0), 1, 28, 28})});
    return x.reshape({4, 4, 28, 28}).permute({0, 2, 1, 3}).reshape({1, 1, 112, 112}).clamp(0, 1);
  });
  th::summary::image(g, "inputs", grid, {.max_outputs = 1});

  auto preemption = std::make_shared<th::PreemptionHook>();
  auto evaluation = std::make_shared<th::EvaluationHook>(th::EvaluationHookOptions{
      .metrics = {{"accuracy", test_accuracy}, {"loss", test_loss}},
      .input = test_images,
      .every_n_steps = f.eval_every,
      .output_dir = (fs::path(f.logdir) / "eval").string(),
      .set_training = [net](bool training) mutable { net->train(training); },
      .moving_average = ema});
  auto stop = std::make_shared<th::StopAtStepHook>(
      th::StopAtStepHookOptions{.last_step = plan->last_step()});
  auto lr_hook = std::make_shared<th::LearningRateScheduleHook>(
      train_op, schedule,
      th::LearningRateScheduleHookOptions{.every_n_steps = f.summary_steps,
                                          .output_dir = chief ? f.logdir : ""});
  th::Hooks hooks = {preemption, stop, lr_hook};
  if (f.step_delay_ms > 0) hooks.push_back(std::make_shared<StepDelayHook>(f.step_delay_ms));
  // The wall-clock limit: a planned step count cannot know that the machine gets busier.
  const double limit_minutes = f.time_limit >= 0 ? f.time_limit : f.steps ? 0 : f.minutes * 1.25;
  std::shared_ptr<th::TimeLimitHook> time_limit;
  if (limit_minutes > 0) {
    time_limit =
        std::make_shared<th::TimeLimitHook>(std::chrono::duration<double>(limit_minutes * 60));
    hooks.push_back(time_limit);
  }
  // The evaluation and the progress bar: the chief's.
  th::Hooks chief_only_hooks = {evaluation};
  if (f.progress && chief)
    hooks.push_back(
        std::make_shared<th::ProgressBarHook>(th::ProgressBarHookOptions{.loss = loss}));

  // A finished run would train one more step if restored (TF's StopAtStepHook rule): say so
  // instead.
  bool complete = false;
  if (auto latest = chief ? th::latest_checkpoint(f.logdir) : std::nullopt) {
    if (auto done = th::CheckpointManager::step_of(*latest); done && *done >= plan->last_step()) {
      std::cout << fmt::format(
          "The run in {} is complete ({} of {} steps). Train again with a new --logdir.\n",
          f.logdir, *done, plan->last_step());
      complete = true;
    }
  }
  if (pg) complete = pg->any(complete);
  if (complete) return 0;

  // Re-planning while training, for a minutes budget: what is left of it once the session
  // starts, less the final evaluation and checkpoint.
  if (plan->budget_minutes > 0 && !pg) {
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - program_start).count();
    const double budget = plan->budget_minutes * 60 - spent;
    if (budget > 0) {
      hooks.push_back(std::make_shared<th::TimeBudgetHook>(th::TimeBudgetHookOptions{
          .budget_secs = budget,
          .last_step = plan->last_step(),
          .reserve_secs = plan->eval_seconds + 3,
          .every_n_steps = 100,
          .min_steps_measured = 100,
          .round_to = 10,
          .on_replan = [&](const th::Replan& r) {
            plan->replans.push_back({r.at_step, r.last_step});
            write_plan(plan_path, *plan);
            schedule = th::rescaled(schedule, r.at_step, r.previous_last_step, r.last_step);
            lr_hook->set_schedule(schedule);
            stop->set_last_step(r.last_step);
            std::cout << fmt::format(
                "Re-planned at step {}: {:.1f} ms per step here, so the run ends at step {} "
                "instead of {}, within the budget, its schedule ending with it\n",
                r.at_step, r.seconds_per_step * 1e3, r.last_step, r.previous_last_step);
          }}));
    }
  }

  // The flags that shape the run, for TensorBoard's HParams dashboard and `trainhooks events`:
  // as the plan has them, so that a resumed run declares what it continues.
  using th::summary::MetricDataset;
  th::summary::HParams hparams{
      .values = {{"optimizer", f.optimizer},
                 {"lr", f.lr},
                 {"batch_size",
                  plan->global_batch_size > 0 ? plan->global_batch_size : plan->batch_size},
                 {"regularize", plan->regularize},
                 {"steps", plan->total_steps},
                 {"warmup_steps", plan->warmup_steps},
                 {"ema", plan->ema},
                 {"precision", f.precision}},
      .metrics = {
          {.tag = "accuracy",
           .group = "eval",
           .display_name = "test accuracy",
           .dataset = MetricDataset::kValidation},
          {.tag = "loss",
           .group = "eval",
           .display_name = "test loss",
           .dataset = MetricDataset::kValidation},
          {.tag = "loss", .display_name = "training loss", .dataset = MetricDataset::kTraining}}};

  th::MonitoredTrainingSessionOptions options{
      .checkpoint_dir = f.logdir,
      .hooks = hooks,
      .chief_only_hooks = chief_only_hooks,
      .checkpoints = {.save_secs = f.save_steps ? std::nullopt : std::optional<double>(60),
                      .save_steps =
                          f.save_steps ? std::optional<int64_t>(f.save_steps) : std::nullopt},
      .summaries = {.save_steps = f.summary_steps, .log_step_count_steps = 1000},
      .distributed = {.process_group = pg}};
  // Assigned, not in the initializer: GCC 12 then warns (maybe-uninitialized) about the
  // temporary's checkpoints.manager.keep_best, which the initializer leaves out.
  options.hparams = std::move(hparams);
  auto start = std::chrono::steady_clock::now();
  th::MonitoredTrainingSession sess(g, std::move(options));
  const int64_t first_step = g.global_step_value();
  if (first_step > 0 && chief) std::cout << fmt::format("Resumed at step {}\n", first_step);
  while (!sess.should_stop()) sess.run(step_op);
  // The final checkpoint and evaluation: closed explicitly, so that a failure (a full disk) ends
  // the program with an error instead of a line in the destructor's log.
  try {
    sess.close();
  } catch (const std::exception& e) {
    std::string error = e.what();
    if (const std::string lost = sess.unsaved_steps(); !lost.empty()) {
      if (error.ends_with('.')) error.pop_back();
      error += "; " + lost;
    }
    throw th::UnknownError(error);
  }
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;

  const int64_t step = g.global_step_value();
  if (const int sig = sess.stopped_by_signal()) {
    std::cout << fmt::format(
        "Stopped by {} at step {} of {}; the checkpoint is in {}. Run the same command again to "
        "continue.\n",
        th::signal_name(sig), step, plan->last_step(), f.logdir);
    return f.preempted_exit_code.value_or(th::exit_status_for_signal(sig));
  }
  auto acc = th::latest_metrics(g).latest("eval/accuracy");
  if (time_limit && time_limit->stopped() && step < plan->last_step()) {
    // Not the end of the plan: the learning rate has not decayed, and the accuracy is not final.
    if (chief) {
      std::cout << fmt::format(
          "Stopped at the time limit of {:g} min at step {} of {}, before the end of the plan "
          "(test accuracy so far: {:.2f} %); the checkpoint is in {}. Run the same command again "
          "to continue.\n",
          limit_minutes, step, plan->last_step(), acc ? acc->value * 100 : 0.0, f.logdir);
    }
    return f.time_limit_exit_code;
  }
  if (!chief) return 0;  // the chief reports
  std::cout << fmt::format(
      "Final test accuracy: {:.2f} % at step {} ({} steps in {:.1f} min; to view the run: "
      "trainhooks board {})\n",
      acc ? acc->value * 100 : 0.0, step, step - first_step, elapsed.count() / 60, f.logdir);
  return 0;
}

}  // namespace

// CLI11 takes the argument after a flag as its value even when it is the next flag: a value left
// out (`--steps --logdir x`) is said as such.
std::string flag_as_value(const std::string& value) {
  if (value.size() > 2 && value.starts_with("--"))
    return fmt::format("value missing (the next argument is the flag '{}')", value);
  return {};
}

// CLI11's own range checks print the range of a double (1.8e308 in full): say it plainly.
CLI::Validator number_check(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& value) -> std::string {
        if (std::string e = flag_as_value(value); !e.empty()) return e;
        try {
          size_t used = 0;
          const double x = std::stod(value, &used);
          if (used == value.size() && (x > 0 || (allow_zero && x == 0))) return {};
        } catch (const std::exception&) {
        }
        return fmt::format("must be a {} number, got '{}'",
                           allow_zero ? "non-negative" : "positive", value);
      },
      allow_zero ? "NONNEGATIVE" : "POSITIVE");
}

// A count from 0 to `max`: `--num-workers 1.5` is refused here rather than in CLI11's conversion.
CLI::Validator count_check(int max) {
  return CLI::Validator(
      [max](std::string& value) -> std::string {
        if (std::string e = flag_as_value(value); !e.empty()) return e;
        try {
          size_t used = 0;
          const long long x = std::stoll(value, &used);
          if (used == value.size() && x >= 0 && x <= max) return {};
        } catch (const std::exception&) {
        }
        return fmt::format("must be an integer from 0 to {}, got '{}'", max, value);
      },
      "0-" + std::to_string(max));
}

int main(int argc, char** argv) {
  Flags f;
  const CLI::Validator positive = number_check(false), non_negative = number_check(true);
  const CLI::Validator not_a_flag(flag_as_value, "");
  CLI::App app{"Trains a small CNN on Fashion-MNIST with trainhooks' MonitoredTrainingSession."};
  app.add_option("--data-dir", f.data_dir, "Directory of the IDX files (gzip or plain)")
      ->check(not_a_flag)
      ->capture_default_str();
  app.add_option("--logdir", f.logdir, "Checkpoints, summaries and the run's plan")
      ->check(not_a_flag)
      ->capture_default_str();
  auto* minutes = app.add_option("--minutes", f.minutes, "Training budget in minutes")
                      ->check(positive)
                      ->capture_default_str();
  app.add_option("--steps", f.steps, "Training budget in steps (instead of --minutes)")
      ->check(positive)
      ->excludes(minutes);
  app.add_option("--time-limit", f.time_limit,
                 "Stop with a checkpoint after this many minutes of training even if the planned "
                 "steps are not done (default 1.25 x --minutes; none with --steps); 0: none")
      ->check(non_negative);
  auto* batch_size = app.add_option("--batch-size", f.batch_size, "Batch of each rank")
                         ->check(positive)
                         ->capture_default_str();
  app.add_option("--global-batch-size", f.global_batch_size,
                 "Batch of all ranks together, G / ranks each, kept when the number of ranks "
                 "changes (instead of --batch-size)")
      ->check(positive)
      ->excludes(batch_size);
  app.add_option("--accumulate-steps", f.accumulate_steps,
                 "Batches whose gradients each step adds up before the optimizer step (a step on "
                 "a batch K times as large)")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--lr", f.lr, "Peak learning rate")->check(positive)->capture_default_str();
  app.add_option("--optimizer", f.optimizer)
      ->check(CLI::IsMember({"adam", "sgd"}))
      ->capture_default_str();
  app.add_option("--warmup-steps", f.warmup_steps,
                 "Steps of linear warm-up of the learning rate (default: 200, or a tenth of a "
                 "shorter run)")
      ->check(non_negative);
  app.add_option("--eval-every", f.eval_every, "Evaluate on the test split every N steps")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--summary-steps", f.summary_steps, "Write summaries every N steps")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--save-steps", f.save_steps,
                 "Save a checkpoint every N steps (default: every 60 s)")
      ->check(positive);
  app.add_option("--threads", f.threads, "Intra-op threads (0: one per CPU)")->check(non_negative);
  app.add_option("--seed", f.seed)->capture_default_str();
  app.add_flag("!--no-progress", f.progress, "No progress bar or progress lines");
  app.add_option("--regularize", f.regularize,
                 "Batch norm, dropout and random left-right flips: on, off, or auto (on past 10 "
                 "epochs)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  app.add_flag("--distributed", f.distributed,
               "Data-parallel over the processes that torchrun starts (see docs/distributed.md)");
  app.add_option("--preempted-exit-code", f.preempted_exit_code,
                 "Exit status after SIGTERM or SIGINT (default: 128 + the signal: 143, 130)")
      ->check(not_a_flag)
      ->check(CLI::Range(0, 255));
  app.add_option("--time-limit-exit-code", f.time_limit_exit_code,
                 "Exit status when the time limit stops the run before its last step")
      ->check(not_a_flag)
      ->check(CLI::Range(0, 255))
      ->capture_default_str();
  app.add_option("--ema", f.ema,
                 "Decay of an exponential moving average of the weights, which the evaluations "
                 "use (e.g. 0.999; default: none)")
      ->check(CLI::Validator(
          [&](std::string& value) -> std::string {
            if (std::string e = flag_as_value(value); !e.empty()) return e;
            try {
              size_t used = 0;
              const double x = std::stod(value, &used);
              if (used == value.size() && x > 0 && x < 1) return {};
            } catch (const std::exception&) {
            }
            return fmt::format("must be a number in (0, 1), got '{}'", value);
          },
          "DECAY"));
  app.add_option("--precision", f.precision,
                 "fp32, or bf16-mixed: the forward passes in bfloat16 under CPU autocast, the "
                 "weights and optimizer state in float32")
      ->check(CLI::IsMember({"fp32", "bf16-mixed"}))
      ->capture_default_str();
  app.add_option("--num-workers", f.num_workers,
                 "Threads that make training batches ahead (the same batches as without)")
      ->check(count_check(64))
      ->capture_default_str();
  app.add_option("--prefetch", f.prefetch,
                 "Training batches made ahead at most (default: 2 x --num-workers; one thread "
                 "when --num-workers is 0)")
      ->check(count_check(1024));
  // Not in --help: for trying and testing the re-planning.
  app.add_option("--step-delay-ms", f.step_delay_ms)->check(non_negative)->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "fashion_mnist: " << e.what() << " (see --help)\n";
    return 2;
  }
  try {
    return run(f);
  } catch (const std::exception& e) {
    std::cerr << "fashion_mnist: " << e.what() << "\n";
    return 1;
  }
}
