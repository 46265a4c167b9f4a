// The main job's speed: the Fashion-MNIST CNN of examples/fashion_mnist.cpp (in the configuration
// of its 3-minute default: no batch norm, no dropout, no flips) trained through
// MonitoredTrainingSession with all of the example's hooks, against a hand-written LibTorch loop
// over the same model, data source, optimizer and schedule.
//
//   fashion_mnist_bench --mode parity [--blocks 20] [--block-steps 25]
//       both programs in one process, alternating blocks of steps (the order flips every block so
//       that slow phases of a shared machine hit both); prints the per-step medians and ratios
//   fashion_mnist_bench --mode mts|raw --steps N
//       one program for N steps after a warm-up; scripts/bench.sh interleaves this with the
//       PyTorch peer (bench/fashion_mnist_pytorch.py)
//
// Common flags: --threads T (0: LibTorch's default), --batch-size B (64), --data-dir DIR,
// --keep-freed-memory (the example's malloc settings: freed memory stays in the process; the
// same as
// GLIBC_TUNABLES=glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=268435456).
// With --mode mts: --precision bf16-mixed (the model's forward under CPU autocast, bfloat16) and
// --ema DECAY (an ExponentialMovingAverage updated after each step) measure what those cost;
// --accumulate-steps K makes each step K micro-batches of --batch-size (ms_per_step is then per
// optimizer step: divide by K for the time per batch).
// --regularize the regularised model (batch norm, dropout 0.25, the random flips as the input's
// transform, as the example's --regularize on), and --num-workers N / --prefetch P the input
// working ahead on N threads (InputOptions::num_workers, prefetch).
// Output: one JSON object on stdout. The hooks are present but idle in the measured steps
// (their triggers lie beyond them), which is what most steps of a real run are.
#include <torch/torch.h>

#include <fmt/format.h>
#include <trainhooks/trainhooks.h>
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "fashion_mnist_model.h"

namespace th = trainhooks;

namespace {

constexpr int64_t kNever = int64_t{1} << 40;  // a trigger step beyond any measured step

struct Options {
  std::string mode = "parity";
  std::string data_dir = th::kFashionMnistDefaultDir;
  int64_t steps = 300;
  int64_t blocks = 20;
  int64_t block_steps = 25;
  int64_t batch_size = 64;
  int threads = 0;
  bool keep_freed_memory = false;
  std::string precision = "fp32";  // bf16-mixed: the forward passes under CPU autocast (mts)
  double ema = 0;                  // > 0: a moving average of the weights after each step (mts)
  int64_t accumulate_steps = 1;    // micro-batches per step (mts)
  bool regularize = false;         // batch norm, dropout, random flips (mts)
  int num_workers = 0;             // threads making the batches ahead (mts)
  int prefetch = 0;                // batches made ahead; 0: 2 x num_workers (mts)
};

constexpr double kPeakLearningRate = 2e-3;  // the example's default --lr

th::LearningRateSchedule schedule() {
  return th::linear_warmup(200, th::cosine_decay(kPeakLearningRate, 100000));
}

// The hand-written loop: the batch from the same source, the schedule's rate, zero_grad,
// forward, backward, step. It keeps the last loss alive, as a loop that prints it would.
class RawLoop {
 public:
  RawLoop(const Options& o, std::shared_ptr<th::InputSource> source)
      : source_(std::move(source)),
        batch_size_(o.batch_size),
        optimizer_(net_->parameters(), torch::optim::AdamOptions(kPeakLearningRate)) {
    order_ = torch::randperm(static_cast<int64_t>(source_->size())).contiguous();
  }

  void step() {
    if (offset_ + batch_size_ > order_.size(0)) {
      order_ = torch::randperm(static_cast<int64_t>(source_->size())).contiguous();
      offset_ = 0;
    }
    const int64_t* p = order_.data_ptr<int64_t>() + offset_;
    indices_.assign(p, p + batch_size_);
    offset_ += batch_size_;
    auto batch = source_->get_batch(indices_);
    const double lr = schedule_(step_);
    for (auto& group : optimizer_.param_groups()) group.options().set_lr(lr);
    optimizer_.zero_grad();
    loss_ = torch::cross_entropy_loss(net_->forward(batch[0]), batch[1]);
    loss_.backward();
    optimizer_.step();
    ++step_;
  }

