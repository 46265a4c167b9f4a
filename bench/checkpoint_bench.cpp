// Checkpoint speed against the design budgets, measured in one run on one disk:
//   synchronous save throughput / `dd` sequential write throughput (conv=fsync), budget >= 0.70
//   asynchronous-save stall (Saver::snapshot) / an in-memory copy of the same tensors, budget <= 2
//   restore time / `cat` of the same two files to /dev/null, budget <= 1.5
// for training states (variables + SGD momentum, half each) of about 1 MB, 100 MB and 1 GB.
//
//   checkpoint_bench [--dir DIR] [--sizes-mb 1,100,1024] [--repetitions 3] [--save-only 1]
//
// DIR (default: the current directory) must be on the disk to measure; the checkpoints and dd's
// file are written in a fresh directory inside it, removed at the end. Each repetition runs dd,
// save, snapshot + write and copy in turn, so a slow phase of a shared machine hits all of them;
// the medians are reported. Restore is then timed against `cat` of the last checkpoint's files
// (both in the page cache, as they are right after a save), alternating the two and the order of
// each pair, at least 9 pairs: the ratio of each pair, their median and range are reported, not
// absolute speeds, which on a shared machine say more about its neighbours; next to each pair, two
// floors against the same `cat` (RestoreFloor, FreshReadFloor). States under 16 MB repeat 20 times
// as often.
//
// Besides the human table, one line per state size starting with "json: " gives each
// repetition's ratios (save/dd, stall/copy, restore/cat, each of two phases measured next to each
// other) and times, for scripts/bench.sh's budget table: ratios of neighbouring measurements are
// what a shared virtual disk lets one compare, so the table takes the ratios, never the MB/s.
//
// --save-only 1 runs only the synchronous saves (for a profiler); --restore-only 1 saves once and
// runs only the restore pairs (restore against cat, and the floor).
#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <torch/optim/sgd.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "trainhooks/checkpoint/tf1_saver.h"
#include "trainhooks/graph.h"
#include "trainhooks/optimizers.h"
#include "trainhooks/session.h"

namespace th = trainhooks;
namespace fs = std::filesystem;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");  // a phase that did not run (--restore-only)
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A JSON array of the values, enough digits for ratios and seconds.
std::string json_array(const std::vector<double>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += fmt::format("{}{:.6g}", i ? ", " : "", v[i]);
  return out + "]";
}

uint64_t file_size_or_zero(const fs::path& p) {
  std::error_code ec;
  auto n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

// A graph whose state is `bytes` in all: four float variables and their SGD momentum buffers.
struct State {
  explicit State(uint64_t bytes) {
    const int64_t per_var = static_cast<int64_t>(bytes / 8 / 4);  // 4 variables, 2 copies, floats
    std::vector<th::Node> vars;
    for (int i = 0; i < 4; ++i)
      vars.push_back(g.variable(fmt::format("layer{}/weight", i), at::rand({per_var})));
    loss = g.op("loss", [vars](th::Run& r) {
      at::Tensor sum = r[vars[0]].sum();
      for (size_t i = 1; i < vars.size(); ++i) sum = sum + r[vars[i]].sum();
      return sum;
    });
    train = g.minimize("train", loss, th::sgd(0.01, {.momentum = 0.9}));
    g.initialize();
    sess = std::make_unique<th::Session>(g);
    sess->run({train});  // the momentum buffers exist from the first step on
  }
  // The tensors a checkpoint holds (variables and momentum buffers).
  std::vector<at::Tensor> tensors() {
    std::vector<at::Tensor> out;
    for (th::Node v : g.variables()) out.push_back(g.variable_value(v));
    for (auto& [key, s] : g.optimizer(train).state()) {
      (void)key;
      out.push_back(static_cast<torch::optim::SGDParamState&>(*s).momentum_buffer());
    }
    return out;
  }
  th::Graph g;
  th::Node loss, train;
  std::unique_ptr<th::Session> sess;
};

double run_dd(const fs::path& dir, uint64_t mb) {
  const fs::path file = dir / "dd.out";
  const std::string cmd = fmt::format(
      "dd if=/dev/zero of='{}' bs=1M count={} conv=fsync status=none", file.string(), mb);
  const double t0 = now();
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "checkpoint_bench: '%s' failed\n", cmd.c_str());
    std::exit(1);
  }
  const double t = now() - t0;
  fs::remove(file);
  return t;
}

// `cat` of the files to /dev/null, as a shell runs it.
double run_cat(const std::vector<std::string>& files) {
  std::string cmd = "cat";
  for (const auto& f : files) cmd += fmt::format(" '{}'", f);
  cmd += " > /dev/null";
  const double t0 = now();
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "checkpoint_bench: '%s' failed\n", cmd.c_str());
    std::exit(1);
  }
  return now() - t0;
}

