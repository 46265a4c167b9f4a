// StopPolicy: how a monitored session turns this process's reasons to stop into the decision
// that every process acts on.
//
// After every run, and after every (re)creation of the session, MonitoredSession combines its
// local reasons (a hook or a step function requested a stop, the Coordinator was told to stop,
// an input ran out of data) into one local decision and hands it to the policy once; what the
// policy returns is what should_stop() reports until the next run. Without a policy (the
// default) the local decision is final and should_stop() also sees a Coordinator stop as soon
// as another thread requests it, as TF's does.
//
// A distributed policy agrees the decision across processes (e.g. an allreduce of the flag), so
// that one rank's early stop, NaN or signal stops every rank after the same step instead of
// leaving the others waiting in a collective. Such a policy is called exactly once per run on
// every process, in the same order; should_stop() then reads only agreed decisions.
//
//   struct AllRanks : th::StopPolicy {
//     bool decide(bool local_stop) override { return allreduce_max(local_stop); }
//   };
//   th::MonitoredSession sess(creator, hooks, {.stop_policy = std::make_shared<AllRanks>()});
#pragma once

namespace trainhooks {

class StopPolicy {
 public:
  virtual ~StopPolicy() = default;
  // `local_stop`: whether this process wants to stop after the run that just finished.
  virtual bool decide(bool local_stop) = 0;
};

}  // namespace trainhooks
