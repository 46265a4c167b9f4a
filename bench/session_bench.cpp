// Core costs: the session's per-run and per-node bookkeeping, an idle hook's per-step cost, and
// the seed model trained through MonitoredTrainingSession against a hand-written LibTorch loop.
//
//   session_bench [benchmark flags]                 the micro and end-to-end benchmarks
//   session_bench --seed-steps=N --mode=MODE        trains the seed model N steps and exits;
//                                                   MODE: raw | raw_keep | raw_keep_value |
//                                                   raw_keep_none | seed_hook | seed_hook_value |
//                                                   mts | mts_into | session. Instruction counts of
//                                                   N and 3N steps give the per-step cost
//                                                   (scripts/bench.sh).
//   session_bench --seed-steps=N --mode=MODE --n=K  runs a micro benchmark's loop N times: MODE
//                                                   chain | direct (K nodes), idle_hooks (K hooks).
//
// Ops in the micro benchmarks do no tensor math: they return a tensor made beforehand (or the
// previous node's value), so the time left is the session's.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "trainhooks/graph.h"
#include "trainhooks/hook.h"
#include "trainhooks/hooks/early_stopping_hook.h"
#include "trainhooks/hooks/metrics_logger_hook.h"
#include "trainhooks/hooks/profiler_hook.h"
#include "trainhooks/hooks/time_limit_hook.h"
#include "trainhooks/optimizers.h"
#include "trainhooks/session.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;

