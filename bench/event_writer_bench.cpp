// Event writer costs: scalar events per second through the writer thread into a file, the time
// add_scalar takes on the calling thread, and the pieces behind them (encoding, CRC32C,
// histograms). Files go to a fresh directory under /tmp, removed afterwards.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "summary/event_encoding.h"
#include "trainhooks/summary/event_writer.h"
#include "trainhooks/summary/summary.h"
#include "util/crc32c.h"

namespace {

namespace fs = std::filesystem;
using trainhooks::summary::EventWriter;

struct BenchDir {
  BenchDir() : path(fs::path("/tmp") / ("trainhooks_event_bench_" + std::to_string(getpid()))) {
    fs::remove_all(path);
  }
  ~BenchDir() { fs::remove_all(path); }
  fs::path path;
};

// Events per second through the whole pipeline: each iteration adds a burst of scalars and
// flushes, so the time covers the caller, the queue, encoding, framing and write(2).
void BM_WriterThroughput(benchmark::State& state) {
  BenchDir dir;
  EventWriter writer(dir.path, {.max_queue = static_cast<int>(state.range(0))});
  constexpr int kBurst = 100000;
  int64_t step = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kBurst; ++i, ++step) writer.add_scalar("train/loss", 0.5f, step);
    writer.flush();
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  state.SetItemsProcessed(state.iterations() * kBurst);
  writer.close();
  state.counters["file_MB"] = static_cast<double>(fs::file_size(writer.file_path())) / 1e6;
}
BENCHMARK(BM_WriterThroughput)
    ->Arg(10)
    ->Arg(100)
    ->Arg(4096)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// The same with several threads adding at once (one tag each) through the default queue.
void BM_WriterThroughputThreads(benchmark::State& state) {
  BenchDir dir;
  EventWriter writer(dir.path);
  const int threads = static_cast<int>(state.range(0));
  constexpr int kBurst = 100000;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&writer, t, threads] {
        const std::string tag = "thread" + std::to_string(t);
        for (int i = 0; i < kBurst / threads; ++i) writer.add_scalar(tag, 0.5f, i);
      });
    }
    for (auto& w : workers) w.join();
    writer.flush();
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  state.SetItemsProcessed(state.iterations() * kBurst);
}
BENCHMARK(BM_WriterThroughputThreads)
    ->Arg(2)
    ->Arg(4)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// Calling-thread cost of add_scalar while the writer keeps up (a queue that never fills).
void BM_AddScalarCallerCost(benchmark::State& state) {
  BenchDir dir;
  EventWriter writer(dir.path, {.max_queue = 1 << 20});
  int64_t step = 0;
  for (auto _ : state) writer.add_scalar("train/loss", 0.5f, step++);
  state.SetItemsProcessed(state.iterations());
  writer.close();  // after the timed loop
}
BENCHMARK(BM_AddScalarCallerCost)->Iterations(1'000'000);

// Encoding plus framing of one scalar event on the writer thread.
void BM_EncodeScalarEvent(benchmark::State& state) {
  std::string buffer;
  buffer.reserve(1 << 20);
  int64_t step = 0;
  for (auto _ : state) {
    if (buffer.size() > (1 << 20) - 128) buffer.clear();
    trainhooks::summary::append_scalar_event(buffer, 1.7e9, step++, "train/loss", 0.5f, false);
  }
  benchmark::DoNotOptimize(buffer.data());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EncodeScalarEvent);

void BM_Crc32c(benchmark::State& state) {
  namespace crc32c = trainhooks::crc32c;
  if (state.range(1) == 1 && !crc32c::has_hardware()) {
    state.SkipWithError("no SSE4.2");
    return;
  }
  const auto fn = state.range(1) == 1 ? crc32c::extend_hardware : crc32c::extend_portable;
  std::string data(static_cast<size_t>(state.range(0)), 'x');
  for (auto _ : state) benchmark::DoNotOptimize(fn(0, data.data(), data.size()));
  state.SetBytesProcessed(state.iterations() * state.range(0));
  state.SetLabel(state.range(1) == 1 ? "sse4.2" : "portable");
}
BENCHMARK(BM_Crc32c)->Args({40, 0})->Args({40, 1})->Args({65536, 0})->Args({65536, 1});

// A histogram of a 1M-element tensor, encoded on the calling thread.
void BM_HistogramSummary(benchmark::State& state) {
  at::Tensor values = at::randn({state.range(0)});
  for (auto _ : state) {
    trainhooks::summary::Summary s;
    s.add_histogram("weights", values);
    benchmark::DoNotOptimize(s.size());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_HistogramSummary)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
