// `trainhooks board` at scale: a log directory of `runs` runs, each with one event per step
// holding `tags` scalars, read by LogdirIndex and served by BoardApi. Measures
//   - the first LogdirIndex::refresh() (everything read), GET /api/runs while it reads, and a
//     refresh with nothing new;
//   - GET /api/runs (the run and tag list the page asks for first);
//   - GET /api/scalars of one series of `steps` points, downsampled to the default 2000 points
//     and in full (max_points=100000);
//   - the process's peak resident memory after the load (VmHWM).
// The goals: the tag list in under 1 s, a 100k-point series in under 0.5 s, memory
// bounded by the scalar points kept (20 bytes each).
//
//   board_bench --logdir /tmp/board_bench_logdir [--runs 20 --tags 50 --steps 100000]
//               [--generate]
//
// The log directory is written once (by EventWriter) and reused while its marker file records
// the same sizes; --generate writes it again.
#include <sys/resource.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "trainhooks/board/board_api.h"
#include "trainhooks/board/logdir_index.h"
#include "trainhooks/summary/event_writer.h"

namespace fs = std::filesystem;
namespace board = trainhooks::board;
namespace summary = trainhooks::summary;

namespace {

constexpr const char* kMarker = "board_bench_logdir.txt";

struct Args {
  fs::path logdir;
  int runs = 20;
  int tags = 50;
  int64_t steps = 100000;
  bool generate = false;
};

[[noreturn]] void usage(const std::string& error) {
  std::fprintf(stderr,
               "%s\nusage: board_bench --logdir DIR [--runs 20] [--tags 50] [--steps 100000] "
               "[--generate]\n",
               error.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--logdir") {
      a.logdir = value();
    } else if (arg == "--runs") {
      a.runs = std::stoi(value());
    } else if (arg == "--tags") {
      a.tags = std::stoi(value());
    } else if (arg == "--steps") {
      a.steps = std::stoll(value());
    } else if (arg == "--generate") {
      a.generate = true;
    } else {
      usage("unknown argument " + arg);
    }
  }
  if (a.logdir.empty()) usage("--logdir is required");
  if (a.runs < 1 || a.tags < 1 || a.steps < 1) usage("--runs, --tags and --steps must be >= 1");
  return a;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string run_name(int r) { return fmt::format("run_{:02}", r); }
std::string tag_name(int t) { return fmt::format("metric_{:02}/value", t); }

std::string marker_text(const Args& a) {
  return fmt::format("runs {} tags {} steps {}\n", a.runs, a.tags, a.steps);
}

bool reusable(const Args& a) {
  std::ifstream in(a.logdir / kMarker);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return text == marker_text(a);
}

// One event per step per run, holding every tag's scalar; runs written two at a time.
void generate(const Args& a) {
  std::error_code ec;
  fs::remove(a.logdir / kMarker, ec);
  for (int r = 0; r < a.runs; ++r) fs::remove_all(a.logdir / run_name(r), ec);
  fs::create_directories(a.logdir);
  const double start = now();
  auto write_runs = [&](int first) {
    for (int r = first; r < a.runs; r += 2) {
      summary::EventWriter writer(a.logdir / run_name(r), {.max_queue = 1000, .flush_secs = 30});
      for (int64_t step = 1; step <= a.steps; ++step) {
        summary::Summary s;
        for (int t = 0; t < a.tags; ++t) {
          // A noisy decaying curve, different per run and tag.
          const double x = static_cast<double>(step) / static_cast<double>(a.steps);
          s.add_scalar(tag_name(t), static_cast<float>((1 + t) * std::exp(-3 * x) +
                                                       0.05 * std::sin(step * 0.37 + r + t)));
        }
        writer.add_summary(std::move(s), step);
      }
    }
  };
  std::thread second(write_runs, 1);
  write_runs(0);
  second.join();
  std::ofstream(a.logdir / kMarker) << marker_text(a);
  uint64_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(a.logdir)) {
    if (e.is_regular_file()) bytes += e.file_size();
  }
  std::printf("generated %s: %d runs x %d tags x %lld steps, %.2f GB in %.1f s\n", a.logdir.c_str(),
              a.runs, a.tags, static_cast<long long>(a.steps), bytes / 1e9, now() - start);
}

// VmHWM / VmRSS of this process in MiB.
double status_mib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0)
      return std::strtod(line.c_str() + std::strlen(field) + 1, nullptr) / 1024;
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024;
}

struct Timing {
  double median = 0, min = 0, max = 0;
  size_t bytes = 0;
  int status = 0;
};

