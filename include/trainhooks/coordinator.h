// Coordinator: stop requests shared by the training loop and background threads (TF's).
//
// request_stop(error) makes should_stop() true for everyone; the first error given is kept and
// re-raised by join() (OutOfRangeError counts as a clean stop and is not kept). Threads started
// with start_thread() report an escaping exception through request_stop. join(grace) waits for
// a stop request, then up to `grace` seconds for the threads to finish; threads still running are
// named in a RuntimeError ("Coordinator stopped with threads still running: ...").
//
//   th::Coordinator coord;
//   coord.start_thread("writer", [&] { while (!coord.should_stop()) write_one(); });
//   ...
//   coord.request_stop();
//   coord.join(/*stop_grace_period_secs=*/120);
//
// All methods are thread-safe; should_stop() takes no lock (the training loop asks every step).
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace trainhooks {

class Coordinator {
 public:
  Coordinator() = default;
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  void request_stop(std::exception_ptr error = nullptr);
  bool should_stop() const { return stop_flag_.load(std::memory_order_acquire); }
  // Whether an error is stored (requested_exception() is non-null), without the lock.
  bool has_error() const { return has_error_.load(std::memory_order_acquire); }
  // Waits up to `timeout_secs` (< 0: forever) for a stop request; true if one was made.
  bool wait_for_stop(double timeout_secs = -1) const;
  void clear_stop();

  // Runs `fn` on a new thread owned by this coordinator.
  void start_thread(std::string name, std::function<void()> fn);
  // Threads started and not yet joined.
  size_t num_threads() const;

  // Waits for a stop request, then joins the threads (see above); re-raises a stored error.
  void join(double stop_grace_period_secs = 120);
  bool joined() const;
  // Throws the stored error, if any.
  void raise_requested_exception() const;
  // The stored error (null when none).
  std::exception_ptr requested_exception() const;

 private:
  struct Worker {
    std::string name;
    std::thread thread;
    bool done = false;
  };
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool stop_ = false;
  // Mirrors of stop_ and error_ != nullptr, read without the lock on every training step.
  std::atomic<bool> stop_flag_{false};
  std::atomic<bool> has_error_{false};
  bool joined_ = false;
  std::exception_ptr error_;
  std::list<Worker> workers_;
};

}  // namespace trainhooks
