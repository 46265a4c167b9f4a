// A bounded single-consumer queue that hands its consumer everything queued at once.
//
// Producers fill slots in place (a slot keeps its allocations, so steady-state pushes do not
// allocate) and block while `capacity` items wait. The consumer swaps the filled buffer with its
// own, so it works on a batch without holding the lock while producers refill the other buffer.
// Besides items it carries flush requests (a producer waits until the consumer reports the batch
// taken after the request as flushed) and close (producers are refused; the consumer drains).
//
// Wake-ups are sent only to a side that is actually waiting, keeping the uncontended push to a
// lock, a copy into the slot and an unlock.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

namespace trainhooks::summary {

template <typename T>
class BatchQueue {
 public:
  using Clock = std::chrono::steady_clock;

  struct Batch {
    std::span<T> items;
    uint64_t flush_ticket = 0;  // nonzero: flush, then call flushed(flush_ticket)
    bool closed = false;        // last batch: process it, then call finished()
  };

  explicit BatchQueue(size_t capacity) : capacity_(capacity), front_(capacity), back_(capacity) {}

  size_t capacity() const { return capacity_; }

  // Calls fill(slot) on a free slot, waiting while the queue is full. Returns false without
  // calling fill once the queue is closed.
  template <typename Fill>
  bool push(Fill&& fill) {
    std::unique_lock lock(mu_);
    if (count_ == capacity_ && !closed_) {
      lock.unlock();
      spin_until([&] {
        return count_.load(std::memory_order_relaxed) < capacity_ ||
               closed_flag_.load(std::memory_order_relaxed);
      });
      lock.lock();
    }
    while (count_ == capacity_ && !closed_) {
      ++producers_waiting_;
      space_cv_.wait(lock);
      --producers_waiting_;
    }
    if (closed_) return false;
    fill(front_[count_]);
    count_.store(count_ + 1, std::memory_order_relaxed);
    const bool wake = consumer_waiting_;
    consumer_waiting_ = false;
    lock.unlock();
    if (wake) work_cv_.notify_one();
    return true;
  }

  // Returns when everything pushed before the call has been taken and flushed by the consumer,
  // or at once if the queue is closed.
  void flush() {
    std::unique_lock lock(mu_);
    if (closed_) return;
    const uint64_t ticket = ++flush_requested_;
    flush_requested_flag_.store(ticket, std::memory_order_relaxed);
    if (consumer_waiting_) {
      consumer_waiting_ = false;
      work_cv_.notify_one();
    }
    done_cv_.wait(lock, [&] { return flush_done_ >= ticket || finished_; });
  }

  // Consumer: waits for items, a flush request or close, at most until `deadline`; then takes
  // everything queued (possibly nothing).
  Batch take(Clock::time_point deadline) {
    std::unique_lock lock(mu_);
    if (count_ == 0 && flush_requested_ == flush_taken_ && !closed_) {
      lock.unlock();
      const uint64_t taken = flush_taken_;
      spin_until([&] {
        return count_.load(std::memory_order_relaxed) > 0 ||
               flush_requested_flag_.load(std::memory_order_relaxed) != taken ||
               closed_flag_.load(std::memory_order_relaxed);
      });
      lock.lock();
    }
    while (count_ == 0 && flush_requested_ == flush_taken_ && !closed_) {
      consumer_waiting_ = true;
      if (work_cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
        consumer_waiting_ = false;
        break;
      }
    }
    consumer_waiting_ = false;
    std::swap(front_, back_);
    Batch batch{.items = std::span<T>(back_.data(), count_.load(std::memory_order_relaxed))};
    count_.store(0, std::memory_order_relaxed);
    if (flush_requested_ != flush_taken_) batch.flush_ticket = flush_taken_ = flush_requested_;
    batch.closed = closed_;
    const bool wake = producers_waiting_ > 0;
    lock.unlock();
    if (wake) space_cv_.notify_all();
    return batch;
  }

  // Consumer: the batch with this ticket (and all before it) is flushed.
  void flushed(uint64_t ticket) {
    std::lock_guard lock(mu_);
    flush_done_ = ticket;
    done_cv_.notify_all();
  }

  // Refuses further pushes and wakes everyone; the consumer's next take() returns closed.
  void close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    closed_flag_.store(true, std::memory_order_relaxed);
    work_cv_.notify_all();
    space_cv_.notify_all();
  }

  // Consumer: the closed batch is processed; releases every flush() waiter.
  void finished() {
    std::lock_guard lock(mu_);
    finished_ = true;
    flush_done_ = flush_taken_ = flush_requested_;
    done_cv_.notify_all();
  }

  // Accepts pushes again after close() and finished().
  void reopen() {
    std::lock_guard lock(mu_);
    closed_ = false;
    closed_flag_.store(false, std::memory_order_relaxed);
    finished_ = false;
    count_.store(0, std::memory_order_relaxed);
  }

  bool closed() const {
    std::lock_guard lock(mu_);
    return closed_;
  }

 private:
  // Before sleeping, a side polls briefly (yielding the CPU): while the other side is busy, the
  // wait is usually shorter than a sleep and wake-up, which would cost both sides a system call.
  template <typename Ready>
  static void spin_until(Ready&& ready) {
    for (int i = 0; i < kSpins && !ready(); ++i) std::this_thread::yield();
  }
  static constexpr int kSpins = 16;  // a few microseconds; a busy peer needs far less

  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;   // consumer waits for work
  std::condition_variable space_cv_;  // producers wait for a free slot
  std::condition_variable done_cv_;   // flush() waits for the consumer
  std::vector<T> front_;              // producers fill [0, count_)
  std::vector<T> back_;               // the consumer's batch
  // Written under mu_; read without it only while spinning.
  std::atomic<size_t> count_{0};
  std::atomic<bool> closed_flag_{false};
  std::atomic<uint64_t> flush_requested_flag_{0};
  int producers_waiting_ = 0;
  bool consumer_waiting_ = false;
  bool closed_ = false;
  bool finished_ = false;
  uint64_t flush_requested_ = 0;
  uint64_t flush_taken_ = 0;
  uint64_t flush_done_ = 0;
};

}  // namespace trainhooks::summary
