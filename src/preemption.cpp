#include "trainhooks/preemption.h"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>

#include "trainhooks/errors.h"

namespace trainhooks {

namespace {

// Written by the signal handler: it must be lock-free to be async-signal-safe.
std::atomic<int> received{0};
static_assert(std::atomic<int>::is_always_lock_free);

constexpr int kSignals[] = {SIGTERM, SIGINT};
constexpr int kNumSignals = sizeof(kSignals) / sizeof(kSignals[0]);

// Installation state, guarded by install_mutex().
struct Installation {
  int count = 0;
  struct sigaction previous[kNumSignals];
  bool ours[kNumSignals] = {};
};

std::mutex& install_mutex() {
  static std::mutex mu;
  return mu;
}

Installation& installation() {
  static Installation inst;
  return inst;
}

void on_signal(int sig) {
  const int saved_errno = errno;  // the interrupted code may be about to read errno
  int expected = 0;
  if (!received.compare_exchange_strong(expected, sig)) {
    // A second signal: the process ends now, as it would have without a handler. The signal is
    // blocked while its handler runs, so the re-raised one is delivered when this returns.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    raise(sig);
  }
  errno = saved_errno;
}

[[noreturn]] void fail(const char* what, int sig, int err) {
  throw InternalError(fmt::format("PreemptionHandler: {} for {} failed: {}", what, signal_name(sig),
                                  std::strerror(err)));
}

}  // namespace

PreemptionHandler::PreemptionHandler() {
  std::lock_guard<std::mutex> lock(install_mutex());
  Installation& inst = installation();
  if (inst.count > 0) {
    ++inst.count;
    return;
  }
  for (int i = 0; i < kNumSignals; ++i) {
    const int sig = kSignals[i];
    if (sigaction(sig, nullptr, &inst.previous[i]) != 0)
      fail("reading the disposition", sig, errno);
    inst.ours[i] = false;
    if (!(inst.previous[i].sa_flags & SA_SIGINFO) && inst.previous[i].sa_handler == SIG_IGN) {
      continue;  // ignored on purpose by whoever started us
    }
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    // Restarting interrupted system calls keeps a checkpoint write in progress from failing with
    // EINTR when the signal arrives.
    sa.sa_flags = SA_RESTART;
    if (sigaction(sig, &sa, nullptr) != 0) {
      const int err = errno;
      for (int j = 0; j < i; ++j) {
        if (inst.ours[j]) sigaction(kSignals[j], &inst.previous[j], nullptr);
      }
      fail("installing the handler", sig, err);
    }
    inst.ours[i] = true;
  }
  inst.count = 1;
}

PreemptionHandler::~PreemptionHandler() {
  std::lock_guard<std::mutex> lock(install_mutex());
  Installation& inst = installation();
  if (--inst.count > 0) return;
  for (int i = 0; i < kNumSignals; ++i) {
    if (inst.ours[i]) sigaction(kSignals[i], &inst.previous[i], nullptr);
    inst.ours[i] = false;
  }
}

int PreemptionHandler::received_signal() { return received.load(); }

void PreemptionHandler::clear() { received.store(0); }

bool PreemptionHandler::installed() {
  std::lock_guard<std::mutex> lock(install_mutex());
  return installation().count > 0;
}

std::string signal_name(int signal_number) {
  switch (signal_number) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    default:
      return fmt::format("signal {}", signal_number);
  }
}

}  // namespace trainhooks
