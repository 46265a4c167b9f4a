// Distributed training costs on this machine, 2 processes on loopback (a file store):
//   1. gradient averaging (average_gradients, bucketed) against allreducing the same gradients
//      one by one through the process group (c10d's Gloo allreduce, then the 1/n scale), and
//      against one allreduce of a tensor of their total size (the least any averaging can do);
//      the gradient sets of the Fashion-MNIST CNN (35 k parameters in 6 tensors) and of a larger
//      model (8 M parameters in 40 tensors); rounds interleaved, medians and ranges;
//   2. the agreed stop decision (one allreduce of a flag per run);
//   3. training throughput of the Fashion-MNIST CNN on random data at one global batch: one
//      process (batch B, all cores) against 2 processes (batch B/2 each, cores shared, the
//      gradients averaged).
// Prints one JSON object per line; scripts/bench.sh makes them a table.
//
//   distributed_bench [--rounds 5] [--iterations 200] [--steps 100] [--batch 128]
#include <malloc.h>
#include <spawn.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "fashion_mnist_model.h"
#include "trainhooks/distributed/average_gradients.h"
#include "trainhooks/distributed/process_group.h"

extern char** environ;

namespace th = trainhooks;
namespace dist = trainhooks::distributed;

namespace {

struct Args {
  int rounds = 5;
  int iterations = 200;
  int steps = 100;
  int64_t batch = 128;
  std::string store;
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string summary(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return fmt::format(R"("median": {:.6g}, "min": {:.6g}, "max": {:.6g})", v[v.size() / 2],
                     v.front(), v.back());
}

std::vector<torch::Tensor> cnn_gradients() {
  fashion_mnist::Net net(fashion_mnist::NetOptions{});
  std::vector<torch::Tensor> grads;
  for (const auto& p : net->parameters()) grads.push_back(torch::randn_like(p));
  return grads;
}

std::vector<torch::Tensor> large_gradients() {
  std::vector<torch::Tensor> grads;
  for (int i = 0; i < 20; ++i) {
    grads.push_back(torch::randn({640, 640}));
    grads.push_back(torch::randn({640}));
  }
  return grads;
}

// Microseconds per averaging of `grads`, three ways, interleaved round by round.
void averaging(const std::shared_ptr<dist::ProcessGroup>& pg, const Args& a, const char* name,
               std::vector<torch::Tensor> grads, int iterations) {
  auto average = dist::average_gradients(pg);
  int64_t total = 0;
  for (const auto& g : grads) total += g.numel();
  torch::Tensor flat = torch::randn({total});
  const double scale = 1.0 / pg->world_size();
  auto per_tensor = [&] {
    for (auto& g : grads) {
      pg->allreduce(g);
      g.mul_(scale);
    }
  };
  auto one_flat = [&] {
    pg->allreduce(flat);
    flat.mul_(scale);
  };
  auto bucketed = [&] { average(grads); };
  auto time = [&](auto&& fn) {
    pg->barrier();
    const double t0 = now();
    for (int i = 0; i < iterations; ++i) fn();
    return (now() - t0) / iterations * 1e6;
  };
  time(bucketed);  // plans the buckets, warms the connections
  std::vector<double> b, p, f, rp, rf;
  for (int r = 0; r < a.rounds; ++r) {
    b.push_back(time(bucketed));
    p.push_back(time(per_tensor));
    f.push_back(time(one_flat));
    rp.push_back(b.back() / p.back());
    rf.push_back(b.back() / f.back());
  }
  if (pg->is_chief()) {
    std::printf(R"({"bench": "averaging", "gradients": "%s", "tensors": %zu, "elements": %lld, )"
                R"("bucketed_us": {%s}, "per_tensor_us": {%s}, "one_flat_us": {%s}, )"
                R"("ratio_per_tensor": {%s}, "ratio_one_flat": {%s}})"
                "\n",
                name, grads.size(), static_cast<long long>(total), summary(b).c_str(),
                summary(p).c_str(), summary(f).c_str(), summary(rp).c_str(), summary(rf).c_str());
    std::fflush(stdout);
  }
}

// Examples per second of training the CNN on random data with `batch` per process.
double throughput(const std::shared_ptr<dist::ProcessGroup>& pg, const Args& a, int64_t batch) {
  torch::manual_seed(0);
  fashion_mnist::Net net(fashion_mnist::NetOptions{});
  torch::optim::Adam opt(net->parameters(), 1e-3);
  auto average = pg ? dist::average_gradients(pg) : th::GradientTransform();
  auto x = torch::randn({batch, 1, 28, 28});
  auto y = torch::randint(0, 10, {batch}, torch::kLong);
  std::vector<torch::Tensor> grads;
  auto step = [&] {
    opt.zero_grad();
    torch::cross_entropy_loss(net->forward(x), y).backward();
    if (average) {
      grads.clear();
      for (auto& p : net->parameters()) grads.push_back(p.grad());
      torch::NoGradGuard no_grad;
      average(grads);
    }
    opt.step();
  };
  for (int i = 0; i < 5; ++i) step();
  if (pg) pg->barrier();
  const double t0 = now();
  for (int i = 0; i < a.steps; ++i) step();
  const double secs = now() - t0;
  return a.steps * batch * (pg ? pg->world_size() : 1) / secs;
}

int rank_main(const Args& a) {
  auto pg = dist::init({.file_store = a.store, .timeout_secs = 120});
  torch::set_num_threads(1);
  {
    // The agreed stop decision: one allreduce of one flag per run.
    std::vector<double> us;
    for (int r = 0; r < a.rounds; ++r) {
      pg->barrier();
      const double t0 = now();
      for (int i = 0; i < a.iterations; ++i) pg->any(false);
      us.push_back((now() - t0) / a.iterations * 1e6);
    }
    if (pg->is_chief()) {
      std::printf(R"({"bench": "stop_agreement", "us": {%s}})"
                  "\n",
                  summary(us).c_str());
      std::fflush(stdout);
    }
  }
  averaging(pg, a, "fashion_mnist_cnn", cnn_gradients(), a.iterations);
  averaging(pg, a, "large", large_gradients(), std::max(1, a.iterations / 10));
  std::vector<double> rates;
  for (int r = 0; r < 3; ++r) rates.push_back(throughput(pg, a, a.batch / 2));
  if (pg->is_chief()) {
    std::printf(
        R"({"bench": "throughput", "processes": 2, "threads_each": 1, "batch_each": %lld, "examples_per_s": {%s}})"
        "\n",
        static_cast<long long>(a.batch / 2), summary(rates).c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // As the main job (examples/fashion_mnist.cpp): freed memory stays in the process, so that
  // neither configuration pays page faults for each step's activations.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--rounds")
      a.rounds = std::stoi(value);
    else if (flag == "--iterations")
      a.iterations = std::stoi(value);
    else if (flag == "--steps")
      a.steps = std::stoi(value);
    else if (flag == "--batch")
      a.batch = std::stoll(value);
    else if (flag == "--store")
      a.store = value;
    else {
      std::fprintf(stderr, "distributed_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (std::getenv("RANK") != nullptr) return rank_main(a);

  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::printf(R"({"bench": "machine", "cores": %u})"
              "\n",
              cores);
  // One process, all cores, the whole batch.
  torch::set_num_threads(static_cast<int>(cores));
  std::vector<double> rates;
  for (int r = 0; r < 3; ++r) rates.push_back(throughput(nullptr, a, a.batch));
  std::printf(
      R"({"bench": "throughput", "processes": 1, "threads_each": %u, "batch_each": %lld, "examples_per_s": {%s}})"
      "\n",
      cores, static_cast<long long>(a.batch), summary(rates).c_str());
  // And on one core, for the scaling of one process.
  torch::set_num_threads(1);
  rates.clear();
  for (int r = 0; r < 3; ++r) rates.push_back(throughput(nullptr, a, a.batch));
  std::printf(
      R"({"bench": "throughput", "processes": 1, "threads_each": 1, "batch_each": %lld, "examples_per_s": {%s}})"
      "\n",
      static_cast<long long>(a.batch), summary(rates).c_str());
  std::fflush(stdout);

  // Two ranks of this program over a file store.
  const std::string store =
      (std::filesystem::temp_directory_path() / fmt::format("distributed_bench.{}", getpid()))
          .string();
  std::filesystem::remove(store);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string rank_env = fmt::format("RANK={}", rank);
    std::vector<std::string> env_strings{rank_env, "WORLD_SIZE=2"};
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    for (char** e = environ; *e != nullptr; ++e)
      if (std::string(*e).rfind("RANK=", 0) != 0 && std::string(*e).rfind("WORLD_SIZE=", 0) != 0)
        envp.push_back(*e);
    envp.push_back(nullptr);
    std::vector<std::string> args{argv[0],
                                  "--rounds",
                                  std::to_string(a.rounds),
                                  "--iterations",
                                  std::to_string(a.iterations),
                                  "--steps",
                                  std::to_string(a.steps),
                                  "--batch",
                                  std::to_string(a.batch),
                                  "--store",
                                  store};
    std::vector<char*> cargs;
    for (auto& s : args) cargs.push_back(s.data());
    cargs.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, cargs.data(), envp.data()) != 0) {
      std::fprintf(stderr, "distributed_bench: cannot start rank %d\n", rank);
      return 1;
    }
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  std::filesystem::remove(store);
  return failed == 0 ? 0 : 1;
}
