// The threads of an input that works ahead (InputOptions::prefetch, num_workers): they plan the
// batches after a position with the very functions next_batch() uses (input_group.h), make up to
// `prefetch` of them at once (source->get_batch and the transform, each batch on one thread) and
// hand them over strictly in order.
//
//   group.prefetcher = start_prefetcher(group);        // from group.position
//   group.batch = group.prefetcher->take(place);       // the batch at `place`, waiting for it
//   group.prefetcher->restart(options, position);      // a new position: ahead-work discarded
//
// A batch depends only on its place and the options, so the order in which threads finish makes
// no difference. The queue is bounded: a thread plans a batch only while fewer than `prefetch`
// are being made or waiting to be taken. Work of a discarded generation (restart) is dropped
// when it ends. The destructor stops every thread and waits for the batches being made (at most
// one get_batch and transform per thread), never for a queue that no one drains.
//
// take() and restart() are called by the graph's thread only (Graph is not thread-safe); the
// workers share only this object's state, under its mutex, and the source and transform.
#pragma once

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "input_group.h"
#include "trainhooks/input.h"

namespace trainhooks::internal {

class InputPrefetcher {
 public:
  // Threads for `group`'s source, reading from group.position with group.options (prefetch > 0).
  explicit InputPrefetcher(const InputGroup& group);
  ~InputPrefetcher();
  InputPrefetcher(const InputPrefetcher&) = delete;
  InputPrefetcher& operator=(const InputPrefetcher&) = delete;

  // The batch at `place`, the next one the runs read: waits until a thread has made it. Throws
  // the error a thread got making it, and discards the work ahead: the next take() (the next
  // run, reading the same place again, as next_batch() without threads would) starts it again.
  // Should the threads be elsewhere (a position changed without restart()), they start again at
  // `place`.
  std::vector<at::Tensor> take(const BatchPlace& place);

  // Discards every batch made or being made and plans again from `position` with `options`.
  void restart(const InputOptions& options, const InputPosition& position);

 private:
  struct Slot {
    BatchPlace place;
    bool ready = false;
    std::vector<at::Tensor> batch;
    std::exception_ptr error;
  };
  struct Task {
    uint64_t generation = 0;
    uint64_t sequence = 0;
    BatchPlace place;
    std::vector<int64_t> indices;
    std::shared_ptr<const InputOptions> options;
  };

  void work();
  // Plans the next batch into `task` (the mutex held); false when planning halts.
  bool plan(Task& task);
  void restart_locked(const InputOptions& options, const InputPosition& position);

  const std::string name_;
  const std::shared_ptr<InputSource> source_;
  const int64_t size_;
  const size_t num_components_;

  std::mutex mutex_;
  std::condition_variable space_;  // workers: a slot is free, a restart, or stop
  std::condition_variable ready_;  // take(): the first slot is ready, or planning halted
  bool stop_ = false;
  uint64_t generation_ = 0;
  std::shared_ptr<const InputOptions> options_;
  int64_t capacity_ = 0;
  InputPosition planned_;       // the position after the last batch planned
  bool halted_ = false;         // no planning: the end of data, or an error taken
  std::vector<int64_t> order_;  // the order of epoch order_epoch_
  int64_t order_epoch_ = -1;
  std::deque<Slot> slots_;       // batches planned and not taken, in order
  uint64_t first_sequence_ = 0;  // of slots_.front()
  uint64_t next_sequence_ = 0;   // of the next batch planned
  std::vector<std::thread> threads_;
};

std::unique_ptr<InputPrefetcher, InputPrefetcherDeleter> start_prefetcher(const InputGroup& group);

}  // namespace trainhooks::internal
