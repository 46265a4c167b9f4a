#include "hook_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "hook_overrides.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"

namespace trainhooks::internal {

namespace {

std::string conflict_message(const char* what, const Graph& g, const std::vector<Node>& conflicts) {
  std::string names;
  for (size_t i = 0; i < conflicts.size(); ++i) {
    if (i) names += ", ";
    names += g.name(conflicts[i]);
  }
  return fmt::format("{} Conflict(s): [{}]", what, names);
}

}  // namespace

HookRunner::HookRunner(const std::vector<std::shared_ptr<SessionRunHook>>& hooks) : hooks_(&hooks) {
  hook_values_.resize(hooks.size());
  // A hook whose before_run is not called fetches nothing: its range stays empty.
  hook_fetch_begin_.assign(hooks.size(), 0);
  hook_fetch_end_.assign(hooks.size(), 0);
  for (size_t i = 0; i < hooks.size(); ++i) {
    // What the hook's class defines decides; its calls() only where that cannot be read.
    bool before_run = true;
    bool after_run = true;
    if (const std::optional<HookOverrides> o = overrides(*hooks[i])) {
      before_run = o->before_run;
      after_run = o->after_run;
    } else {
      const SessionRunHook::Calls calls = hooks[i]->calls();
      before_run = calls.before_run;
      after_run = calls.after_run;
    }
    if (before_run) before_run_hooks_.push_back(i);
    if (after_run) after_run_hooks_.push_back(i);
  }
}

void HookRunner::clear() {
  for (auto& v : hook_values_) v.results.clear();
  no_fetch_values_ = {};
}

bool HookRunner::run(Session& sess, const Fetches& fetches, FeedsView feeds,
                     const RunOptions& options, RunMetadata* metadata, RunResults& out) {
  const auto& hooks = *hooks_;
  Graph& g = sess.graph();
  SessionRunContext ctx(fetches, feeds, sess);

  if (before_run_hooks_.empty()) {
    // No hook can ask for anything: the caller's run as it is, its results straight into `out`.
    std::optional<RunMetadata> local;
    RunMetadata* run_metadata = metadata;
    if (!run_metadata && options.trace_level > RunOptions::NO_TRACE)
      run_metadata = &local.emplace();
    sess.run_nodes(sess.resolve_fetches(fetches), feeds, options, run_metadata, out);
    if (after_run_hooks_.empty()) return false;
    no_fetch_values_.options = options;
    no_fetch_values_.results.set_graph(&g);
    if (run_metadata) no_fetch_values_.run_metadata = *run_metadata;
    for (const size_t i : after_run_hooks_) hooks[i]->after_run(ctx, no_fetch_values_);
    return ctx.stop_requested();
  }

  combined_fetches_.clear();
  for (Node n : sess.resolve_fetches(fetches)) combined_fetches_.push_back(n);
  const size_t num_user_fetches = combined_fetches_.size();

  // Each hook's request is looked at and dropped here: only its fetches (as nodes), feeds and
  // options are kept. A hook that asks for nothing costs its two calls and this check, unless it
  // declared that it needs neither (SessionRunHook::calls(): then it is in neither list).
  RunOptions merged = options;
  bool hook_feeds = false;
  for (const size_t i : before_run_hooks_) {
    hook_fetch_begin_[i] = combined_fetches_.size();
    hook_fetch_end_[i] = hook_fetch_begin_[i];
    SessionRunArgs args = hooks[i]->before_run(ctx);
    if (args.fetches.empty() && args.feeds.empty() && args.options.is_default()) continue;
    for (const auto& ref : args.fetches.refs()) combined_fetches_.push_back(g.resolve(ref));
    hook_fetch_end_[i] = combined_fetches_.size();
    if (!args.options.is_default()) merged.merge_from(args.options);
    if (args.feeds.empty()) continue;
    if (!hook_feeds) {
      // The first hook feed of this run: the feeds become the caller's and the hooks' together.
      hook_feeds = true;
      combined_feeds_.clear();
      combined_feeds_.append(feeds.begin(), feeds.end());
      if (hook_feed_stamp_.size() != g.size()) hook_feed_stamp_.assign(g.size(), 0);
      ++feed_stamp_;
    }
    std::vector<Node> conflicts;  // allocated only when there is a conflict to report
    for (const auto& f : args.feeds) {
      Node n = g.resolve(f.node);
      if (hook_feed_stamp_[n.index] == feed_stamp_) conflicts.push_back(n);
    }
    if (!conflicts.empty())
      throw RuntimeError(conflict_message("Same tensor is fed by two hooks.", g, conflicts));
    for (auto& f : args.feeds) {
      hook_feed_stamp_[g.resolve(f.node).index] = feed_stamp_;
      combined_feeds_.push_back(std::move(f));
    }
  }

  FeedsView run_feeds = feeds;
  if (hook_feeds) {
    std::vector<Node> conflicts;
    for (const auto& f : feeds) {
      Node n = g.resolve(f.node);
      if (hook_feed_stamp_[n.index] == feed_stamp_) conflicts.push_back(n);
    }
    if (!conflicts.empty()) {
      // Named in the order the hooks fed them, as TF does.
      std::vector<Node> ordered;
      for (size_t k = feeds.size(); k < combined_feeds_.size(); ++k) {
        Node n = g.resolve(combined_feeds_[k].node);
        if (std::find(conflicts.begin(), conflicts.end(), n) != conflicts.end())
          ordered.push_back(n);
      }
      throw RuntimeError(
          conflict_message("Same tensor is fed by a SessionRunHook and user.", g, ordered));
    }
    run_feeds = combined_feeds_;
  }

  std::optional<RunMetadata> local_metadata;
  RunMetadata* run_metadata = metadata;
  if (!run_metadata && merged.trace_level > RunOptions::NO_TRACE)
    run_metadata = &local_metadata.emplace();

  sess.run_nodes(combined_fetches_, run_feeds, merged, run_metadata, combined_results_);
  if (hook_feeds) combined_feeds_.clear();

  const auto values = combined_results_.values();
  out.clear();
  out.set_graph(&g);
  out.set_end_of_input(false);
  out.reserve(num_user_fetches);
  for (size_t k = 0; k < num_user_fetches; ++k) out.add(values[k].first, values[k].second);
  // A hook that fetched nothing gets the shared values (no results); the others their own.
  no_fetch_values_.options = merged;
  no_fetch_values_.results.set_graph(&g);
  if (run_metadata) no_fetch_values_.run_metadata = *run_metadata;
  for (const size_t i : before_run_hooks_) {
    const size_t begin = hook_fetch_begin_[i], end = hook_fetch_end_[i];
    if (begin == end) continue;
    auto& hv = hook_values_[i];
    hv.results.clear();
    hv.results.set_graph(&g);
    for (size_t k = begin; k < end; ++k) hv.results.add(values[k].first, values[k].second);
    hv.options = merged;
    if (run_metadata) hv.run_metadata = *run_metadata;
  }
  combined_results_.clear();
  for (const size_t i : after_run_hooks_) {
    const bool fetched = hook_fetch_begin_[i] != hook_fetch_end_[i];
    hooks[i]->after_run(ctx, fetched ? hook_values_[i] : no_fetch_values_);
  }
  return ctx.stop_requested();
}

}  // namespace trainhooks::internal
