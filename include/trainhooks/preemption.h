// PreemptionHandler: turns SIGTERM and SIGINT into a request to stop training cleanly.
//
// Schedulers (Kubernetes, Slurm, spot instances) announce a preemption with SIGTERM and kill the
// process some seconds later; a user stops a run with Ctrl-C (SIGINT). Both signals end the
// process at once by default, losing every step since the last checkpoint. While a
// PreemptionHandler exists, the first of these signals is only recorded: training code polls
// received_signal() between steps, stops, saves and returns normally (PreemptionHook does this
// for a MonitoredSession). A second signal, of either kind, ends the process at once with that
// signal's default action, so a stuck job can still be stopped by signalling it again.
//
//   th::PreemptionHandler handler;               // installs the handler
//   while (!done && !th::PreemptionHandler::received_signal()) train_one_step();
//   save_checkpoint();                           // then return normally
//
// Installation is reference-counted: the first living instance installs the handler with
// sigaction() and remembers the previous dispositions, the last one destroyed restores them, so
// several owners (a hook and the program itself) may coexist. A signal whose previous
// disposition is SIG_IGN stays ignored: the parent asked for that (a shell's background job
// ignores SIGINT). The recorded signal survives the last release, since the process was asked
// to end; clear() forgets it.
//
// The signal handler itself only stores the signal number in a lock-free atomic, or, for a second
// signal, resets that signal's disposition and re-raises it: it is async-signal-safe.
// Constructors, destructors and the accessors may be called from any thread.
#pragma once

#include <string>

namespace trainhooks {

class PreemptionHandler {
 public:
  PreemptionHandler();
  ~PreemptionHandler();
  PreemptionHandler(const PreemptionHandler&) = delete;
  PreemptionHandler& operator=(const PreemptionHandler&) = delete;

  // SIGTERM or SIGINT, the first one received while a handler was installed; 0 if none.
  static int received_signal();
  // Forgets the received signal (the next one is a first signal again).
  static void clear();
  // Whether some PreemptionHandler currently exists.
  static bool installed();
};

// "SIGTERM", "SIGINT", or "signal N" for another number.
std::string signal_name(int signal_number);

// The exit status of a program that stopped cleanly on `signal_number`: 128 + the signal (130 for
// SIGINT, 143 for SIGTERM), what a shell, Kubernetes and Slurm report for a process the signal
// ended. Not 0: a preempted run is not finished, and a scheduler that restarts failed jobs must
// run it again to continue from its checkpoint.
constexpr int exit_status_for_signal(int signal_number) { return 128 + signal_number; }

}  // namespace trainhooks
