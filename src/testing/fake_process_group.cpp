#include "trainhooks/testing/fake_process_group.h"

#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "trainhooks/errors.h"

namespace trainhooks::distributed {

namespace {

enum class Op { kAllreduce, kBroadcast, kBarrier };

const char* op_name(Op op) {
  switch (op) {
    case Op::kAllreduce:
      return "allreduce";
    case Op::kBroadcast:
      return "broadcast";
    case Op::kBarrier:
      break;
  }
  return "barrier";
}

// One collective: the ranks' inputs (copies, so that no rank reads another's live tensor), and the
// result once every rank has arrived.
struct Round {
  Op op = Op::kBarrier;
  ReduceOp reduce = ReduceOp::kSum;
  int root = 0;
  std::vector<at::Tensor> inputs;
  std::vector<bool> arrived;
  int arrivals = 0;
  int departures = 0;
  bool done = false;
  at::Tensor result;
  std::string error;  // set instead of result when the ranks' tensors do not match
};

// Where the ranks meet: shared by the world_size backends.
struct Hub {
  int world_size = 0;
  FakeProcessGroupOptions options;
  std::mutex mutex;
  std::condition_variable changed;
  std::map<int64_t, Round> rounds;  // by position in every rank's sequence of collectives
  // Why a rank left the group, if it did.
  std::vector<std::optional<FakeFailure::Kind>> left;
};

class FakeBackend final : public CollectiveBackend {
 public:
  FakeBackend(std::shared_ptr<Hub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}
  ~FakeBackend() override {
    // Destroyed: a connection closed for the ranks still waiting.
    std::lock_guard lock(hub_->mutex);
    if (!hub_->left[rank_]) hub_->left[rank_] = FakeFailure::Kind::kUnavailable;
    hub_->changed.notify_all();
  }

  std::string name() const override { return "fake"; }
  int rank() const override { return rank_; }
  int world_size() const override { return hub_->world_size; }

  void allreduce(at::Tensor& tensor, ReduceOp op, double timeout_secs) override {
    collective(Op::kAllreduce, &tensor, op, 0, timeout_secs);
  }
  void broadcast(at::Tensor& tensor, int root, double timeout_secs) override {
    collective(Op::kBroadcast, &tensor, ReduceOp::kSum, root, timeout_secs);
  }
  void barrier(double timeout_secs) override {
    collective(Op::kBarrier, nullptr, ReduceOp::kSum, 0, timeout_secs);
  }

 private:
  [[noreturn]] void fail(Op op, FakeFailure::Kind kind, double timeout_secs,
                         const std::string& why) {
    // This rank leaves the group: its peers must not wait for it.
    if (!hub_->left[rank_]) hub_->left[rank_] = kind;
    hub_->changed.notify_all();
    const std::string where = fmt::format("rank {} of {}", rank_, hub_->world_size);
    if (kind == FakeFailure::Kind::kDeadlineExceeded) {
      throw DeadlineExceededError(fmt::format(
          "trainhooks distributed: {} on {} failed (a peer did not take part within {} s): {}",
          op_name(op), where, timeout_secs, why));
    }
    throw UnavailableError(
        fmt::format("trainhooks distributed: {} on {} failed: {}", op_name(op), where, why));
  }

