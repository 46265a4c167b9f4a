// FeedFnHook: adds the feeds returned by a function before every run (TF's).
//
//   hooks.push_back(std::make_shared<th::FeedFnHook>([&] { return th::Feeds{{x, next_x()}}; }));
//
// Its feeds must not overlap the caller's or another hook's (RuntimeError).
#pragma once

#include <functional>

#include "trainhooks/hook.h"

namespace trainhooks {

class FeedFnHook : public SessionRunHook {
 public:
  explicit FeedFnHook(std::function<Feeds()> feed_fn);
  SessionRunArgs before_run(SessionRunContext& run_context) override;
  Calls calls() const override { return {.after_run = false}; }

 private:
  std::function<Feeds()> feed_fn_;
};

}  // namespace trainhooks
