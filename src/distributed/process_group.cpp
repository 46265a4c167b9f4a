// The only translation unit that includes c10d: its headers cost much compile time, so the rest of
// the library reaches the process group through ProcessGroup's collectives.
#include "trainhooks/distributed/process_group.h"

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "trainhooks/errors.h"

namespace trainhooks::distributed {

struct ProcessGroup::Backend {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
};

namespace {

std::chrono::milliseconds to_ms(double secs) {
  return std::chrono::milliseconds(static_cast<int64_t>(secs * 1000.0));
}

// The value of environment variable `name` as an int in [lo, hi]; nullopt when unset.
std::optional<int> int_from_env(const char* name, int lo, int hi) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long parsed = std::strtol(value, &end, 10);
  if (*value == '\0' || *end != '\0' || errno != 0 || parsed < lo || parsed > hi) {
    throw InvalidArgument(fmt::format(
        "trainhooks distributed: environment variable {}='{}' is not an integer in [{}, {}]", name,
        value, lo, hi));
  }
  return static_cast<int>(parsed);
}

std::string string_from_env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

// Gloo's device: the interface GLOO_SOCKET_IFNAME names (as PyTorch), loopback when every process
// is on this machine, else the address this machine's hostname resolves to.
std::shared_ptr<::gloo::transport::Device> make_device(bool local) {
  const std::string interface = string_from_env("GLOO_SOCKET_IFNAME");
  if (!interface.empty()) return c10d::ProcessGroupGloo::createDeviceForInterface(interface);
  if (local) return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax:
      return c10d::ReduceOp::MAX;
    case ReduceOp::kMin:
      return c10d::ReduceOp::MIN;
    case ReduceOp::kSum:
      break;
  }
  return c10d::ReduceOp::SUM;
}

// Waits for `work`, turning c10d's and Gloo's errors into ours.
void wait_for(const c10::intrusive_ptr<c10d::Work>& work, const char* what, const ProcessGroup& pg,
              double timeout_secs) {
  try {
    // Gloo's own timeout (set on the operation) fires first; this bound is the last resort.
    if (!work->wait(to_ms(timeout_secs + 10))) {
      throw DeadlineExceededError(
          fmt::format("trainhooks distributed: {} on {} did not finish within {} s", what,
                      pg.describe(), timeout_secs));
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    std::string message = e.what();
    if (const size_t nl = message.find('\n'); nl != std::string::npos) message.resize(nl);
    const bool timed_out = message.find("imed out") != std::string::npos ||
                           message.find("imeout") != std::string::npos;
    const std::string text = fmt::format(
        "trainhooks distributed: {} on {} failed{}: {}", what, pg.describe(),
        timed_out ? fmt::format(" (a peer did not take part within {} s)", timeout_secs) : "",
        message);
    if (timed_out) throw DeadlineExceededError(text);
    throw UnavailableError(text);
  }
}

void check_tensor(const at::Tensor& tensor, const char* what) {
  if (!tensor.defined() || !tensor.device().is_cpu() || !tensor.is_contiguous()) {
    throw InvalidArgument(
        fmt::format("trainhooks distributed: {} needs a defined, contiguous CPU tensor", what));
  }
}

}  // namespace

ProcessGroup::~ProcessGroup() = default;

std::string ProcessGroup::describe() const {
  return fmt::format("rank {} of {}", rank_, world_size_);
}

void ProcessGroup::allreduce(at::Tensor& tensor, ReduceOp op, double timeout_secs) {
  if (!backend_) return;
  check_tensor(tensor, "allreduce");
  if (timeout_secs <= 0) timeout_secs = timeout_secs_;
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = to_c10d(op);
  options.timeout = to_ms(timeout_secs);
  wait_for(backend_->group->allreduce(tensors, options), "allreduce", *this, timeout_secs);
}

void ProcessGroup::broadcast(at::Tensor& tensor, int root, double timeout_secs) {
  if (root < 0 || root >= world_size_) {
    throw InvalidArgument(fmt::format(
        "trainhooks distributed: broadcast root {} is not a rank of {}", root, describe()));
  }
  if (!backend_) return;
  check_tensor(tensor, "broadcast");
  if (timeout_secs <= 0) timeout_secs = timeout_secs_;
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  options.timeout = to_ms(timeout_secs);
  wait_for(backend_->group->broadcast(tensors, options), "broadcast", *this, timeout_secs);
}

std::string ProcessGroup::broadcast_bytes(const std::string& bytes, int root, double timeout_secs) {
  if (!backend_) return bytes;
  at::Tensor size = at::empty({1}, at::kLong);
  size.data_ptr<int64_t>()[0] = static_cast<int64_t>(bytes.size());
  broadcast(size, root, timeout_secs);
  const int64_t n = size.data_ptr<int64_t>()[0];
  at::Tensor data = at::empty({std::max<int64_t>(n, 1)}, at::kByte);
  if (rank_ == root && n > 0) std::memcpy(data.data_ptr(), bytes.data(), bytes.size());
  broadcast(data, root, timeout_secs);
  return std::string(reinterpret_cast<const char*>(data.data_ptr()), static_cast<size_t>(n));
}

