// The hook-running part of MonitoredSession (TF's _HookedSession): one run with every hook's
// before_run and after_run around it, the hooks' fetches and feeds merged into the caller's.
// It holds the per-run scratch (reused, so that a steady loop allocates nothing here), which the
// public header does not show.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "trainhooks/hook.h"
#include "trainhooks/session.h"

namespace trainhooks::internal {

class HookRunner {
 public:
  // `hooks` outlives the runner; their calls() are read now (after begin()).
  explicit HookRunner(const std::vector<std::shared_ptr<SessionRunHook>>& hooks);

  // One run of `session` with the hooks around it: the caller's results into `out`. Returns
  // whether a hook requested a stop. RuntimeError naming the nodes when two hooks, or a hook and
  // the caller, feed the same node (TF's texts).
  bool run(Session& session, const Fetches& fetches, FeedsView feeds, const RunOptions& options,
           RunMetadata* metadata, RunResults& out);

  // Drops the values the hooks were given (tensors), when the session closes.
  void clear();

 private:
  const std::vector<std::shared_ptr<SessionRunHook>>* hooks_;
  std::vector<SessionRunValues> hook_values_;
  SessionRunValues no_fetch_values_;  // what hooks that fetched nothing get
  std::vector<size_t> hook_fetch_begin_;
  std::vector<size_t> hook_fetch_end_;
  // The hooks whose before_run / after_run are called (SessionRunHook::calls()), in order.
  std::vector<size_t> before_run_hooks_;
  std::vector<size_t> after_run_hooks_;
  std::vector<Node> combined_fetches_;
  Feeds combined_feeds_;
  RunResults combined_results_;
  std::vector<uint64_t> hook_feed_stamp_;
  uint64_t feed_stamp_ = 0;
};

}  // namespace trainhooks::internal
