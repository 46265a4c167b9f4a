// CheckpointSaverHook: saves checkpoints every N steps or seconds (TF's), and
// CheckpointSaverListener, which acts around each save.
//
// Fetches nothing: the global step is read from the session as a host integer.
//   begin()                 needs a global step (RuntimeError "Global step should be created to
//                           use CheckpointSaverHook."), creates checkpoint_dir, opens its event
//                           file (summary::EventWriter::for_logdir) and calls every listener's
//                           begin()
//   after_create_session()  saves at the current global step (0 on a fresh start, the restored
//                           step after a restore) and starts the timer there; with
//                           save_graph_def, asks the session to record its next run's
//                           evaluation (Session::record_trace)
//   after_run()             the first time, with save_graph_def: writes the graph (below); saves
//                           when the SecondOrStepTimer triggers for the global step
//   end()                   saves if the last global step was not saved yet, calls every
//                           listener's end(session, step) and flushes the event file
// A save logs TF's lines and writes SessionLog CHECKPOINT (checkpoint_path = PATH) at step N to
// the event file of checkpoint_dir:
//   Calling checkpoint listeners before saving checkpoint N...
//   Saving checkpoints for N into PATH.          PATH = <checkpoint_dir>/<checkpoint_basename>
//   Calling checkpoint listeners after saving checkpoint N...
// The checkpoints are written, named (PATH-N), listed and retained by a CheckpointManager
// (checkpoint/checkpoint_manager.h): the one given, or one the hook makes in begin() of
// checkpoint_dir, checkpoint_basename and the retention of saver_options (or of the given
// TensorFlow 1 saver's options); keep-best (checkpoint/keep_best.h) is a policy of a given
// manager, whose scores the hook passes with each save: the latest value of its metric on the
// graph's LatestMetrics. A listener's after_save() returning true requests a stop after the current
// run (logged); the run's results are still returned.
//
//   auto hook = std::make_shared<th::CheckpointSaverHook>(
//       "runs/exp1", th::CheckpointSaverHookOptions{.save_steps = 1000});
//   th::MonitoredSession sess(std::make_unique<th::ChiefSessionCreator>(g), {hook});
//
//   auto manager = std::make_shared<th::CheckpointManager>(
//       "runs/exp1", th::CheckpointManagerOptions{.max_to_keep = 3});
//   auto hook = std::make_shared<th::CheckpointSaverHook>(
//       manager, th::CheckpointSaverHookOptions{.save_secs = 600});
//
// The graph (save_graph_def, TF's): as TF's CheckpointSaverHook, the hook writes the session's
// graph as TensorFlow's GraphDef (graph_export.h) to `<checkpoint_dir>/graph.pbtxt` (text format,
// written crash-safely) and as a graph event (Event.graph_def, step 0) to checkpoint_dir's event
// file and graph_summary_dir's. Unlike TF it does so after the session's first run, which it
// records: ops read their inputs inside closures, so the edges are known only then (a node that
// run did not evaluate has no inputs in the GraphDef). When graph.pbtxt already holds the same
// text (a resumed run of the same model), neither is written again; a changed model writes both.
//
// Save secs are measured on the hook's Env clock (steady time), so a FakeClock drives them.
//
// When the manager's newest checkpoint is already the one of the global step of
// after_create_session() (CheckpointManager::saved_at: the one just restored from, with a manager
// shared with the session creator as MonitoredTrainingSession does), it is not written again:
// rewriting the files a restart depends on would only open a window in which a crash could damage
// them.
//
// async_save: a save copies the state into host memory on the training thread
// (CheckpointManager::snapshot) and an AsyncCheckpointWriter (hooks/async_checkpoint_writer.h)
// writes it on a thread of the session's Coordinator while training goes on. At most one save is
// in flight: a trigger during a write first waits for that write to finish (logged, as TF's
// AsyncCheckpointSaverHook). A finished write is
// reported on the training thread at the next after_run(): the SessionLog CHECKPOINT event, the
// "Calling checkpoint listeners after saving" line and every listener's after_save() happen
// then, and a write error is raised from there (as a synchronous save would raise it from the
// step that triggered it). end() waits for the last write, reports it (raising its error after
// the listeners' end()), and writes the final checkpoint synchronously when the last step was
// not saved yet. Once the session's Coordinator has been asked to stop, the writer ends and any
// later save (the one in end(), say) is written synchronously.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/checkpoint/tf1_saver.h"
#include "trainhooks/hook.h"
#include "trainhooks/hooks/async_checkpoint_writer.h"
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
  // Exactly one, positive (SecondOrStepTimer's texts otherwise: "Can not provide both save_secs
  // and save_steps.", "Either save_secs or save_steps should be provided.",
  // "CheckpointSaverHook: save_steps must be positive, got 0").
  std::optional<double> save_secs;
  std::optional<int64_t> save_steps;
  // Without a given CheckpointManager: the hook's manager takes its retention and Env from this
  // TensorFlow 1 Saver's options (TF's `saver` argument; it must be on the session's graph);
  // null: from saver_options.
  std::shared_ptr<compat::v1::Saver> saver;
  // Without a given CheckpointManager: the checkpoints' basename.
  std::string checkpoint_basename = "model.ckpt";
  std::vector<std::shared_ptr<CheckpointSaverListener>> listeners;
  // Used when neither a manager nor a saver is given; a null env member there takes the hook's.
  compat::v1::SaverOptions saver_options;
  // Write checkpoints on a background thread (see above).
  bool async_save = false;
  // TF's save_graph_def: write the graph after the first run (see above).
  bool save_graph_def = true;
  // Another directory whose event file also gets the graph event (MonitoredTrainingSession: its
  // summary_dir when that is not checkpoint_dir); empty: none.
  std::string graph_summary_dir;
};