 private:
  std::shared_ptr<th::InputSource> source_;
  int64_t batch_size_;
  fashion_mnist::Net net_;
  torch::optim::Adam optimizer_;
  th::LearningRateSchedule schedule_ = schedule();
  torch::Tensor order_, loss_;
  std::vector<int64_t> indices_;
  int64_t offset_ = 0, step_ = 0;
};

// The example's graph and hooks.
class MonitoredLoop {
 public:
  MonitoredLoop(const Options& o, std::shared_ptr<th::InputSource> train_source,
                std::shared_ptr<th::InputSource> test_source)
      : dir_(std::filesystem::temp_directory_path() /
             fmt::format("fashion_mnist_bench.{}", ::getpid())),
        net_(fashion_mnist::NetOptions{.dropout = o.regularize ? 0.25 : 0.0,
                                       .batch_norm = o.regularize}) {
    g_.add_module("net", net_);
    auto train = g_.input("train", std::move(train_source),
                          {.batch_size = o.batch_size,
                           .shuffle = true,
                           .num_epochs = 0,
                           .drop_last = true,
                           .prefetch = o.prefetch,
                           .num_workers = o.num_workers,
                           .transform = o.regularize ? fashion_mnist::random_flips : nullptr});
    auto test = g_.input("test", std::move(test_source), {.batch_size = 1000});
    fashion_mnist::Net net = net_;
    const th::Node images = train.data(), labels = train.target();
    th::OpFn forward = [net, images](th::Run& r) mutable { return net->forward(r[images]); };
    auto logits = g_.op("logits", o.precision == "bf16-mixed" ? th::autocast(forward) : forward);
    auto loss =
        g_.op("loss", [=](th::Run& r) { return torch::cross_entropy_loss(r[logits], r[labels]); });
    auto accuracy = g_.op("accuracy", [=](th::Run& r) {
      return r[logits].argmax(1).eq(r[labels]).to(torch::kFloat).mean();
    });
    const th::Node test_images = test.data(), test_labels = test.target();
    auto test_logits = g_.op("test/logits", [net, test_images](th::Run& r) mutable {
      return net->forward(r[test_images]);
    });
    auto test_accuracy = g_.op("test/accuracy", [=](th::Run& r) {
      return r[test_logits].argmax(1).eq(r[test_labels]).to(torch::kFloat).mean();
    });
    train_op_ = g_.minimize("train_op", loss, th::adam(kPeakLearningRate),
                            {.accumulate_steps = o.accumulate_steps});
    step_op_ = train_op_;
    if (o.ema > 0) {
      ema_ = std::make_shared<th::ExponentialMovingAverage>(
          g_, th::ExponentialMovingAverageOptions{.decay = o.ema, .num_updates_warmup = true});
      step_op_ = ema_->apply(train_op_);
    }
    th::summary::scalar(g_, "loss", loss);
    th::summary::scalar(g_, "accuracy", accuracy);
    for (const auto& item : net_->named_parameters())
      th::summary::histogram(g_, "weights/" + item.key(), "net/" + item.key());

    th::Hooks hooks = {
        std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.last_step = kNever}),
        std::make_shared<th::LearningRateScheduleHook>(
            train_op_, schedule(),
            th::LearningRateScheduleHookOptions{.every_n_steps = kNever,
                                                .output_dir = dir_.string()}),
        std::make_shared<th::EvaluationHook>(
            th::EvaluationHookOptions{.metrics = {{"accuracy", test_accuracy}},
                                      .input = test_images,
                                      .every_n_steps = kNever,
                                      .at_end = false}),
        std::make_shared<th::ProgressBarHook>(th::ProgressBarHookOptions{
            .loss = loss, .mode = th::ProgressBarMode::kPlain, .fd = devnull_.fd}),
    };
    sess_ = std::make_unique<th::MonitoredTrainingSession>(
        g_, th::MonitoredTrainingSessionOptions{
                .checkpoint_dir = dir_.string(),
                .hooks = hooks,
                .checkpoints = {.save_secs = 1e9},
                .summaries = {.save_steps = kNever, .log_step_count_steps = kNever}});
  }

  ~MonitoredLoop() {
    sess_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  void step() { sess_->run(step_op_); }

 private:
  struct DevNull {
    int fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    ~DevNull() { ::close(fd); }
  };
  std::filesystem::path dir_;
  DevNull devnull_;
  th::Graph g_;
  fashion_mnist::Net net_;
  th::Node train_op_, step_op_;
  std::shared_ptr<th::ExponentialMovingAverage> ema_;
  std::unique_ptr<th::MonitoredTrainingSession> sess_;
};