  void collective(Op op, at::Tensor* tensor, ReduceOp reduce, int root, double timeout_secs) {
    const int64_t position = next_++;
    std::unique_lock lock(hub_->mutex);
    for (const FakeFailure& f : hub_->options.failures) {
      if (f.rank == rank_ && f.collective == position) {
        fail(op, f.kind, timeout_secs, fmt::format("scripted failure of collective {}", position));
      }
    }
    Round& round = hub_->rounds[position];
    if (round.arrivals == 0) {
      round.op = op;
      round.reduce = reduce;
      round.root = root;
      round.inputs.resize(hub_->world_size);
      round.arrived.assign(hub_->world_size, false);
    } else if (round.op != op || round.reduce != reduce || round.root != root) {
      const std::string why =
          fmt::format("collective {}: another rank called {} (root {}), this one {} (root {})",
                      position, op_name(round.op), round.root, op_name(op), root);
      hub_->left[rank_] = FakeFailure::Kind::kUnavailable;
      hub_->changed.notify_all();
      throw FailedPreconditionError(fmt::format("trainhooks distributed: {} on rank {} of {}: {}",
                                                op_name(op), rank_, hub_->world_size, why));
    }
    if (tensor) round.inputs[rank_] = tensor->clone();
    round.arrived[rank_] = true;
    if (++round.arrivals == hub_->world_size) {
      complete(round);
      hub_->changed.notify_all();
    } else {
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_secs);
      std::optional<int> gone;
      const auto ready = [&] {
        if (round.done) return true;
        for (int r = 0; r < hub_->world_size; ++r)
          if (!round.arrived[r] && hub_->left[r]) gone = r;
        return gone.has_value();
      };
      if (!hub_->changed.wait_until(lock, deadline, ready)) {
        fail(op, FakeFailure::Kind::kDeadlineExceeded, timeout_secs,
             "not every rank called it in time");
      }
      if (!round.done) {
        const bool hangs = *hub_->left[*gone] == FakeFailure::Kind::kDeadlineExceeded;
        fail(op, *hub_->left[*gone], timeout_secs,
             fmt::format("rank {} {}", *gone, hangs ? "did not take part" : "left the group"));
      }
    }
    const std::string error = round.error;
    if (tensor && error.empty()) tensor->copy_(round.result);
    if (++round.departures == hub_->world_size) hub_->rounds.erase(position);
    if (!error.empty()) {
      throw FailedPreconditionError(fmt::format("trainhooks distributed: {} on rank {} of {}: {}",
                                                op_name(op), rank_, hub_->world_size, error));
    }
  }

  // The result, in rank order: a sum adds rank 0's, then rank 1's, ...
  void complete(Round& round) const {
    if (round.op == Op::kBroadcast) {
      round.result = round.inputs[round.root];
      for (int r = 0; r < hub_->world_size; ++r) {
        const at::Tensor& t = round.inputs[r];
        if (!t.sizes().equals(round.result.sizes()) ||
            t.scalar_type() != round.result.scalar_type())
          round.error = fmt::format("rank {}'s tensor differs from root {}'s in shape or dtype", r,
                                    round.root);
      }
    } else if (round.op == Op::kAllreduce) {
      at::Tensor result = round.inputs[0];
      for (int r = 1; r < hub_->world_size; ++r) {
        const at::Tensor& other = round.inputs[r];
        if (!other.sizes().equals(result.sizes()) || other.scalar_type() != result.scalar_type()) {
          round.error = fmt::format("rank {}'s tensor differs from rank 0's in shape or dtype", r);
          break;
        }
        switch (round.reduce) {
          case ReduceOp::kSum:
            result = result.add(other);
            break;
          case ReduceOp::kMax:
            result = at::maximum(result, other);
            break;
          case ReduceOp::kMin:
            result = at::minimum(result, other);
            break;
        }
      }
      round.result = result;
    }
    round.done = true;
  }

  std::shared_ptr<Hub> hub_;
  int rank_;
  int64_t next_ = 0;  // this rank's next collective
};

}  // namespace

std::vector<std::shared_ptr<ProcessGroup>> make_fake_process_groups(
    int world_size, FakeProcessGroupOptions options) {
  if (world_size < 1) {
    throw InvalidArgument(
        fmt::format("make_fake_process_groups: world_size must be positive, not {}", world_size));
  }
  if (!(options.timeout_secs > 0)) {
    throw InvalidArgument(fmt::format(
        "make_fake_process_groups: timeout_secs must be positive, not {}", options.timeout_secs));
  }
  for (const FakeFailure& f : options.failures) {
    if (f.rank < 0 || f.rank >= world_size || f.collective < 0) {
      throw InvalidArgument(fmt::format(
          "make_fake_process_groups: failure of rank {} at collective {} is not in a group of {}",
          f.rank, f.collective, world_size));
    }
  }
  auto hub = std::make_shared<Hub>();
  hub->world_size = world_size;
  hub->left.resize(world_size);
  const double timeout_secs = options.timeout_secs;
  hub->options = std::move(options);
  std::vector<std::shared_ptr<ProcessGroup>> groups;
  for (int r = 0; r < world_size; ++r) {
    groups.push_back(std::make_shared<ProcessGroup>(
        std::make_unique<FakeBackend>(hub, r), ProcessGroupOptions{.timeout_secs = timeout_secs}));
  }
  return groups;
}

std::vector<std::exception_ptr> run_ranks(int world_size, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errors(world_size);
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace trainhooks::distributed