class CheckpointSaverHook : public SessionRunHook {
 public:
  // InvalidArgument for an empty checkpoint_dir or checkpoint_basename, a basename with a
  // directory part, a null listener, or bad save_secs / save_steps.
  CheckpointSaverHook(std::string checkpoint_dir, CheckpointSaverHookOptions options);
  // Saves through `manager` (its directory, basename and retention); options.saver,
  // checkpoint_basename and saver_options are not used. InvalidArgument for a null manager, a
  // given saver, a null listener, or bad save_secs / save_steps.
  CheckpointSaverHook(std::shared_ptr<CheckpointManager> manager,
                      CheckpointSaverHookOptions options);
  ~CheckpointSaverHook() override;

  void begin() override;
  void after_create_session(Session& session, Coordinator& coord) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  Calls calls() const override { return {.before_run = false}; }
  void end(Session& session) override;

  // <checkpoint_dir>/<checkpoint_basename>: the prefix of every checkpoint this hook writes.
  const std::string& save_path() const { return save_path_; }
  // The Saver given in the options (null when none was).
  const std::shared_ptr<compat::v1::Saver>& saver() const { return options_.saver; }
  // The CheckpointManager in use (null before begin() when none was given).
  const std::shared_ptr<CheckpointManager>& manager() const { return manager_; }

 private:
  // Saves at `step`; true when a listener asked to stop (synchronous saves only).
  bool save(Session& session, int64_t step);
  // Synchronous: the after-save half of save(); async: also called when a write is reported.
  bool after_save(Session& session, int64_t step);
  // Async: reports a finished write, waiting for one in flight when `wait`; true when a
  // listener asked to stop. Raises the write's error.
  bool report_write(Session& session, bool wait);
  // The graph to graph.pbtxt and the event files, unless graph.pbtxt already holds it.
  void write_graph(Session& session);

  std::string checkpoint_dir_;
  std::string save_path_;
  CheckpointSaverHookOptions options_;
  SecondOrStepTimer timer_;
  bool manager_given_ = false;
  std::shared_ptr<CheckpointManager> manager_;
  std::shared_ptr<summary::EventWriter> writer_;
  std::shared_ptr<summary::EventWriter> graph_writer_;  // graph_summary_dir's
  // save_graph_def: the session records its run until the graph is written.
  bool graph_pending_ = false;
  bool graph_written_ = false;
  std::unique_ptr<AsyncCheckpointWriter> async_;
};

}  // namespace trainhooks
