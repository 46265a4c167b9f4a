// The transport under a ProcessGroup (c10d's abstract ProcessGroup plays this part in PyTorch):
// the three collectives that everything distributed in trainhooks is built from. init() makes one
// over c10d's Gloo process group; testing/fake_process_group.h makes one whose ranks are threads
// of one process. A backend for another transport (NCCL, MPI, a LibTorch build's own c10d group)
// implements this class and is handed to a ProcessGroup:
//
//   auto pg = std::make_shared<th::distributed::ProcessGroup>(std::make_unique<MyBackend>(...));
//
// ProcessGroup has checked what it passes on: tensors are defined, contiguous and on the CPU,
// root is a rank, timeout_secs is positive. Every rank calls the collectives in the same order,
// from one thread at a time. A failure throws a trainhooks error that names the operation and the
// rank ("trainhooks distributed: allreduce on rank 1 of 2 failed: ..."): DeadlineExceededError when
// a peer did not take part within timeout_secs, UnavailableError when one left (a connection
// closed). A backend that throws once need not be usable afterwards: the group's processes end.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace trainhooks::distributed {

enum class ReduceOp { kSum, kMax, kMin };

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;

  // "gloo", "fake", ...: for messages.
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // In place, on every rank: `tensor` becomes the reduction over the ranks.
  virtual void allreduce(at::Tensor& tensor, ReduceOp op, double timeout_secs) = 0;
  // In place: `tensor` becomes root's on every rank.
  virtual void broadcast(at::Tensor& tensor, int root, double timeout_secs) = 0;
  // Returns when every rank called it.
  virtual void barrier(double timeout_secs) = 0;
};

}  // namespace trainhooks::distributed
