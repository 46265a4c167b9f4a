#include "input_prefetcher.h"

#include <ATen/Config.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <pthread.h>

#include <fmt/format.h>

#include <system_error>
#include <utility>

#include "trainhooks/errors.h"

namespace trainhooks::internal {

namespace {

// LibTorch's intra-op parallelism is OpenMP here (ATen/Config.h), whose thread count belongs to
// each thread: a new thread's first parallel operation sets it to at::set_num_threads()'s count
// and then runs a team of that many OpenMP threads of its own. For a batch of a few hundred
// kilobytes that buys nothing and takes CPUs from the training step (OpenMP's threads also spin
// a while after each region), so a worker runs its operations on itself alone. Only this
// thread's count changes: at::set_num_threads() would change the process's.
void use_one_intra_op_thread() {
#if AT_PARALLEL_OPENMP
  at::get_num_threads();  // ATen's per-thread set-up first: it would undo the count set below
  // libgomp comes with LibTorch, which links it; LibTorch's CMake package does not name it, so it
  // is looked up rather than linked.
  using SetNumThreads = void (*)(int);
  static const auto set_num_threads =
      reinterpret_cast<SetNumThreads>(::dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (set_num_threads) set_num_threads(1);
#endif
}

}  // namespace

void InputPrefetcherDeleter::operator()(InputPrefetcher* prefetcher) const noexcept {
  delete prefetcher;
}

std::unique_ptr<InputPrefetcher, InputPrefetcherDeleter> start_prefetcher(const InputGroup& group) {
  return std::unique_ptr<InputPrefetcher, InputPrefetcherDeleter>(new InputPrefetcher(group));
}

InputPrefetcher::InputPrefetcher(const InputGroup& group)
    : name_(group.name),
      source_(group.source),
      size_(static_cast<int64_t>(group.source->size())),
      num_components_(group.nodes.size()) {
  restart_locked(group.options, group.position);
  const auto workers = static_cast<size_t>(group.options.num_workers);
  threads_.reserve(workers);
  try {
    for (size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
  } catch (const std::system_error& e) {
    // The threads started so far stop with this object.
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    space_.notify_all();
    for (auto& t : threads_) t.join();
    throw ResourceExhaustedError(fmt::format("input '{}': cannot start worker thread {} of {}: {}",
                                             name_, threads_.size() + 1, workers, e.what()));
  }
}

InputPrefetcher::~InputPrefetcher() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  space_.notify_all();
  ready_.notify_all();
  for (auto& t : threads_) t.join();
}

void InputPrefetcher::restart(const InputOptions& options, const InputPosition& position) {
  std::deque<Slot> discarded;
  {
    std::lock_guard lock(mutex_);
    discarded.swap(slots_);  // their tensors are freed below, outside the lock
    restart_locked(options, position);
  }
  space_.notify_all();
}

void InputPrefetcher::restart_locked(const InputOptions& options, const InputPosition& position) {
  ++generation_;
  if (!options_ || options_->seed != options.seed || options_->shuffle != options.shuffle)
    order_epoch_ = -1;
  options_ = std::make_shared<const InputOptions>(options);
  capacity_ = options.prefetch;
  planned_ = position;
  halted_ = false;
  slots_.clear();
  first_sequence_ = next_sequence_ = 0;
}

bool InputPrefetcher::plan(Task& task) {
  const InputOptions& o = *options_;
  try {
    task.place = next_place(name_, size_, o, planned_);
  } catch (const OutOfRangeError&) {
    // The runs end there too (next_batch() plans with the same function), and never ask for more.
    halted_ = true;
    return false;
  }
  slots_.push_back({.place = task.place});
  try {
    if (order_epoch_ != task.place.epoch) {
      order_epoch_ = -1;
      build_order(o, size_, task.place.epoch, order_);
      order_epoch_ = task.place.epoch;
    }
    fill_indices(o, order_, task.place, task.indices);
  } catch (...) {
    // Out of memory: that batch fails in its run, which then plans again from it (take()).
    slots_.back().error = std::current_exception();
    slots_.back().ready = true;
    ++next_sequence_;
    halted_ = true;
    return false;
  }
  skip(planned_, task.place, o);
  task.generation = generation_;
  task.sequence = next_sequence_++;
  task.options = options_;
  return true;
}

void InputPrefetcher::work() {
  use_one_intra_op_thread();
  // Named for `top -H` and debuggers: at most 15 characters.
  ::pthread_setname_np(::pthread_self(), ("input " + name_).substr(0, 15).c_str());
  Task task;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      space_.wait(lock, [&] {
        return stop_ || (!halted_ && static_cast<int64_t>(slots_.size()) < capacity_);
      });
      if (stop_) return;
      if (!plan(task)) {
        ready_.notify_all();  // a take() waiting past the end finds out (see take())
        continue;
      }
    }
    std::vector<at::Tensor> batch;
    std::exception_ptr error;
    try {
      batch = make_batch(name_, *source_, *task.options, task.place, task.indices, num_components_);
    } catch (...) {
      error = std::current_exception();
    }
    bool first = false;
    {
      std::lock_guard lock(mutex_);
      if (task.generation == generation_) {
        Slot& slot = slots_[task.sequence - first_sequence_];
        slot.batch = std::move(batch);
        slot.error = std::move(error);
        slot.ready = true;
        first = task.sequence == first_sequence_;
      }
    }
    if (first) ready_.notify_one();
    // A discarded batch is freed here, outside the lock.
  }
}

std::vector<at::Tensor> InputPrefetcher::take(const BatchPlace& place) {
  std::unique_lock lock(mutex_);
  for (int attempt = 0;; ++attempt) {
    ready_.wait(lock, [&] {
      return slots_.empty() ? halted_ : slots_.front().ready || slots_.front().place != place;
    });
    if (!slots_.empty() && slots_.front().place == place) {
      Slot slot = std::move(slots_.front());
      slots_.pop_front();
      ++first_sequence_;
      if (slot.error) {
        // Not read: the next run asks for this batch again, and it is made again then, as it
        // would be without threads (a cause that has gone by then is gone for it too).
        ++generation_;
        slots_.clear();
        halted_ = true;
        lock.unlock();
        std::rethrow_exception(slot.error);
      }
      lock.unlock();
      space_.notify_one();
      return std::move(slot.batch);
    }
    // After an error, the threads wait to be told where to go on; otherwise the runs' position
    // moved without restart(), or the threads ended where the runs do not: both would mean a
    // change of options that restart() was not told of.
    if (attempt > 0) {
      throw InternalError(
          fmt::format("input '{}': the worker threads cannot make the batch at epoch {}, offset {}",
                      name_, place.epoch, place.offset));
    }
    restart_locked(*options_, {.epoch = place.epoch, .offset = place.offset});
    space_.notify_all();
  }
}

}  // namespace trainhooks::internal
