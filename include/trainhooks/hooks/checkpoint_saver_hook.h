// CheckpointSaverHook: saves checkpoints every N steps or seconds (TF's), and
// CheckpointSaverListener, which acts around each save.
//
// Fetches nothing: the global step is read from the session as a host integer.
//   begin()                 needs a global step (RuntimeError "Global step should be created to
//                           use CheckpointSaverHook."), creates checkpoint_dir, opens its event
//                           file (summary::EventWriter::for_logdir) and calls every listener's
//                           begin()
//   after_create_session()  saves at the current global step (0 on a fresh start, the restored
//                           step after a restore) and starts the timer there
//   after_run()             saves when the SecondOrStepTimer triggers for the global step
//   end()                   saves if the last global step was not saved yet, calls every
//                           listener's end(session, step) and flushes the event file
// A save logs TF's lines and writes SessionLog CHECKPOINT (checkpoint_path = PATH) at step N to
// the event file of checkpoint_dir:
//   Calling checkpoint listeners before saving checkpoint N...
//   Saving checkpoints for N into PATH.          PATH = <checkpoint_dir>/<checkpoint_basename>
//   Calling checkpoint listeners after saving checkpoint N...
// The files are written by the Saver (saver.h) as PATH-N. A listener's after_save() returning true
// requests a stop after the current run (logged); the run's results are still returned.
//
//   auto hook = std::make_shared<th::CheckpointSaverHook>(
//       "runs/exp1", th::CheckpointSaverHookOptions{.save_steps = 1000});
//   th::MonitoredSession sess(std::make_unique<th::ChiefSessionCreator>(g), {hook});
//
// Save secs are measured on the hook's Env clock (steady time), so a FakeClock drives them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/hook.h"
#include "trainhooks/timer.h"

namespace trainhooks {

namespace summary {
class EventWriter;
}

// Acts around the saves of a CheckpointSaverHook (TF's CheckpointSaverListener). All methods
// run on the training thread; the defaults do nothing.
class CheckpointSaverListener {
 public:
  virtual ~CheckpointSaverListener() = default;
  virtual void begin() {}
  virtual void before_save(Session& session, int64_t global_step_value) {}
  // true: request that training stop after the current run.
  virtual bool after_save(Session& session, int64_t global_step_value) { return false; }
  virtual void end(Session& session, int64_t global_step_value) {}
};

struct CheckpointSaverHookOptions {
  // Exactly one (TF's texts otherwise: "Can not provide both every_secs and every_steps.",
  // "Either every_secs or every_steps should be provided.").
  std::optional<double> save_secs;
  std::optional<int64_t> save_steps;
  // The Saver to use; null: one made with saver_options on the hook's graph. A Saver shared
  // with the session creator (which restores) keeps one retention list.
  std::shared_ptr<Saver> saver;
  std::string checkpoint_basename = "model.ckpt";
  std::vector<std::shared_ptr<CheckpointSaverListener>> listeners;
  // Used when saver is null; a null env member there takes the hook's.
  SaverOptions saver_options;
};

class CheckpointSaverHook : public SessionRunHook {
 public:
  // InvalidArgument for an empty checkpoint_dir or checkpoint_basename, a basename with a
  // directory part, a null listener, or bad save_secs / save_steps.
  CheckpointSaverHook(std::string checkpoint_dir, CheckpointSaverHookOptions options);
  ~CheckpointSaverHook() override;

  void begin() override;
  void after_create_session(Session& session, Coordinator& coord) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  void end(Session& session) override;

  // <checkpoint_dir>/<checkpoint_basename>: the prefix of every checkpoint this hook writes.
  const std::string& save_path() const { return save_path_; }
  // The Saver in use (null before begin() when none was given).
  const std::shared_ptr<Saver>& saver() const { return saver_; }

 private:
  // Saves at `step`; true when a listener asked to stop.
  bool save(Session& session, int64_t step);

  std::string checkpoint_dir_;
  std::string save_path_;
  CheckpointSaverHookOptions options_;
  SecondOrStepTimer timer_;
  std::shared_ptr<Saver> saver_;
  std::shared_ptr<summary::EventWriter> writer_;
};

}  // namespace trainhooks