bool ProcessGroup::any(bool value, double timeout_secs) {
  if (!backend_) return value;
  at::Tensor flag = at::empty({1}, at::kInt);
  flag.data_ptr<int32_t>()[0] = value ? 1 : 0;
  allreduce(flag, ReduceOp::kMax, timeout_secs);
  return flag.data_ptr<int32_t>()[0] != 0;
}

void ProcessGroup::barrier(double timeout_secs) {
  if (!backend_) return;
  if (timeout_secs <= 0) timeout_secs = timeout_secs_;
  c10d::BarrierOptions options;
  options.timeout = to_ms(timeout_secs);
  wait_for(backend_->group->barrier(options), "barrier", *this, timeout_secs);
}

std::shared_ptr<ProcessGroup> init(const InitOptions& options) {
  constexpr int kMaxInt = std::numeric_limits<int>::max();
  if (!(options.timeout_secs > 0)) {
    throw InvalidArgument(fmt::format(
        "trainhooks distributed: timeout_secs must be positive, not {}", options.timeout_secs));
  }
  const std::optional<int> rank = options.rank ? options.rank : int_from_env("RANK", 0, kMaxInt);
  const std::optional<int> world_size =
      options.world_size ? options.world_size : int_from_env("WORLD_SIZE", 1, kMaxInt);
  std::shared_ptr<ProcessGroup> pg(new ProcessGroup());
  pg->timeout_secs_ = options.timeout_secs;
  pg->restart_count_ = int_from_env("TORCHELASTIC_RESTART_COUNT", 0, kMaxInt).value_or(0);
  if (!rank && !world_size) return pg;  // a group of one
  if (!rank || !world_size) {
    throw InvalidArgument(fmt::format(
        "trainhooks distributed: {} is set but {} is not (set both, as torchrun does, or neither "
        "for a single process)",
        rank ? "RANK" : "WORLD_SIZE", rank ? "WORLD_SIZE" : "RANK"));
  }
  if (*world_size < 1 || *rank < 0 || *rank >= *world_size) {
    throw InvalidArgument(fmt::format(
        "trainhooks distributed: rank {} is not in [0, world size {})", *rank, *world_size));
  }
  pg->rank_ = *rank;
  pg->world_size_ = *world_size;
  pg->local_rank_ = options.local_rank ? *options.local_rank
                                       : int_from_env("LOCAL_RANK", 0, kMaxInt).value_or(*rank);
  if (*world_size == 1) return pg;

  auto backend = std::make_unique<ProcessGroup::Backend>();
  const auto timeout = to_ms(options.timeout_secs);
  std::string where;
  bool local = true;
  try {
    if (!options.file_store.empty()) {
      where = "file store " + options.file_store;
      backend->store = c10::make_intrusive<c10d::FileStore>(options.file_store, *world_size);
      backend->store->setTimeout(timeout);
    } else {
      const std::string addr =
          !options.master_addr.empty() ? options.master_addr : string_from_env("MASTER_ADDR");
      if (addr.empty()) {
        throw InvalidArgument(
            "trainhooks distributed: MASTER_ADDR is not set (the chief's address; torchrun sets "
            "it), and no file store was given");
      }
      const std::optional<int> port =
          options.master_port ? options.master_port : int_from_env("MASTER_PORT", 1, 65535);
      if (!port) {
        throw InvalidArgument(
            "trainhooks distributed: MASTER_PORT is not set (the chief's store port; torchrun "
            "sets it)");
      }
      if (*port < 1 || *port > 65535) {
        throw InvalidArgument(
            fmt::format("trainhooks distributed: master_port {} is not in [1, 65535]", *port));
      }
      where = fmt::format("the store at {}:{}", addr, *port);
      local = is_loopback(addr);
      // Under torchrun's static rendezvous its agent already serves a store at this address, and
      // each restart of the group uses keys of its own (as PyTorch's env:// initialisation).
      const bool agent_store = string_from_env("TORCHELASTIC_USE_AGENT_STORE") == "True";
      c10d::TCPStoreOptions store_options;
      store_options.port = static_cast<uint16_t>(*port);
      store_options.isServer = !agent_store && *rank == 0;
      store_options.numWorkers = static_cast<size_t>(*world_size);
      store_options.waitWorkers = !agent_store;
      store_options.timeout = timeout;
      store_options.multiTenant = true;
      auto tcp = c10::make_intrusive<c10d::TCPStore>(addr, store_options);
      if (agent_store) {
        backend->store = c10::make_intrusive<c10d::PrefixStore>(
            fmt::format("/worker/attempt_{}", pg->restart_count_), tcp);
      } else {
        backend->store = tcp;
      }
    }
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
    gloo_options->devices.push_back(make_device(local));
    backend->group = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("trainhooks", backend->store), *rank, *world_size,
        gloo_options);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    std::string message = e.what();
    if (const size_t nl = message.find('\n'); nl != std::string::npos) message.resize(nl);
    const std::string text = fmt::format(
        "trainhooks distributed: rank {} of {} could not join through {} within {} s: {}", *rank,
        *world_size, where, options.timeout_secs, message);
    if (message.find("imed out") != std::string::npos ||
        message.find("imeout") != std::string::npos) {
      throw DeadlineExceededError(text);
    }
    throw UnavailableError(text);
  }
  pg->backend_ = std::move(backend);
  return pg;
}

}  // namespace trainhooks::distributed
