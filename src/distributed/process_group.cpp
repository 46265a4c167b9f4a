#include "trainhooks/distributed/process_group.h"

#include <fmt/format.h>

#include <ATen/ops/empty.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "distributed/c10d_backend.h"
#include "trainhooks/errors.h"

namespace trainhooks::distributed {

namespace {

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

// The backend that the options or TRAINHOOKS_BACKEND name, checked against what this LibTorch
// has. c10d compiles NCCL and MPI in only when LibTorch is built with them (USE_C10D_NCCL,
// USE_C10D_MPI); Debian's LibTorch, which this project builds against, has neither.
std::string backend_name(const InitOptions& options) {
  std::string name = options.backend;
  const char* source = "InitOptions::backend";
  if (name.empty()) {
    name = string_from_env("TRAINHOOKS_BACKEND");
    source = "TRAINHOOKS_BACKEND";
  }
  if (name.empty()) return "gloo";
  if (name == "gloo") return name;
  if (name == "nccl" || name == "mpi") {
    throw UnimplementedError(fmt::format(
        "trainhooks distributed: backend '{}' ({}) is not available: this LibTorch was built "
        "without {} (c10d's USE_C10D_{}); available: gloo",
        name, source, name == "nccl" ? "NCCL" : "MPI", name == "nccl" ? "NCCL" : "MPI"));
  }
  throw InvalidArgument(fmt::format(
      "trainhooks distributed: unknown backend '{}' ({}); known backends: gloo, nccl, mpi", name,
      source));
}

void check_tensor(const at::Tensor& tensor, const char* what) {
  if (!tensor.defined() || !tensor.device().is_cpu() || !tensor.is_contiguous()) {
    throw InvalidArgument(
        fmt::format("trainhooks distributed: {} needs a defined, contiguous CPU tensor", what));
  }
}

}  // namespace

ProcessGroup::ProcessGroup(ProcessGroupOptions options)
    : local_rank_(options.local_rank < 0 ? 0 : options.local_rank),
      restart_count_(options.restart_count),
      timeout_secs_(options.timeout_secs) {
  if (!(options.timeout_secs > 0)) {
    throw InvalidArgument(fmt::format(
        "trainhooks distributed: timeout_secs must be positive, not {}", options.timeout_secs));
  }
}

ProcessGroup::ProcessGroup(std::unique_ptr<CollectiveBackend> backend, ProcessGroupOptions options)
    : ProcessGroup(options) {
  if (!backend) throw InvalidArgument("trainhooks distributed: ProcessGroup: the backend is null");
  rank_ = backend->rank();
  world_size_ = backend->world_size();
  if (world_size_ < 1 || rank_ < 0 || rank_ >= world_size_) {
    throw InvalidArgument(
        fmt::format("trainhooks distributed: backend '{}' has rank {}, not in [0, world size {})",
                    backend->name(), rank_, world_size_));
  }
  local_rank_ = options.local_rank < 0 ? rank_ : options.local_rank;
  backend_ = std::move(backend);
}

ProcessGroup::~ProcessGroup() = default;

std::string ProcessGroup::describe() const {
  return fmt::format("rank {} of {}", rank_, world_size_);
}

std::string ProcessGroup::backend_name() const { return backend_ ? backend_->name() : "none"; }

void ProcessGroup::allreduce(at::Tensor& tensor, ReduceOp op, double timeout_secs) {
  if (!backend_) return;
  check_tensor(tensor, "allreduce");
  backend_->allreduce(tensor, op, timeout_secs > 0 ? timeout_secs : timeout_secs_);
}

void ProcessGroup::broadcast(at::Tensor& tensor, int root, double timeout_secs) {
  if (root < 0 || root >= world_size_) {
    throw InvalidArgument(fmt::format(
        "trainhooks distributed: broadcast root {} is not a rank of {}", root, describe()));
  }
  if (!backend_) return;
  check_tensor(tensor, "broadcast");
  backend_->broadcast(tensor, root, timeout_secs > 0 ? timeout_secs : timeout_secs_);
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
  backend_->barrier(timeout_secs > 0 ? timeout_secs : timeout_secs_);
}

std::shared_ptr<ProcessGroup> init(const InitOptions& options) {
  constexpr int kMaxInt = std::numeric_limits<int>::max();
  if (!(options.timeout_secs > 0)) {
    throw InvalidArgument(fmt::format(
        "trainhooks distributed: timeout_secs must be positive, not {}", options.timeout_secs));
  }
  const std::string backend = backend_name(options);
  const std::optional<int> rank = options.rank ? options.rank : int_from_env("RANK", 0, kMaxInt);
  const std::optional<int> world_size =
      options.world_size ? options.world_size : int_from_env("WORLD_SIZE", 1, kMaxInt);
  ProcessGroupOptions group_options{
      .restart_count = int_from_env("TORCHELASTIC_RESTART_COUNT", 0, kMaxInt).value_or(0),
      .timeout_secs = options.timeout_secs};
  if (!rank && !world_size) return std::make_shared<ProcessGroup>(group_options);  // one
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
  group_options.local_rank = options.local_rank
                                 ? *options.local_rank
                                 : int_from_env("LOCAL_RANK", 0, kMaxInt).value_or(*rank);
  if (*world_size == 1) return std::make_shared<ProcessGroup>(group_options);

  internal::C10dRendezvous rendezvous{.rank = *rank,
                                      .world_size = *world_size,
                                      .file_store = options.file_store,
                                      .restart_count = group_options.restart_count,
                                      .timeout_secs = options.timeout_secs};
  if (options.file_store.empty()) {
    rendezvous.master_addr =
        !options.master_addr.empty() ? options.master_addr : string_from_env("MASTER_ADDR");
    if (rendezvous.master_addr.empty()) {
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
    rendezvous.master_port = *port;
    rendezvous.agent_store = string_from_env("TORCHELASTIC_USE_AGENT_STORE") == "True";
  }
  return std::make_shared<ProcessGroup>(internal::make_gloo_backend(rendezvous), group_options);
}

}  // namespace trainhooks::distributed
