#include "trainhooks/hooks/async_checkpoint_writer.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/coordinator.h"
#include "trainhooks/errors.h"

namespace trainhooks {

// Shared with the writer thread, which may outlive the AsyncCheckpointWriter until the
// Coordinator joins it.
struct AsyncCheckpointWriter::State {
  explicit State(std::shared_ptr<CheckpointManager> m) : manager(std::move(m)) {}

  const std::shared_ptr<CheckpointManager> manager;
  std::mutex mu;
  std::condition_variable cv;
  std::optional<SaverSnapshot> job;  // handed over, not started
  int64_t job_step = 0;
  bool writing = false;
  std::optional<Result> done;  // finished, not yet collected
  bool shutdown = false;
  bool alive = true;  // false once run() returned

  bool idle() const { return !job && !writing; }

  void run(const Coordinator& coord) {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      // Polls the Coordinator: a session closed while unwinding never calls shutdown().
      cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return job || shutdown; });
      if (job) {
        SaverSnapshot snapshot = std::move(*job);
        Result result{.step = job_step, .path = snapshot.path()};
        job.reset();
        writing = true;
        lock.unlock();
        try {
          manager->write(std::move(snapshot));
        } catch (...) {
          result.error = std::current_exception();
        }
        lock.lock();
        writing = false;
        done = std::move(result);
        cv.notify_all();
        continue;
      }
      if (shutdown || coord.should_stop()) {
        alive = false;
        cv.notify_all();
        return;
      }
    }
  }
};

AsyncCheckpointWriter::AsyncCheckpointWriter(std::shared_ptr<CheckpointManager> manager,
                                             Coordinator& coord, std::string thread_name) {
  if (!manager) throw InvalidArgument("AsyncCheckpointWriter: manager is null");
  state_ = std::make_shared<State>(std::move(manager));
  coord.start_thread(std::move(thread_name), [state = state_, c = &coord] { state->run(*c); });
}

AsyncCheckpointWriter::~AsyncCheckpointWriter() { shutdown(); }

bool AsyncCheckpointWriter::busy() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return !state_->idle();
}

bool AsyncCheckpointWriter::submit(SaverSnapshot& snapshot, int64_t step) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->alive) return false;
    if (!state_->idle() || state_->done) {
      throw FailedPreconditionError(
          "AsyncCheckpointWriter::submit: the previous write has not been collected");
    }
    state_->job = std::move(snapshot);
    state_->job_step = step;
  }
  state_->cv.notify_all();
  return true;
}

std::optional<AsyncCheckpointWriter::Result> AsyncCheckpointWriter::collect(bool wait) {
  std::unique_lock<std::mutex> lock(state_->mu);
  if (wait) state_->cv.wait(lock, [&] { return state_->idle() || !state_->alive; });
  std::optional<Result> done;
  done.swap(state_->done);
  return done;
}

void AsyncCheckpointWriter::shutdown() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->shutdown = true;
  }
  state_->cv.notify_all();
}

}  // namespace trainhooks