namespace {

// ---- Session::run on a chain of trivial ops ---------------------------------------------------

// node0 returns a tensor made beforehand; node k returns node k-1's value.
struct Chain {
  th::Graph g;
  th::Node last;
  explicit Chain(int64_t n) {
    const at::Tensor t = at::ones({1});
    last = g.op("n0", [t](th::Run&) { return t; });
    for (int64_t k = 1; k < n; ++k) {
      const th::Node prev = last;
      last = g.op("n" + std::to_string(k), [prev](th::Run& r) { return r[prev]; });
    }
    g.finalize();
  }
};

void BM_SessionRunInto(benchmark::State& state) {
  Chain chain(state.range(0));
  th::Session sess(chain.g);
  // Built once, as a training loop would: the session's bookkeeping is what is measured.
  const th::Fetches fetches(chain.last);
  const th::Feeds feeds;
  const th::RunOptions options;
  th::RunResults out;
  for (auto _ : state) {
    sess.run_into(fetches, feeds, options, nullptr, out);
    benchmark::DoNotOptimize(out.at(0).unsafeGetTensorImpl());
  }
}
BENCHMARK(BM_SessionRunInto)->Arg(1)->Arg(10)->Arg(100);

void BM_SessionRun(benchmark::State& state) {
  Chain chain(state.range(0));
  th::Session sess(chain.g);
  const th::Fetches fetches(chain.last);
  const th::Feeds feeds;
  for (auto _ : state) {
    th::RunResults out = sess.run(fetches, feeds);
    benchmark::DoNotOptimize(out.at(0).unsafeGetTensorImpl());
  }
}
BENCHMARK(BM_SessionRun)->Arg(1)->Arg(10)->Arg(100);

// The same closures' work without a session: each is a std::function returning a tensor handle,
// taking the previous value as an argument where the graph's op reads it through the Run.
void BM_DirectClosures(benchmark::State& state) {
  const int64_t n = state.range(0);
  const at::Tensor t = at::ones({1});
  std::vector<std::function<at::Tensor(const at::Tensor&)>> fns;
  fns.emplace_back([t](const at::Tensor&) { return t; });
  for (int64_t k = 1; k < n; ++k) fns.emplace_back([](const at::Tensor& prev) { return prev; });
  at::Tensor value;
  for (auto _ : state) {
    for (const auto& fn : fns) value = fn(value);
    benchmark::DoNotOptimize(value.unsafeGetTensorImpl());
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_DirectClosures)->Arg(1)->Arg(10)->Arg(100);

// ---- MonitoredSession step with hooks that do not fire ----------------------------------------

// A hook whose per-run calls do nothing, as a hook that acts only now and then: both are called.
struct IdleHook : th::SessionRunHook {
  th::SessionRunArgs before_run(th::SessionRunContext&) override { return {}; }
  void after_run(th::SessionRunContext&, const th::SessionRunValues&) override {}
};

// A hook that overrides neither per-run call and declares nothing, as a hook that acts only in
// begin() or end(): the session reads that from its class and never calls it per run.
struct PlainHook : th::SessionRunHook {
  void end(th::Session&) override {}
};

// A hook that also says it needs neither per-run call (SessionRunHook::calls(), the fallback).
struct DeclaredIdleHook : th::SessionRunHook {
  Calls calls() const override { return {.before_run = false, .after_run = false}; }
};

std::shared_ptr<th::SessionRunHook> idle_hook(std::string_view mode) {
  if (mode == "declared_idle_hooks") return std::make_shared<DeclaredIdleHook>();
  if (mode == "called_idle_hooks") return std::make_shared<IdleHook>();
  return std::make_shared<PlainHook>();
}

void BM_MonitoredStepIdleHooks(benchmark::State& state) {
  th::Graph g;
  const at::Tensor t = at::ones({1});
  const th::Node op = g.op("op", [t](th::Run&) { return t; });
  th::Hooks hooks;
  for (int64_t i = 0; i < state.range(0); ++i) hooks.push_back(std::make_shared<IdleHook>());
  th::MonitoredSession sess(std::make_unique<th::ChiefSessionCreator>(g), std::move(hooks));
  const th::Fetches fetches(op);
  const th::Feeds feeds;
  const th::RunOptions options;
  th::RunResults out;
  for (auto _ : state) {
    sess.run_into(fetches, feeds, options, nullptr, out);
    benchmark::DoNotOptimize(out.at(0).unsafeGetTensorImpl());
  }
}
BENCHMARK(BM_MonitoredStepIdleHooks)->Arg(0)->Arg(1)->Arg(10);

// Arg 1: the stock hooks that act now and then, attached and idle: TimeLimitHook (budget far
// away), EarlyStoppingHook (its metric never published), MetricsLoggerHook and ProfilerHook (their
// period far away). Arg 0: no hook. The difference over 4 is the idle cost per hook.
void BM_MonitoredStepIdleStockHooks(benchmark::State& state) {
  th::Graph g;
  g.global_step();
  const at::Tensor t = at::ones({1});
  const th::Node op = g.op("op", [t](th::Run&) { return t; });
  const auto dir = std::filesystem::temp_directory_path() / "session_bench_stock_hooks";
  std::filesystem::create_directories(dir);
  th::Hooks hooks;
  if (state.range(0) == 1) {
    hooks.push_back(std::make_shared<th::TimeLimitHook>(std::chrono::hours(1000)));
    hooks.push_back(std::make_shared<th::EarlyStoppingHook>(
        th::EarlyStoppingHookOptions{.monitor = "eval/loss"}));
    hooks.push_back(std::make_shared<th::MetricsLoggerHook>(
        th::MetricsLoggerHookOptions{.metrics = {"eval/loss"},
                                     .every_n_steps = int64_t{1} << 40,
                                     .path = (dir / "metrics.csv").string()}));
    hooks.push_back(std::make_shared<th::ProfilerHook>(th::ProfilerHookOptions{
        .save_steps = int64_t{1} << 40, .output_dir = (dir / "profile").string()}));
  }
  {
    th::MonitoredSession sess(std::make_unique<th::ChiefSessionCreator>(g), std::move(hooks));
    const th::Fetches fetches(op);
    const th::Feeds feeds;
    const th::RunOptions options;
    th::RunResults out;
    for (auto _ : state) {
      sess.run_into(fetches, feeds, options, nullptr, out);
      benchmark::DoNotOptimize(out.at(0).unsafeGetTensorImpl());
    }
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_MonitoredStepIdleStockHooks)->Arg(0)->Arg(1);

// ---- The seed model: MonitoredTrainingSession vs a hand-written loop --------------------------

// y = 3x + 1 + noise, 100 samples (the seed's data).
struct SeedData {
  at::Tensor xs, ys;
  SeedData() {
    at::manual_seed(0);
    xs = at::randn({100});
    ys = 3 * xs + 1 + 0.1 * at::randn({100});
  }
};

// The same math by hand: forward, zero_grad, backward, SGD step, host step counter.
struct RawLoop {
  const SeedData& data;
  at::Tensor W = at::zeros({1}).requires_grad_();
  at::Tensor b = at::zeros({1}).requires_grad_();
  torch::optim::SGD optimizer{std::vector<at::Tensor>{W, b}, torch::optim::SGDOptions(0.1)};
  int64_t step_count = 0;
  // Keeps the last loss alive into the next step, as a hook that fetches it does. LibTorch then
  // reuses the gradient accumulators, which makes the loop cheaper: the fair baseline.
  bool keep_last_loss = false;
  at::Tensor last_loss;

  // Also records the loss's value every step, as the seed's MyHook does (item()).
  bool record_value = false;
  std::vector<float> loss_values;

  // Drops the gradients instead of zeroing them (PyTorch's zero_grad(set_to_none)), as the
  // library's train op does: the same step, to tell the library's bookkeeping from that saving.
  bool drop_grads = false;

  explicit RawLoop(const SeedData& d, bool keep = false, bool value = false, bool drop = false)
      : data(d), keep_last_loss(keep), record_value(value), drop_grads(drop) {
    if (record_value) loss_values.reserve(1 << 20);  // as LossHook
  }
  void step() {
    at::Tensor y_pred = data.xs * W + b;
    at::Tensor loss = (y_pred - data.ys).square().mean();
    if (drop_grads) {
      W.mutable_grad().reset();
      b.mutable_grad().reset();
    } else {
      optimizer.zero_grad();
    }
    loss.backward();
    optimizer.step();
    ++step_count;
    if (record_value) loss_values.push_back(loss.item<float>());
    if (keep_last_loss) last_loss = std::move(loss);
  }
};

// Keeps the step counter's `global_step/sec` lines out of the benchmark output; they are still
// formatted, so their cost is counted.
struct DiscardingLogSink final : th::LogSink {
  void log(th::LogLevel, std::string_view) override {}
};

// The seed program's MyHook without its printing and its Saver: asks for the loss in every
// before_run, by value as the README writes it, and records it in after_run: the loss itself
// (kept until the next step, as `raw_keep` keeps its own) or, with `record_value`, its value
// through item() as MyHook does.
struct LossHook : th::SessionRunHook {
  th::Node loss;
  bool record_value = false;
  at::Tensor last_loss;
  std::vector<float> loss_values;
  LossHook(th::Node l, bool value) : loss(l), record_value(value) {
    // More than any run's steps, so that recording never reallocates.
    if (record_value) loss_values.reserve(1 << 20);
  }
  th::SessionRunArgs before_run(th::SessionRunContext&) override { return {{loss}}; }
  void after_run(th::SessionRunContext&, const th::SessionRunValues& v) override {
    if (record_value) {
      loss_values.push_back(v.results[loss].item<float>());
    } else {
      last_loss = v.results[loss];
    }
  }
};

// The seed program as a graph, run by MonitoredTrainingSession with the default hooks (a
// StepCounterHook every 100 steps), with the seed's loss-fetching hook as well (`with_hook`), or,
// to split the overhead, by a bare Session.
struct GraphLoop {
  const SeedData& data;
  th::Graph g;
  th::Node x, y, W, b, y_pred, loss, train;
  std::unique_ptr<th::MonitoredTrainingSession> sess;
  std::unique_ptr<th::Session> bare;
  // Feeds and results built once, for step_into() and step_bare().
  th::Feeds feeds;
  th::RunResults out;

  std::shared_ptr<LossHook> hook;

  enum class Hook { kNone, kKeepLoss, kRecordValue };
  GraphLoop(const SeedData& d, bool monitored, Hook with = Hook::kNone) : data(d) {
    x = g.placeholder("x", {.dtype = at::kFloat, .shape = {-1}});
    y = g.placeholder("y", {.dtype = at::kFloat, .shape = {-1}});
    W = g.variable("W", at::zeros({1}));
    b = g.variable("b", at::zeros({1}));
    const th::Node xn = x, yn = y, Wn = W, bn = b;
    y_pred = g.op("y_pred", [=](th::Run& r) { return r[xn] * r[Wn] + r[bn]; });
    const th::Node pn = y_pred;
    loss = g.op("loss", [=](th::Run& r) { return (r[pn] - r[yn]).square().mean(); });
    train = g.minimize("train", loss, th::sgd(0.1));
    if (monitored) {
      th::Env env{.log = std::make_shared<DiscardingLogSink>()};
      th::Hooks hooks;
      if (with != Hook::kNone) {
        hook = std::make_shared<LossHook>(loss, with == Hook::kRecordValue);
        hooks.push_back(hook);
      }
      sess = std::make_unique<th::MonitoredTrainingSession>(
          g, th::MonitoredTrainingSessionOptions{.hooks = std::move(hooks), .env = env});
    } else {
      g.initialize();
      bare = std::make_unique<th::Session>(g);
    }
    feeds = {{x, data.xs}, {y, data.ys}};
  }
  // As the seed writes it: `for (...; !sess.should_stop(); ...) sess.run(train_op, feeds)`.
  void step() {
    if (!sess->should_stop()) sess->run(train, {{x, data.xs}, {y, data.ys}});
  }
  void step_into() { sess->run_into(train, feeds, {}, nullptr, out); }
  void step_bare() { bare->run_into(train, feeds, {}, nullptr, out); }
};

struct SeedPair {
  SeedData data;
  RawLoop raw{data};
  RawLoop raw_keep{data, true};
  GraphLoop mts{data, true};
  GraphLoop bare{data, false};
};

// Shared by every call of the benchmark functions so both programs stay warm.
std::unique_ptr<SeedPair> g_seed;

SeedPair& seed() {
  if (!g_seed) {
    g_seed = std::make_unique<SeedPair>();
    for (int i = 0; i < 300; ++i) {
      g_seed->raw.step();
      g_seed->raw_keep.step();
      g_seed->mts.step();
      g_seed->mts.step_into();
      g_seed->bare.step_bare();
    }
  }
  return *g_seed;
}

double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Elapsed {
  double wall = 0;
  double cpu = 0;  // this thread's: time the scheduler gave to other processes is left out
};

template <typename Fn>
Elapsed elapsed_of(Fn&& fn) {
  const auto wall_start = std::chrono::steady_clock::now();
  const double cpu_start = thread_cpu_seconds();
  fn();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count(),
          thread_cpu_seconds() - cpu_start};
}

// Each iteration trains one block of 100 steps with each program, alternating which goes first,
// so slow phases of a shared machine hit both. A block holds exactly one step-counter trigger.
// Counters: wall and thread-CPU ns per step of each program, the ratios of their totals, and the
// medians of the per-block ratios (less sensitive to a burst of load on one block). LibTorch runs
// these small ops and their backward pass on the calling thread, so its CPU time is the whole cost.
void BM_SeedInterleaved(benchmark::State& state) {
  constexpr int kBlock = 100;
  SeedPair& s = seed();
  const int64_t variant = state.range(0);
  RawLoop& baseline = variant == 3 ? s.raw_keep : s.raw;
  Elapsed raw_total, mts_total;
  std::vector<double> ratios, cpu_ratios;
  int64_t i = 0;
  for (auto _ : state) {
    auto raw_block = [&] {
      for (int k = 0; k < kBlock; ++k) baseline.step();
    };
    auto mts_block = [&] {
      switch (variant) {
        case 0:
        case 3:
          for (int k = 0; k < kBlock; ++k) s.mts.step();
          break;
        case 1:
          for (int k = 0; k < kBlock; ++k) s.mts.step_into();
          break;
        default:
          for (int k = 0; k < kBlock; ++k) s.bare.step_bare();
      }
    };
    Elapsed raw, mts;
    if (i++ % 2 == 0) {
      raw = elapsed_of(raw_block);
      mts = elapsed_of(mts_block);
    } else {
      mts = elapsed_of(mts_block);
      raw = elapsed_of(raw_block);
    }
    raw_total.wall += raw.wall;
    raw_total.cpu += raw.cpu;
    mts_total.wall += mts.wall;
    mts_total.cpu += mts.cpu;
    ratios.push_back(mts.wall / raw.wall);
    cpu_ratios.push_back(mts.cpu / raw.cpu);
  }
  const double steps = static_cast<double>(state.iterations()) * kBlock;
  auto median = [](std::vector<double>& v) {
    if (v.empty()) return 0.0;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  state.counters["raw_ns"] = raw_total.wall / steps * 1e9;
  state.counters["mts_ns"] = mts_total.wall / steps * 1e9;
  state.counters["ratio"] = mts_total.wall / raw_total.wall;
  state.counters["block_ratio_median"] = median(ratios);
  state.counters["raw_cpu_ns"] = raw_total.cpu / steps * 1e9;
  state.counters["mts_cpu_ns"] = mts_total.cpu / steps * 1e9;
  state.counters["cpu_ratio"] = mts_total.cpu / raw_total.cpu;
  state.counters["block_cpu_ratio_median"] = median(cpu_ratios);
}
// 0: sess.run(train_op, {{x, xs}, {y, ys}}) as in the seed; 1: run_into with reused feeds;
// 2: a bare Session's run_into (no monitored session, no hooks), in place of the monitored one;
// 3: as 0, against the loop that keeps its last loss (the fair baseline; 0-2 use the one that
// drops it).
BENCHMARK(BM_SeedInterleaved)->Arg(0)->Arg(1)->Arg(2)->Arg(3)->Unit(benchmark::kMillisecond);

// ---- Driver for instruction counting ----------------------------------------------------------

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// The micro benchmarks' loops for counting instructions: `steps` runs of an n-node chain through
// a bare Session (chain) or as plain closures (direct), or of a one-node graph through a
// MonitoredSession with n idle hooks (idle_hooks: overriding neither per-run call;
// declared_idle_hooks: also declaring it; called_idle_hooks: both overridden, doing nothing).
int micro_driver(int64_t steps, std::string_view mode, int64_t n) {
  if (mode == "chain") {
    Chain chain(n);
    th::Session sess(chain.g);
    const th::Fetches fetches(chain.last);
    const th::Feeds feeds;
    th::RunResults out;
    for (int64_t i = 0; i < steps; ++i) {
      sess.run_into(fetches, feeds, {}, nullptr, out);
      benchmark::DoNotOptimize(out.at(0).unsafeGetTensorImpl());
    }
  } else if (mode == "direct") {
    const at::Tensor t = at::ones({1});
    std::vector<std::function<at::Tensor(const at::Tensor&)>> fns;
    fns.emplace_back([t](const at::Tensor&) { return t; });
    for (int64_t k = 1; k < n; ++k) fns.emplace_back([](const at::Tensor& prev) { return prev; });
    at::Tensor value;
    for (int64_t i = 0; i < steps; ++i) {
      for (const auto& fn : fns) value = fn(value);
      benchmark::DoNotOptimize(value.unsafeGetTensorImpl());
      benchmark::ClobberMemory();
    }
  } else {
    th::Graph g;
    const at::Tensor t = at::ones({1});
    const th::Node op = g.op("op", [t](th::Run&) { return t; });
    th::Hooks hooks;
    for (int64_t i = 0; i < n; ++i) hooks.push_back(idle_hook(mode));
    th::MonitoredSession sess(std::make_unique<th::ChiefSessionCreator>(g), std::move(hooks));
    const th::Fetches fetches(op);
    const th::Feeds feeds;
    th::RunResults out;
    for (int64_t i = 0; i < steps; ++i) {
      sess.run_into(fetches, feeds, {}, nullptr, out);
      benchmark::DoNotOptimize(out.at(0).unsafeGetTensorImpl());
    }
  }
  std::printf("%s: %lld runs of %lld\n", std::string(mode).c_str(), static_cast<long long>(steps),
              static_cast<long long>(n));
  return 0;
}

int seed_driver(int64_t steps, std::string_view mode) {
  SeedData data;
  if (mode == "raw" || mode == "raw_keep" || mode == "raw_keep_value" || mode == "raw_keep_none") {
    RawLoop raw(data, mode != "raw", mode == "raw_keep_value", mode == "raw_keep_none");
    for (int64_t i = 0; i < steps; ++i) raw.step();
    std::printf("raw: %lld steps, W = %f\n", static_cast<long long>(raw.step_count),
                raw.W.item<float>());
  } else if (mode == "seed_hook" || mode == "seed_hook_value") {
    GraphLoop mts(data, true,
                  mode == "seed_hook" ? GraphLoop::Hook::kKeepLoss : GraphLoop::Hook::kRecordValue);
    for (int64_t i = 0; i < steps; ++i) mts.step();
    std::printf("%s: %lld steps, W = %f\n", std::string(mode).c_str(),
                static_cast<long long>(mts.g.global_step_value()),
                mts.g.variable_value(mts.W).item<float>());
  } else if (mode == "mts" || mode == "mts_into") {
    GraphLoop mts(data, true);
    const bool reuse = mode == "mts_into";
    for (int64_t i = 0; i < steps; ++i) reuse ? mts.step_into() : mts.step();
    std::printf("%s: %lld steps, W = %f\n", std::string(mode).c_str(),
                static_cast<long long>(mts.g.global_step_value()),
                mts.g.variable_value(mts.W).item<float>());
  } else if (mode == "session") {
    GraphLoop bare(data, false);
    for (int64_t i = 0; i < steps; ++i) bare.step_bare();
    std::printf("session: %lld steps, W = %f\n", static_cast<long long>(bare.g.global_step_value()),
                bare.g.variable_value(bare.W).item<float>());
  } else {
    std::fprintf(stderr,
                 "unknown --mode=%s (raw, raw_keep, raw_keep_value, raw_keep_none, seed_hook, "
                 "seed_hook_value, mts, mts_into or session)\n",
                 std::string(mode).c_str());
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t seed_steps = -1;
  int64_t n = 1;
  std::string_view mode = "mts";
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (starts_with(arg, "--seed-steps=")) seed_steps = std::atoll(argv[i] + 13);
    if (starts_with(arg, "--mode=")) mode = arg.substr(7);
    if (starts_with(arg, "--n=")) n = std::atoll(argv[i] + 4);
  }
  if (seed_steps >= 0 && (mode == "chain" || mode == "direct" || mode == "idle_hooks" ||
                          mode == "declared_idle_hooks" || mode == "called_idle_hooks"))
    return micro_driver(seed_steps, mode, n);
  if (seed_steps >= 0) return seed_driver(seed_steps, mode);

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  g_seed.reset();
  return 0;
}