// The least an all-or-nothing restore that copies into the variables' own memory can cost: the
// files read with read(2) into memory that is already mapped (no page faults), then one copy of
// those bytes into other mapped memory (the variables). The restore no longer copies: its
// variables take the memory it read into (FreshReadFloor below is its floor); this row stays for
// comparison. `cat` reads into a small buffer that stays in the CPU's cache and copies nothing.
struct RestoreFloor {
  std::vector<char> staging, variables;
  double run(const std::vector<std::string>& files) {
    size_t total = 0;
    for (const auto& f : files) total += file_size_or_zero(f);
    if (staging.size() < total) {  // touched once, outside the timing
      staging.assign(total, 1);
      variables.assign(total, 1);
    }
    const double t0 = now();
    size_t at = 0;
    for (const auto& f : files) {
      const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        std::fprintf(stderr, "checkpoint_bench: cannot open %s\n", f.c_str());
        std::exit(1);
      }
      ssize_t got;
      while ((got = ::read(fd, staging.data() + at, std::min<size_t>(1 << 20, total - at))) > 0)
        at += static_cast<size_t>(got);
      ::close(fd);
    }
    std::memcpy(variables.data(), staging.data(), at);
    return now() - t0;
  }
};

// The least a restore into new storage can do, as the restore reads (checkpoint/format/trainhooks/
// file_bytes.cpp): read(2) of the files into memory mapped for them, 2 MiB-aligned with huge pages
// advised, no copy. As a restore, it holds the previous run's memory (the variables' storage a
// restore replaces) until the files are read, then frees it: its first touch of new memory is what
// `cat` does not pay.
struct FreshReadFloor {
  struct Mapping {
    void* map;
    size_t length;
  };
  std::vector<Mapping> held;
  ~FreshReadFloor() { release(held); }
  static void release(const std::vector<Mapping>& maps) {
    for (const Mapping& m : maps) ::munmap(m.map, m.length);
  }
  double run(const std::vector<std::string>& files) {
    constexpr size_t kHuge = size_t{2} << 20;
    const double t0 = now();
    std::vector<Mapping> maps;
    for (const auto& f : files) {
      const size_t size = file_size_or_zero(f);
      const size_t length = size + kHuge;
      void* map =
          ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (map == MAP_FAILED) {
        std::fprintf(stderr, "checkpoint_bench: mmap of %zu bytes failed\n", length);
        std::exit(1);
      }
      maps.push_back({map, length});
      char* base =
          reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(map) + kHuge - 1) & ~(kHuge - 1));
      ::madvise(base, size, MADV_HUGEPAGE);
      const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        std::fprintf(stderr, "checkpoint_bench: cannot open %s\n", f.c_str());
        std::exit(1);
      }
      size_t at = 0;
      ssize_t got;
      while (at < size && (got = ::read(fd, base + at, std::min<size_t>(1 << 20, size - at))) > 0)
        at += static_cast<size_t>(got);
      ::close(fd);
    }
    release(held);
    held = std::move(maps);
    return now() - t0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  fs::path dir;
  std::vector<uint64_t> sizes_mb{1, 100, 1024};
  int reps = 3;
  bool save_only = false;     // profiling aid: only the synchronous saves
  bool restore_only = false;  // one save, then only the restore pairs
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--dir") {
      dir = value;
    } else if (flag == "--sizes-mb") {
      sizes_mb.clear();
      size_t pos = 0;
      while (pos <= value.size()) {
        size_t comma = value.find(',', pos);
        if (comma == std::string::npos) comma = value.size();
        sizes_mb.push_back(std::stoull(value.substr(pos, comma - pos)));
        pos = comma + 1;
      }
    } else if (flag == "--save-only") {
      save_only = value == "1";
    } else if (flag == "--restore-only") {
      restore_only = value == "1";
    } else if (flag == "--repetitions") {
      reps = std::max(1, std::atoi(value.c_str()));
    } else {
      std::fprintf(stderr,
                   "usage: checkpoint_bench [--dir DIR] [--sizes-mb 1,100,1024] "
                   "[--repetitions 3]\n");
      return 2;
    }
  }
  if (dir.empty()) dir = fs::current_path();
  dir /= fmt::format("checkpoint_bench.{}", ::getpid());
  fs::create_directories(dir);

  fmt::print("Checkpoint benchmark in {} ({} repetitions, medians)\n", dir.string(), reps);
  fmt::print("{:>8} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7} {:>10} {:>9} {:>10} {:>7} {:>13}\n",
             "state", "dd MB/s", "save MB/s", "ratio", "copy ms", "stall ms", "ratio", "write ms",
             "cat ms", "restore ms", "ratio", "range");
  bool all_met = true;
  for (uint64_t mb : sizes_mb) {
    State s(mb << 20);
    th::compat::v1::Saver saver(s.g, {.max_to_keep = 1});
    const std::string prefix = (dir / "model.ckpt").string();
    std::vector<double> dd, save, copy, stall, write, cat, restore, restore_ratio;
    std::vector<double> save_ratio, stall_ratio;  // per repetition: neighbours in time
    std::vector<double> floor_ratio;              // RestoreFloor / cat, neighbours in time
    std::vector<double> fresh_ratio;              // FreshReadFloor / cat, neighbours in time
    RestoreFloor restore_floor;
    FreshReadFloor fresh_floor;
    uint64_t bytes = 0;
    int64_t step = 0;
    // Small states take a fraction of a millisecond: more repetitions steady their medians.
    const int state_reps = mb < 16 ? reps * 20 : reps;
    if (restore_only) {
      const std::string path = saver.save(*s.sess, prefix, ++step);
      bytes = file_size_or_zero(path) + file_size_or_zero(path + ".trainstate");
    }
    for (int r = 0; r < (restore_only ? 0 : state_reps); ++r) {
      if (save_only) {
        saver.save(*s.sess, prefix, ++step);
        continue;
      }
      dd.push_back(run_dd(dir, mb));

      double t0 = now();
      const std::string path = saver.save(*s.sess, prefix, ++step);
      save.push_back(now() - t0);
      bytes = file_size_or_zero(path) + file_size_or_zero(path + ".trainstate");

      t0 = now();
      th::SaverSnapshot snap = saver.snapshot(*s.sess, prefix, ++step);
      stall.push_back(now() - t0);
      t0 = now();
      saver.write(std::move(snap));
      write.push_back(now() - t0);

      t0 = now();
      {
        std::vector<at::Tensor> copies;
        for (const auto& t : s.tensors()) copies.push_back(t.clone());
      }
      copy.push_back(now() - t0);
      // Save rate over dd's rate: (state bytes / save time) / (dd bytes / dd time).
      save_ratio.push_back(static_cast<double>(bytes) / (1 << 20) / save.back() /
                           (static_cast<double>(mb) / dd.back()));
      stall_ratio.push_back(stall.back() / copy.back());
    }
    if (save_only) continue;
    // Restore against cat, interleaved: pairs in alternating order.
    const std::string path = fmt::format("{}-{}", prefix, step);
    const std::vector<std::string> files{path, path + ".trainstate"};
    const int pairs = std::max(state_reps, mb < 16 ? 100 : 9);
    for (int r = 0; r < pairs; ++r) {
      double c = 0, t = 0;
      for (int k = 0; k < 2; ++k) {
        if ((k == 0) == (r % 2 == 0)) {
          c = run_cat(files);
        } else {
          const double t0 = now();
          saver.restore(*s.sess, path);
          t = now() - t0;
        }
      }
      cat.push_back(c);
      restore.push_back(t);
      restore_ratio.push_back(t / c);
      floor_ratio.push_back(restore_floor.run(files) / c);
      fresh_ratio.push_back(fresh_floor.run(files) / c);
    }
    const double state_mb = static_cast<double>(bytes) / (1 << 20);
    const double dd_rate = static_cast<double>(mb) / median(dd);
    const double save_rate = state_mb / median(save);
    // The ratios are medians of each repetition's ratio (as in the JSON line), not ratios of the
    // medians: each repetition's two phases ran next to each other on the same disk.
    const double save_dd = median(save_ratio);
    const double stall_copy = median(stall_ratio);
    const double cat_ratio = median(restore_ratio);
    all_met = all_met && save_dd >= 0.70 && stall_copy <= 2.0 && cat_ratio <= 1.5;
    fmt::print(
        "{:>6.0f}MB {:>10.0f} {:>10.0f} {:>7.2f} {:>10.2f} {:>10.2f} {:>7.2f} {:>10.1f} "
        "{:>9.2f} {:>10.2f} {:>7.2f} {:>13}\n",
        state_mb, dd_rate, save_rate, save_dd, median(copy) * 1e3, median(stall) * 1e3, stall_copy,
        median(write) * 1e3, median(cat) * 1e3, median(restore) * 1e3, cat_ratio,
        fmt::format(
            "{:.2f}-{:.2f} ({})", *std::min_element(restore_ratio.begin(), restore_ratio.end()),
            *std::max_element(restore_ratio.begin(), restore_ratio.end()), restore_ratio.size()));
    fmt::print(
        "json: {{\"bench\": \"checkpoint\", \"size_mb\": {}, \"state_mb\": {:.2f}, "
        "\"save_dd\": {}, \"stall_copy\": {}, \"restore_cat\": {}, \"floor_cat\": {}, "
        "\"fresh_read_cat\": {}, \"dd_s\": "
        "{}, \"save_s\": {}, "
        "\"stall_s\": {}, \"copy_s\": {}, \"write_s\": {}, \"cat_s\": {}, \"restore_s\": {}}}\n",
        mb, state_mb, json_array(save_ratio), json_array(stall_ratio), json_array(restore_ratio),
        json_array(floor_ratio), json_array(fresh_ratio), json_array(dd), json_array(save),
        json_array(stall), json_array(copy), json_array(write), json_array(cat),
        json_array(restore));
    std::fflush(stdout);
  }
  fmt::print("Budgets (save/dd >= 0.70, stall/copy <= 2, restore/cat <= 1.5): {}\n",
             all_met ? "met" : "NOT met");
  fs::remove_all(dir);
  return 0;
}
