#include "trainhooks/hooks/final_ops_hook.h"

#include "trainhooks/errors.h"

namespace trainhooks {

FinalOpsHook::FinalOpsHook(Fetches final_ops, Feeds final_ops_feed_dict)
    : final_ops_(std::move(final_ops)), feeds_(std::move(final_ops_feed_dict)) {
  if (final_ops_.empty()) throw InvalidArgument("FinalOpsHook: final_ops is empty");
}

void FinalOpsHook::end(Session& session) {
  try {
    values_ = session.run(final_ops_, feeds_);
  } catch (const OutOfRangeError&) {
    env().warning(
        "An OutOfRangeError was raised by the nodes run by FinalOpsHook. This typically means the "
        "nodes run by the FinalOpsHook have a dependency back to some input source, which should "
        "not "
        "happen. Final nodes should read variables only: an input has no batch left at the end of "
        "training.");
    throw;
  }
}

}  // namespace trainhooks
