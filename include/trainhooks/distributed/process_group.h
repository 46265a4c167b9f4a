// Process groups for data-parallel training: the collectives the distributed hooks and the
// gradient averaging use, over a CollectiveBackend (collective_backend.h). init() joins LibTorch's
// c10d Gloo process group over a TCP store (the rendezvous that torchrun sets up) or a file store.
//
//   auto dp = th::distributed::data_parallel(th::distributed::init());  // RANK, WORLD_SIZE, ...
//   auto train = g.minimize("train", loss, th::sgd(0.1), dp.minimize_options());
//   th::MonitoredTrainingSession sess(
//       g, {.checkpoint_dir = dir, .distributed = {.process_group = dp.process_group()}});
//
// Launched with Debian's torchrun (torch 1.13 on Python 3.11, which needs --no_python and a
// non-zero --redirects / --tee):
//   torchrun --no_python --redirects 2 --tee 2 --nnodes=1 --nproc_per_node=2 ./train
// or by hand with the same variables (docs/distributed.md).
//
// Rank 0 is the chief. A process without RANK and WORLD_SIZE (and no explicit options) is a group
// of one: no store, no sockets, and every collective returns at once with its input.
//
// Every collective is called by every rank in the same order, on CPU tensors, from one thread at
// a time. Each wait is bounded by the group's timeout (or the call's): a peer that died or hangs
// ends the call with DeadlineExceededError (timeout) or UnavailableError (a connection closed),
// naming the operation and this rank. MonitoredTrainingSession over a group of several processes
// does not recover from them (one rank cannot recreate its session alone): the error ends the
// process, and torchrun's --max_restarts restarts the group from the newest checkpoint.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>

#include "trainhooks/distributed/collective_backend.h"

namespace trainhooks::distributed {

struct InitOptions {
  // Each unset value comes from torchrun's variable of the same name (RANK, WORLD_SIZE,
  // LOCAL_RANK, MASTER_ADDR, MASTER_PORT); LOCAL_RANK defaults to the rank.
  std::optional<int> rank;
  std::optional<int> world_size;
  std::optional<int> local_rank;
  std::string master_addr;
  std::optional<int> master_port;
  // A file that every process can reach (one machine, or a shared file system) for the
  // rendezvous, instead of the TCP store at master_addr:master_port. It must not exist before the
  // group's first process starts; c10d removes it when the last one ends.
  std::string file_store;
  // Start-up as a whole (reaching the store, every rank's arrival there, Gloo's connections: init()
  // returns or fails within it on every rank), and every collective.
  double timeout_secs = 300;
  // The collective backend: "gloo"; "nccl" and "mpi" where LibTorch was built with them (Debian's
  // LibTorch has neither: UnimplementedError saying so). Empty: the environment variable
  // TRAINHOOKS_BACKEND, else "gloo". An unknown name is an InvalidArgument listing the known ones,
  // also for a group of one, which uses no backend.
  std::string backend;
};

struct ProcessGroupOptions {
  // This process's rank among those of its machine; < 0: the rank.
  int local_rank = -1;
  // TORCHELASTIC_RESTART_COUNT (see restart_count()).
  int restart_count = 0;
  // Each collective's bound unless the call gives its own.
  double timeout_secs = 300;
};

class ProcessGroup {
 public:
  // A group of one: no backend, and every collective returns at once with its input.
  explicit ProcessGroup(ProcessGroupOptions options = {});
  // The ranks of `backend`: rank() and world_size() are the backend's. InvalidArgument when
  // backend is null, timeout_secs is not positive or the backend's rank is not in [0, world size).
  explicit ProcessGroup(std::unique_ptr<CollectiveBackend> backend,
                        ProcessGroupOptions options = {});
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }
  bool is_chief() const { return rank_ == 0; }
  // TORCHELASTIC_RESTART_COUNT: how many times torchrun restarted this group (0: first start).
  int restart_count() const { return restart_count_; }
  double timeout_secs() const { return timeout_secs_; }
  // "rank 1 of 2".
  std::string describe() const;
  // The backend's name ("gloo", "fake"); "none" for a group of one.
  std::string backend_name() const;

  // In place, on every rank: `tensor` becomes the reduction over the ranks (contiguous CPU).
  // `timeout_secs` <= 0: the group's timeout.
  void allreduce(at::Tensor& tensor, ReduceOp op = ReduceOp::kSum, double timeout_secs = 0);
  // In place: `tensor` becomes root's on every rank.
  void broadcast(at::Tensor& tensor, int root = 0, double timeout_secs = 0);
  // Root's bytes on every rank (the others' `bytes` are ignored).
  std::string broadcast_bytes(const std::string& bytes, int root = 0, double timeout_secs = 0);
  // Whether `value` is true on any rank.
  bool any(bool value, double timeout_secs = 0);
  // Returns when every rank called it.
  void barrier(double timeout_secs = 0);

 private:
  int rank_ = 0;
  int world_size_ = 1;
  int local_rank_ = 0;
  int restart_count_ = 0;
  double timeout_secs_ = 300;
  std::unique_ptr<CollectiveBackend> backend_;  // null for a group of one
};

// Joins the group that the options and torchrun's environment describe (see InitOptions).
// InvalidArgument naming the variable or option that is missing or malformed (a rank outside
// [0, world_size), a port outside [1, 65535], RANK without WORLD_SIZE, a GLOO_SOCKET_IFNAME that
// is not an interface of this machine); DeadlineExceededError when the store cannot be reached or
// other ranks do not arrive within timeout_secs (naming them), UnavailableError or
// DeadlineExceededError when Gloo cannot connect the ranks that arrived (naming each one's
// address). Each message is docs/distributed.md's ("Errors at start"). The backend's name is
// checked first (InitOptions::backend).
std::shared_ptr<ProcessGroup> init(const InitOptions& options = {});

}  // namespace trainhooks::distributed
