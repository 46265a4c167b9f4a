// AsyncCheckpointWriter: writes checkpoints on a background thread while training goes on, one at
// a time, for any hook that saves (CheckpointSaverHook's async_save; keep-best, restore-best).
//
// The hook takes a snapshot on the training thread (CheckpointManager::snapshot: the copy is all
// it costs that thread) and submit()s it; the writer thread, registered with the session's
// Coordinator, writes and lists it (CheckpointManager::write). At most one write is in flight:
// submit() needs an idle writer, so a hook first collect()s the previous write, waiting for it.
// Finished writes are reported to the hook, on its thread, by collect(): the step, and the
// write's error, which the hook raises where a synchronous save would have raised it.
//
//   writer = std::make_unique<th::AsyncCheckpointWriter>(manager, coord);   // after_create_session
//   if (auto done = writer->collect(/*wait=*/true)) report(*done);          // before a save
//   th::SaverSnapshot snap = manager->snapshot(session, step);
//   if (!writer->submit(snap, step)) manager->write(std::move(snap));       // the writer has ended
//
// The thread ends at shutdown() (after the write in flight) or once the Coordinator has been asked
// to stop; from then on submit() returns false and the caller writes on its own thread. The
// thread's state outlives the writer until the Coordinator joins the thread.
//
// Thread-safety: all methods are for the thread that runs the session (one caller at a time).
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "trainhooks/checkpoint/saver.h"

namespace trainhooks {

class CheckpointManager;
class Coordinator;

class AsyncCheckpointWriter {
 public:
  // A write that finished: its step and, when it failed, its error.
  struct Result {
    int64_t step = 0;
    std::string path;
    std::exception_ptr error;
  };

  // Starts the writer thread with coord.start_thread(thread_name, ...). InvalidArgument for a
  // null manager.
  AsyncCheckpointWriter(std::shared_ptr<CheckpointManager> manager, Coordinator& coord,
                        std::string thread_name = "AsyncCheckpointWriter");
  // shutdown(); does not wait for the write in flight (the Coordinator joins the thread).
  ~AsyncCheckpointWriter();
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;

  // A write handed over or in progress.
  bool busy() const;
  // Hands `snapshot` (of the checkpoint of `step`) to the writer thread and returns true; false,
  // leaving `snapshot` with the caller, once the thread has ended. FailedPreconditionError when a
  // write is still in flight or its result has not been collected.
  bool submit(SaverSnapshot& snapshot, int64_t step);
  // The finished write not collected yet, if any; `wait`: first waits for a write in flight (not
  // when the thread has ended).
  std::optional<Result> collect(bool wait);
  // Ends the thread once the write in flight is done; idempotent.
  void shutdown();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace trainhooks
