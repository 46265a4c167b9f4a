#include "trainhooks/hooks/feed_fn_hook.h"

#include "trainhooks/errors.h"

namespace trainhooks {

FeedFnHook::FeedFnHook(std::function<Feeds()> feed_fn) : feed_fn_(std::move(feed_fn)) {
  if (!feed_fn_) throw InvalidArgument("FeedFnHook: feed_fn is empty");
}

SessionRunArgs FeedFnHook::before_run(SessionRunContext&) { return {.feeds = feed_fn_()}; }

}  // namespace trainhooks