template <typename Fn>
double seconds_of(Fn&& fn) {
  auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int run(const Options& o) {
  if (o.keep_freed_memory) {
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
  }
  if (o.threads > 0) torch::set_num_threads(o.threads);
  torch::manual_seed(0);
  auto train_source = th::fashion_mnist_source(o.data_dir, th::FashionMnistSplit::kTrain);
  auto test_source = th::fashion_mnist_source(o.data_dir, th::FashionMnistSplit::kTest);
  const int threads = torch::get_num_threads();
  if (o.mode == "raw" || o.mode == "mts") {
    std::unique_ptr<RawLoop> raw;
    std::unique_ptr<MonitoredLoop> mts;
    std::function<void()> step;
    if (o.mode == "raw") {
      raw = std::make_unique<RawLoop>(o, train_source);
      step = [&] { raw->step(); };
    } else {
      mts = std::make_unique<MonitoredLoop>(o, train_source, test_source);
      step = [&] { mts->step(); };
    }
    for (int i = 0; i < 10; ++i) step();  // warm-up: allocator, thread pool
    std::vector<double> times;
    for (int64_t i = 0; i < o.steps; ++i) times.push_back(seconds_of(step));
    double total = 0;
    for (double t : times) total += t;
    std::cout << fmt::format(
        R"({{"program": "trainhooks {}", "keep_freed_memory": {}, "steps": {}, "ms_per_step": {:.3f}, "median_ms_per_step": {:.3f}, "threads": {}, "batch_size": {}, "regularize": {}, "num_workers": {}, "prefetch": {}}})"
        "\n",
        o.mode, o.keep_freed_memory, o.steps, 1e3 * total / o.steps, 1e3 * median(times), threads,
        o.batch_size, o.regularize, o.num_workers, o.prefetch);
    return 0;
  }
  RawLoop raw(o, train_source);
  MonitoredLoop mts(o, train_source, test_source);
  auto block = [&](auto& loop) {
    return seconds_of([&] {
      for (int64_t i = 0; i < o.block_steps; ++i) loop.step();
    });
  };
  block(raw);  // warm-up
  block(mts);
  std::vector<double> raw_t, mts_t, ratios;
  double raw_total = 0, mts_total = 0;
  for (int64_t b = 0; b < o.blocks; ++b) {
    double r, m;
    if (b % 2 == 0) {
      r = block(raw);
      m = block(mts);
    } else {
      m = block(mts);
      r = block(raw);
    }
    raw_t.push_back(r);
    mts_t.push_back(m);
    ratios.push_back(m / r);
    raw_total += r;
    mts_total += m;
  }
  const double steps = static_cast<double>(o.blocks * o.block_steps);
  std::cout << fmt::format(
      R"({{"keep_freed_memory": {}, "raw_ms_per_step": {:.3f}, "mts_ms_per_step": {:.3f}, "ratio": {:.4f}, "block_ratio_median": {:.4f}, "block_ratio_min": {:.4f}, "block_ratio_max": {:.4f}, "steps_each": {}, "threads": {}, "batch_size": {}}})"
      "\n",
      o.keep_freed_memory, 1e3 * raw_total / steps, 1e3 * mts_total / steps, mts_total / raw_total,
      median(ratios), *std::min_element(ratios.begin(), ratios.end()),
      *std::max_element(ratios.begin(), ratios.end()), o.blocks * o.block_steps, threads,
      o.batch_size);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Fashion-MNIST CNN: MonitoredTrainingSession against a hand-written LibTorch loop"};
  app.add_option("--mode", o.mode)->check(CLI::IsMember({"parity", "mts", "raw"}));
  app.add_option("--data-dir", o.data_dir);
  app.add_option("--steps", o.steps)->check(CLI::PositiveNumber);
  app.add_option("--blocks", o.blocks)->check(CLI::PositiveNumber);
  app.add_option("--block-steps", o.block_steps)->check(CLI::PositiveNumber);
  app.add_option("--batch-size", o.batch_size)->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads)->check(CLI::NonNegativeNumber);
  app.add_flag("--keep-freed-memory", o.keep_freed_memory);
  app.add_option("--precision", o.precision)->check(CLI::IsMember({"fp32", "bf16-mixed"}));
  app.add_option("--ema", o.ema)->check(CLI::Range(0.0, 1.0));
  app.add_option("--accumulate-steps", o.accumulate_steps)->check(CLI::PositiveNumber);
  app.add_flag("--regularize", o.regularize);
  app.add_option("--num-workers", o.num_workers)->check(CLI::Range(0, 64));
  app.add_option("--prefetch", o.prefetch)->check(CLI::Range(0, 1024));
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::cerr << "fashion_mnist_bench: " << e.what() << "\n";
    return 1;
  }
}
