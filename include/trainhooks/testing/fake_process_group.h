// An in-process fake of a process group (distributed/process_group.h): the ranks are threads of
// one process that meet in memory, so that the agreed stop, the broadcast of the chief's state and
// the gradient averaging are tested without starting processes, and a peer's failure in the middle
// of a collective is scripted instead of provoked with a kill.
//
//   auto groups = th::distributed::make_fake_process_groups(
//       2, {.failures = {{.rank = 1, .collective = 3}}});  // rank 1's 4th collective fails
//   auto errors = th::distributed::run_ranks(2, [&](int rank) { train(groups[rank]); });
//
// Each collective waits until every rank has called it, then gives each the result: a sum
// adds the ranks' tensors in rank order, a broadcast copies root's bytes. A rank that fails
// leaves the group: its own call throws the scripted error, and every call of the other ranks
// that needs it (the same collective and any later one) throws at once, UnavailableError ("rank 1
// left the group", as a closed connection) or DeadlineExceededError (as a peer that hangs, without
// waiting for the timeout). A rank whose group is destroyed leaves it too. A rank that waits
// longer than timeout_secs for a peer that never calls gets DeadlineExceededError; ranks that call
// different collectives at the same position get FailedPreconditionError naming both. Messages
// have the form of the Gloo backend's ("trainhooks distributed: allreduce on rank 0 of 2 ...").
//
// Library trainhooks::testing_distributed (test programs only; it links the core library, which
// trainhooks::testing does not). Each group is used from one thread at a time, as a real one.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "trainhooks/distributed/process_group.h"

namespace trainhooks::distributed {

struct FakeFailure {
  enum class Kind { kUnavailable, kDeadlineExceeded };
  int rank = 0;
  // Which of the rank's collectives fails, counted from 0 in the order the rank calls them
  // (allreduce, broadcast, barrier; broadcast_bytes() is two broadcasts, any() one allreduce).
  int64_t collective = 0;
  Kind kind = Kind::kUnavailable;
};

struct FakeProcessGroupOptions {
  // The groups' timeout (ProcessGroup::timeout_secs()): how long a rank waits for the others.
  double timeout_secs = 30;
  std::vector<FakeFailure> failures;
};

// world_size groups of backend "fake", element r being rank r's. InvalidArgument when world_size
// is not positive, timeout_secs not positive, or a failure names a rank outside [0, world_size)
// or a negative collective.
std::vector<std::shared_ptr<ProcessGroup>> make_fake_process_groups(
    int world_size, FakeProcessGroupOptions options = {});

// Calls fn(rank) for every rank in [0, world_size) on a thread of its own and joins them all.
// Element r is what rank r's call threw (null: it returned).
std::vector<std::exception_ptr> run_ranks(int world_size, const std::function<void(int)>& fn);

}  // namespace trainhooks::distributed
