#include "trainhooks/coordinator.h"

#include <chrono>

#include "trainhooks/errors.h"

namespace trainhooks {

namespace {
bool is_out_of_range(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const OutOfRangeError&) {
    return true;
  } catch (...) {
    return false;
  }
}
}  // namespace

Coordinator::~Coordinator() {
  std::list<Worker> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    stop_flag_.store(true, std::memory_order_release);
    cv_.notify_all();
    workers.swap(workers_);
  }
  // Threads not joined by join() (a session destroyed while unwinding) are asked to stop and
  // joined: they reference this coordinator, so none may outlive it.
  for (auto& w : workers)
    if (w.thread.joinable()) w.thread.join();
}

void Coordinator::request_stop(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error && !error_ && !is_out_of_range(error)) {
    error_ = error;
    has_error_.store(true, std::memory_order_release);
  }
  stop_ = true;
  stop_flag_.store(true, std::memory_order_release);
  cv_.notify_all();
}

bool Coordinator::wait_for_stop(double timeout_secs) const {
  std::unique_lock<std::mutex> lock(mu_);
  if (timeout_secs < 0) {
    cv_.wait(lock, [&] { return stop_; });
    return true;
  }
  return cv_.wait_for(lock, std::chrono::duration<double>(timeout_secs), [&] { return stop_; });
}

void Coordinator::clear_stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = false;
  stop_flag_.store(false, std::memory_order_release);
  has_error_.store(false, std::memory_order_release);
  joined_ = false;
  error_ = nullptr;
}

void Coordinator::start_thread(std::string name, std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  workers_.emplace_back();
  Worker* w = &workers_.back();
  w->name = std::move(name);
  w->thread = std::thread([this, w, fn = std::move(fn)] {
    try {
      fn();
    } catch (...) {
      request_stop(std::current_exception());
    }
    std::lock_guard<std::mutex> inner(mu_);
    w->done = true;
    cv_.notify_all();
  });
}

size_t Coordinator::num_threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return workers_.size();
}

void Coordinator::join(double stop_grace_period_secs) {
  std::unique_lock<std::mutex> lock(mu_);
  auto all_done = [&] {
    for (const auto& w : workers_)
      if (!w.done) return false;
    return true;
  };
  // Wait for a stop request or for every thread to end by itself.
  cv_.wait(lock, [&] { return stop_ || all_done(); });
  cv_.wait_for(lock, std::chrono::duration<double>(stop_grace_period_secs), all_done);
  std::string stragglers;
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->done) {
      std::thread t = std::move(it->thread);
      it = workers_.erase(it);
      lock.unlock();
      if (t.joinable()) t.join();
      lock.lock();
    } else {
      if (!stragglers.empty()) stragglers += ", ";
      stragglers += it->name;
      ++it;
    }
  }
  joined_ = true;
  auto error = error_;
  lock.unlock();
  if (error) std::rethrow_exception(error);
  if (!stragglers.empty())
    throw RuntimeError("Coordinator stopped with threads still running: " + stragglers);
}

bool Coordinator::joined() const {
  std::lock_guard<std::mutex> lock(mu_);
  return joined_;
}

void Coordinator::raise_requested_exception() const {
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    error = error_;
  }
  if (error) std::rethrow_exception(error);
}

std::exception_ptr Coordinator::requested_exception() const {
  if (!has_error()) return nullptr;  // the training loop's usual case
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

}  // namespace trainhooks