Timing time_request(const board::BoardApi& api, const std::string& path,
                    const std::map<std::string, std::string>& query, int repeats) {
  std::vector<double> seconds;
  Timing t;
  for (int i = 0; i < repeats; ++i) {
    const double start = now();
    const board::ApiResponse response = api.handle(path, query);
    seconds.push_back(now() - start);
    t.bytes = response.body.size();
    t.status = response.status;
  }
  std::sort(seconds.begin(), seconds.end());
  t.median = seconds[seconds.size() / 2];
  t.min = seconds.front();
  t.max = seconds.back();
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (a.generate || !reusable(a)) {
    if (!a.generate && fs::exists(a.logdir) && !fs::is_empty(a.logdir) &&
        !fs::exists(a.logdir / kMarker)) {
      usage(a.logdir.string() +
            " holds something else; pass --generate to write its run_* "
            "directories anyway");
    }
    generate(a);
  } else {
    std::printf("reusing %s: %s", a.logdir.c_str(), marker_text(a).c_str());
  }

  const double rss_before = status_mib("VmRSS:");
  board::LogdirIndex index(a.logdir);
  board::BoardApi api(index);
  // While the first refresh reads, the page keeps asking for the run list: how long it waits.
  std::atomic<bool> loaded{false};
  std::vector<double> waits;
  std::thread poller([&] {
    while (!loaded) {
      const double t = now();
      api.handle("/api/runs", {});
      waits.push_back(now() - t);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  double start = now();
  const board::RefreshStats first = index.refresh();
  const double load = now() - start;
  loaded = true;
  poller.join();
  std::sort(waits.begin(), waits.end());
  const double hwm = status_mib("VmHWM:");
  const double rss = status_mib("VmRSS:");
  start = now();
  const board::RefreshStats again = index.refresh();
  const double idle_refresh = now() - start;

  const Timing runs = time_request(api, "/api/runs", {}, 5);
  const std::map<std::string, std::string> series{{"run", run_name(0)}, {"tag", tag_name(0)}};
  auto full = series;
  full["max_points"] = "100000";
  const Timing downsampled = time_request(api, "/api/scalars", series, 5);
  const Timing whole = time_request(api, "/api/scalars", full, 5);
  std::vector<double> copies;
  for (int i = 0; i < 5; ++i) {
    start = now();
    const board::ScalarSeries s = index.scalars(run_name(0), tag_name(0));
    copies.push_back(now() - start);
  }
  std::sort(copies.begin(), copies.end());

  const int64_t points = static_cast<int64_t>(a.runs) * a.tags * a.steps;
  std::printf("\n%d runs x %d tags x %lld steps = %lld scalar points (%.0f MiB at 20 B each)\n",
              a.runs, a.tags, static_cast<long long>(a.steps), static_cast<long long>(points),
              points * 20.0 / (1 << 20));
  std::printf("%-44s %12s %s\n", "measurement", "value", "notes");
  std::printf("%-44s %10.2f s  %lld records, %lld runs, %lld files (%.0f records/s)\n",
              "first refresh (everything read)", load, static_cast<long long>(first.records),
              static_cast<long long>(first.new_runs), static_cast<long long>(first.new_files),
              first.records / load);
  std::printf("%-44s %10.2f ms median; max %.2f ms of %zu calls\n",
              "GET /api/runs during the first refresh", waits[waits.size() / 2] * 1e3,
              waits.back() * 1e3, waits.size());
  std::printf("%-44s %10.2f ms %lld records\n", "refresh with nothing new", idle_refresh * 1e3,
              static_cast<long long>(again.records));
  auto row = [](const char* name, const Timing& t) {
    std::printf("%-44s %10.2f ms status %d, %zu bytes, min %.2f max %.2f ms (5 calls)\n", name,
                t.median * 1e3, t.status, t.bytes, t.min * 1e3, t.max * 1e3);
  };
  row("GET /api/runs", runs);
  row("GET /api/scalars (downsampled to 2000)", downsampled);
  row("GET /api/scalars max_points=100000", whole);
  std::printf("%-44s %10.2f ms median of 5\n", "LogdirIndex::scalars() copy of one series",
              copies[copies.size() / 2] * 1e3);
  std::printf("%-44s %10.0f MiB VmRSS %.0f MiB after the load, %.0f MiB before it\n",
              "peak resident memory (VmHWM)", hwm, rss, rss_before);
  // One line for scripts/bench.sh.
  std::printf(
      "json: {\"points\": %lld, \"load_s\": %.3f, \"runs_ms\": %.3f, "
      "\"runs_during_load_max_ms\": %.3f, \"series_2000_ms\": %.3f, \"series_100k_ms\": %.3f, "
      "\"hwm_mib\": %.0f, \"before_mib\": %.0f}\n",
      static_cast<long long>(points), load, runs.median * 1e3, waits.back() * 1e3,
      downsampled.median * 1e3, whole.median * 1e3, hwm, rss_before);
  return 0;
}
