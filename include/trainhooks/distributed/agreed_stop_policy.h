// Agreed stopping (stop_policy.h): after every run, the ranks combine their local decisions, and
// every rank stops after the same step when any one of them wants to stop (a StopAtStepHook, a
// NaN, a signal, early stopping, the end of its input shard). No rank is left waiting in a
// collective of a step that the others will not run.
//
// One small allreduce per run (and per session creation). MonitoredTrainingSession uses it when a
// process group is given; for a MonitoredSession:
//
//   th::MonitoredSession sess(creator, hooks,
//                             {.stop_policy = th::distributed::agreed_stop_policy(pg)});
#pragma once

#include <memory>

#include "trainhooks/stop_policy.h"

namespace trainhooks::distributed {

class ProcessGroup;

// InvalidArgument when `group` is null.
std::shared_ptr<StopPolicy> agreed_stop_policy(std::shared_ptr<ProcessGroup> group);

}  // namespace trainhooks::distributed
