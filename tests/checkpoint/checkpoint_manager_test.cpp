#include "trainhooks/checkpoint/checkpoint_manager.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/zeros.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/saver_test_model.h"
#include "test_util.h"
#include "trainhooks/checkpoint/checkpoint_reader.h"
#include "trainhooks/checkpoint/checkpoint_state.h"
#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/checkpoint/variables.h"
#include "trainhooks/errors.h"
#include "trainhooks/session.h"

namespace th = trainhooks;
namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace checkpoint_manager_test {

using namespace th::testing::saver_fixture;

class CheckpointManagerTest : public SaverTest {
 protected:
  th::CheckpointManagerOptions manager_options(int max_to_keep = 5) {
    return {.max_to_keep = max_to_keep, .env = fe.env()};
  }
  // Advances the fake clock to t0 + `t` and saves the model's state as step `step`.
  void save_at(th::CheckpointManager& manager, th::Session& s, int64_t step, double t) {
    fe.clock->advance(t0 + t - fe.clock->wall_seconds());
    manager.save(s, step);
  }

  double t0 = fe.clock->wall_seconds();
};

TEST_F(CheckpointManagerTest, PathForAndStepOfAreOneNamingRule) {
  th::CheckpointManager manager(dir.path(), manager_options());
  EXPECT_EQ(manager.prefix(), dir.file("model.ckpt"));
  for (int64_t step : {int64_t{0}, int64_t{7}, int64_t{1200}, int64_t{1} << 40}) {
    const std::string path = manager.path_for(step);
    EXPECT_EQ(path, dir.file("model.ckpt-" + std::to_string(step)));
    EXPECT_EQ(th::CheckpointManager::step_of(path), step);
  }
  EXPECT_EQ(th::CheckpointManager::path_for("runs/my-model", 3), "runs/my-model-3");
  EXPECT_EQ(th::CheckpointManager::step_of("runs/my-model-3"), 3);
  for (const char* other : {"model.ckpt", "model.ckpt-", "model.ckpt-+3", "model.ckpt--",
                            "model.ckpt-3a", "model.ckpt-3.trainstate", "run-1/model.ckpt", ""}) {
    EXPECT_EQ(th::CheckpointManager::step_of(other), std::nullopt) << other;
  }
  EXPECT_THAT(th::testing::error_message<th::InvalidArgument>([&] { manager.path_for(-1); }),
              HasSubstr("invalid step -1"));
}

TEST_F(CheckpointManagerTest, SaveWritesTheNamedCheckpointAndListsIt) {
  Model m;
  th::Session s(m.g);
  th::CheckpointManager manager(dir.path(), {.basename = "net", .env = fe.env()});
  EXPECT_EQ(manager.latest(), std::nullopt);
  EXPECT_THAT(manager.checkpoints(), ElementsAre());
  EXPECT_EQ(manager.save(s, 0), dir.file("net-0"));
  m.steps(s, 2);
  fe.clock->advance(10.5);
  EXPECT_EQ(manager.save(s, 2), dir.file("net-2"));
  EXPECT_THAT(manager.checkpoints(), ElementsAre(dir.file("net-0"), dir.file("net-2")));
  EXPECT_EQ(manager.latest(), dir.file("net-2"));
  // Relative to the directory (TF2's CheckpointManager writes them so): it can be moved.
  EXPECT_EQ(read_bytes(dir.file("checkpoint")),
            "model_checkpoint_path: \"net-2\"\n"
            "all_model_checkpoint_paths: \"net-0\"\n"
            "all_model_checkpoint_paths: \"net-2\"\n"
            "all_model_checkpoint_timestamps: 1000000000.0\n"
            "all_model_checkpoint_timestamps: 1000000010.5\n"
            "last_preserved_timestamp: 999999999.0\n");
  // The checkpoint holds the state of its step.
  Model other(2);
  th::Session os(other.g);
  th::Saver(other.g, saver_options()).restore(os, dir.file("net-2"));
  expect_same(other.values(), m.values());
  EXPECT_EQ(other.g.global_step_value(), 2);
}

TEST_F(CheckpointManagerTest, AStateFileThatCannotBeReplacedKeepsItsErrorType) {
  // The file system's refusal ends training (recovery never retries it): the manager's context
  // added to the message keeps the error's type.
  Model m;
  th::Session s(m.g);
  th::CheckpointManager manager(dir.path(), manager_options());
  manager.save(s, 0);
  fs::remove(dir.file("checkpoint"));
  fs::create_directory(dir.file("checkpoint"));
  fs::create_directory(dir.file("checkpoint") + "/inside");  // a directory rename cannot replace
  const std::string message =
      th::testing::error_message<th::FailedPreconditionError>([&] { manager.save(s, 1); });
  EXPECT_THAT(message, AllOf(HasSubstr("Cannot write checkpoint state '" + dir.file("checkpoint")),
                             HasSubstr("Is a directory")));
}

TEST_F(CheckpointManagerTest, MaxToKeepDeletesTheOldest) {
  Model m;
  th::Session s(m.g);
  th::CheckpointManager manager(dir.path(), manager_options(2));
  for (int step = 0; step < 4; ++step) manager.save(s, step);
  for (int step : {0, 1}) {
    EXPECT_FALSE(fs::exists(manager.path_for(step)));
    EXPECT_FALSE(fs::exists(manager.path_for(step) + ".trainstate"));
  }
  EXPECT_THAT(manager.checkpoints(), ElementsAre(manager.path_for(2), manager.path_for(3)));
  EXPECT_THAT(th::get_checkpoint_state(dir.path())->all_model_checkpoint_paths,
              ElementsAre(manager.path_for(2), manager.path_for(3)));
}

TEST_F(CheckpointManagerTest, HoursRuleKeepsOneDroppedCheckpointPerPeriod) {
  Model m;
  th::Session s(m.g);
  auto o = manager_options(2);
  o.keep_checkpoint_every_n_hours = 1;
  // Made at t0: the period starts at t0 - 1 (TensorFlow's), so the first kept one is written at
  // t0 + 3599 or later; each kept one starts the next period.
  th::CheckpointManager manager(dir.path(), o);
  save_at(manager, s, 1, 1000);
  save_at(manager, s, 2, 4000);
  save_at(manager, s, 3, 5000);  // drops 1 (written before t0 + 3599): deleted
  save_at(manager, s, 4, 6000);  // drops 2 (t0 + 4000): kept; the next from t0 + 7600
  save_at(manager, s, 5, 8000);  // drops 3 (before t0 + 7600): deleted
  save_at(manager, s, 6, 9000);  // drops 4 (before t0 + 7600): deleted
  save_at(manager, s, 7, 9500);  // drops 5 (t0 + 8000): kept; the next from t0 + 11600
  EXPECT_FALSE(fs::exists(manager.path_for(1)));
  EXPECT_TRUE(th::Saver::checkpoint_exists(manager.path_for(2)));
  EXPECT_FALSE(fs::exists(manager.path_for(3)));
  EXPECT_FALSE(fs::exists(manager.path_for(4)));
  EXPECT_TRUE(th::Saver::checkpoint_exists(manager.path_for(5)));
  // Kept ones are no longer listed; the state file remembers the newest of them.
  EXPECT_THAT(manager.checkpoints(), ElementsAre(manager.path_for(6), manager.path_for(7)));
  auto state = th::get_checkpoint_state(dir.path());
  ASSERT_TRUE(state);
  EXPECT_DOUBLE_EQ(state->last_preserved_timestamp, t0 + 8000);
}

// TF's checkpoint_management_test.py CheckpointManagerTest.testSaveRestoreState: the hours rule
// counts from the preserved time in the state file, across managers made again on the directory.
TEST_F(CheckpointManagerTest, SaveRestoreState) {
  Model m;
  th::Session s(m.g);
  auto set_time = [&](double t) { fe.clock->set_wall_seconds(t); };
  auto exists = [&](th::CheckpointManager& mgr, int64_t step) {
    return th::Saver::checkpoint_exists(mgr.path_for(step));
  };
  set_time(3);
  auto first = std::make_unique<th::CheckpointManager>(dir.path(), manager_options(2));
  const double first_time = 10000;
  set_time(first_time);
  first->save(s, 1);
  const double second_time = first_time + 3610;
  set_time(second_time);
  first->save(s, 2);
  auto state = th::get_checkpoint_state(dir.path());
  EXPECT_THAT(state->all_model_checkpoint_timestamps, ElementsAre(first_time, second_time));
  EXPECT_THAT(first->checkpoints(), ElementsAre(first->path_for(1), first->path_for(2)));
  EXPECT_EQ(first->latest(), first->path_for(2));
  first.reset();

  auto options = manager_options(2);
  options.keep_checkpoint_every_n_hours = 1.5;
  auto second = std::make_unique<th::CheckpointManager>(dir.path(), options);
  EXPECT_THAT(second->checkpoints(), ElementsAre(second->path_for(1), second->path_for(2)));
  EXPECT_EQ(second->latest(), second->path_for(2));
  const double third_time = second_time + 3600 * 0.2;
  set_time(third_time);
  second->save(s, 3);
  EXPECT_TRUE(exists(*second, 1));
  EXPECT_TRUE(exists(*second, 2));
  EXPECT_THAT(second->checkpoints(), ElementsAre(second->path_for(2), second->path_for(3)));
  EXPECT_EQ(th::get_checkpoint_state(dir.path())->last_preserved_timestamp, first_time);
  const double fourth_time = third_time + 3600 * 0.5;
  set_time(fourth_time);
  second->save(s, 4);
  EXPECT_TRUE(exists(*second, 1));
  EXPECT_FALSE(exists(*second, 2));
  EXPECT_THAT(second->checkpoints(), ElementsAre(second->path_for(3), second->path_for(4)));
  const double fifth_time = fourth_time + 3600 * 0.5;
  set_time(fifth_time);
  second->save(s, 5);
  EXPECT_THAT(second->checkpoints(), ElementsAre(second->path_for(4), second->path_for(5)));
  EXPECT_EQ(th::get_checkpoint_state(dir.path())->last_preserved_timestamp, first_time);
  second.reset();

  th::CheckpointManager third(dir.path(), options);
  EXPECT_EQ(third.latest(), third.path_for(5));
  set_time(fifth_time + 10);
  third.save(s, 6);
  EXPECT_EQ(th::get_checkpoint_state(dir.path())->last_preserved_timestamp, fourth_time);
  // After the restarts, files {1, 4, 5, 6} remain.
  for (int64_t step : {1, 4, 5, 6}) EXPECT_TRUE(exists(third, step)) << step;
  for (int64_t step : {2, 3}) EXPECT_FALSE(fs::exists(third.path_for(step))) << step;
  EXPECT_THAT(third.checkpoints(), ElementsAre(third.path_for(5), third.path_for(6)));
  EXPECT_THAT(warnings(), ElementsAre());
}

// TF's CheckpointManagerTest.testClockReset: a clock behind the preserved time is warned about;
// checkpoints whose age is then unknown are kept, never deleted.
TEST_F(CheckpointManagerTest, ClockReset) {
  Model m;
  th::Session s(m.g);
  fe.clock->set_wall_seconds(10000);
  auto options = manager_options(1);
  options.keep_checkpoint_every_n_hours = 1;
  auto first = std::make_unique<th::CheckpointManager>(dir.path(), options);
  first->save(s, 1);
  fe.clock->advance(3600);
  first->save(s, 2);
  fe.clock->advance(3600);
  first->save(s, 3);
  EXPECT_FALSE(fs::exists(first->path_for(1)));
  EXPECT_TRUE(th::Saver::checkpoint_exists(first->path_for(2)));
  EXPECT_TRUE(th::Saver::checkpoint_exists(first->path_for(3)));
  EXPECT_THAT(first->checkpoints(), ElementsAre(first->path_for(3)));
  EXPECT_EQ(th::get_checkpoint_state(dir.path())->last_preserved_timestamp, 13600.);
  first.reset();

  // The clock goes back in time.
  fe.clock->set_wall_seconds(5000);
  th::CheckpointManager second(dir.path(), manager_options(1));
  EXPECT_THAT(second.checkpoints(), ElementsAre());  // known, but never deleted: not tracked
  EXPECT_THAT(warnings(),
              ElementsAre(HasSubstr("seconds behind the last preserved checkpoint timestamp")));
  EXPECT_TRUE(th::Saver::checkpoint_exists(second.path_for(2)));
  EXPECT_EQ(second.latest(), second.path_for(3));
  fe.clock->advance(10);
  second.save(s, 4);
  EXPECT_TRUE(th::Saver::checkpoint_exists(second.path_for(2)));
  EXPECT_TRUE(th::Saver::checkpoint_exists(second.path_for(3)));
  EXPECT_EQ(second.latest(), second.path_for(4));
  EXPECT_THAT(second.checkpoints(), ElementsAre(second.path_for(4)));
  fe.clock->advance(10);
  second.save(s, 5);
  EXPECT_TRUE(th::Saver::checkpoint_exists(second.path_for(2)));
  EXPECT_TRUE(th::Saver::checkpoint_exists(second.path_for(3)));
  EXPECT_FALSE(fs::exists(second.path_for(4)));
  EXPECT_THAT(second.checkpoints(), ElementsAre(second.path_for(5)));
  auto state = th::get_checkpoint_state(dir.path());
  EXPECT_EQ(state->last_preserved_timestamp, 5000.);
  EXPECT_THAT(state->all_model_checkpoint_timestamps, ElementsAre(5020.));
}

// TF's saver_test.py MaxToKeepTest.testNoMaxToKeep: max_to_keep 0 keeps every file and tracks
// none; the state file lists the newest alone.
TEST_F(CheckpointManagerTest, NoMaxToKeep) {
  Model m;
  th::Session s(m.g);
  th::CheckpointManager manager(dir.path(), manager_options(0));
  EXPECT_THAT(manager.checkpoints(), ElementsAre());
  for (int64_t step = 1; step <= 7; ++step) {
    fe.clock->advance(1);
    manager.save(s, step);
    EXPECT_THAT(manager.checkpoints(), ElementsAre());
  }
  for (int64_t step = 1; step <= 7; ++step)
    EXPECT_TRUE(th::Saver::checkpoint_exists(manager.path_for(step))) << step;
  EXPECT_EQ(read_bytes(dir.file("checkpoint")),
            "model_checkpoint_path: \"model.ckpt-7\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-7\"\n"
            "last_preserved_timestamp: 999999999.0\n");
  EXPECT_EQ(manager.latest(), manager.path_for(7));
  // A manager made again tracks none of them either, and deletes none.
  th::CheckpointManager again(dir.path(), manager_options(2));
  EXPECT_THAT(again.checkpoints(), ElementsAre());
  fe.clock->advance(1);
  again.save(s, 8);
  fe.clock->advance(1);
  again.save(s, 9);
  fe.clock->advance(1);
  again.save(s, 10);
  for (int64_t step = 1; step <= 7; ++step)
    EXPECT_TRUE(th::Saver::checkpoint_exists(again.path_for(step))) << step;
  EXPECT_FALSE(fs::exists(again.path_for(8)));
  EXPECT_THAT(again.checkpoints(), ElementsAre(again.path_for(9), again.path_for(10)));
}

TEST_F(CheckpointManagerTest, AManagerMadeAgainOnTheDirectoryContinuesItsRetention) {
  Model m;
  th::Session s(m.g);
  {
    th::CheckpointManager first(dir.path(), manager_options(2));
    first.save(s, 1);
    fe.clock->advance(1);
    first.save(s, 2);
  }
  fe.clock->advance(1);
  th::CheckpointManager second(dir.path(), manager_options(2));
  // What the state file lists, before any save of its own.
  EXPECT_THAT(second.checkpoints(), ElementsAre(second.path_for(1), second.path_for(2)));
  EXPECT_EQ(second.latest(), second.path_for(2));
  second.save(s, 3);
  EXPECT_FALSE(fs::exists(second.path_for(1)));
  EXPECT_THAT(second.checkpoints(), ElementsAre(second.path_for(2), second.path_for(3)));
  EXPECT_THAT(th::get_checkpoint_state(dir.path())->all_model_checkpoint_timestamps,
              ElementsAre(t0 + 1, t0 + 2));
}

TEST_F(CheckpointManagerTest, RestoreLatestRestoresTheNewestAndFallsBackFromACorruptOne) {
  Model m;
  th::Session s(m.g);
  th::CheckpointManager manager(dir.path(), manager_options());
  EXPECT_EQ(manager.restore_latest(s), std::nullopt);  // no state file yet
  m.steps(s, 1);
  manager.save(s, 1);
  const auto at_1 = m.values();
  m.steps(s, 1);
  manager.save(s, 2);
  const auto at_2 = m.values();
  m.steps(s, 3);

  Model fresh(2);
  th::Session fresh_session(fresh.g);
  th::CheckpointManager again(dir.path(), manager_options());
  EXPECT_EQ(again.restore_latest(fresh_session), manager.path_for(2));
  expect_same(fresh.values(), at_2);

  const std::string bytes = read_bytes(manager.path_for(2));
  write_bytes(manager.path_for(2), bytes.substr(0, bytes.size() / 2));
  EXPECT_EQ(again.restore_latest(fresh_session), manager.path_for(1));
  expect_same(fresh.values(), at_1);
  EXPECT_EQ(fresh.g.global_step_value(), 1);
  EXPECT_THAT(
      warnings(),
      ElementsAre(AllOf(HasSubstr("Checkpoint " + manager.path_for(2) + " cannot be restored"),
                        HasSubstr("Falling back to the previous checkpoint."))));

  // Nothing listed is usable: an error, never a fresh start.
  write_bytes(manager.path_for(1), "");
  EXPECT_THAT(
      th::testing::error_message<th::DataLossError>([&] { again.restore_latest(fresh_session); }),
      HasSubstr("None of the 2 checkpoint(s)"));
  expect_same(fresh.values(), at_1);
}

// A deleted state file: the checkpoints still on disk are named before a save can replace one,
// restored from rather than trained over, and never deleted (they are not listed).
TEST_F(CheckpointManagerTest, WithoutAStateFileCheckpointsOnDiskAreNamedRestoredAndKept) {
  Model m;
  th::Session s(m.g);
  {
    th::CheckpointManager first(dir.path(), manager_options());
    first.save(s, 1);
    m.steps(s, 2);
    first.save(s, 3);
  }
  const auto at_3 = m.values();
  fs::remove(dir.file("checkpoint"));

  // Saving first: the warning comes before the save, which replaces model.ckpt-1.
  th::CheckpointManager saving(dir.path(), manager_options(1));
  saving.save(s, 1);
  EXPECT_THAT(warnings(),
              ElementsAre("No checkpoint state file '" + dir.file("checkpoint") +
                          "', but the directory holds checkpoints it would list: model.ckpt-1, "
                          "model.ckpt-3. They are not tracked: none of them is deleted, and a save "
                          "of the same step replaces it"));
  saving.save(s, 5);  // max_to_keep 1 deletes model.ckpt-1, which it listed, not model.ckpt-3
  EXPECT_FALSE(fs::exists(dir.file("model.ckpt-1")));
  EXPECT_TRUE(th::Saver::checkpoint_exists(dir.file("model.ckpt-3")));
  EXPECT_EQ(warnings().size(), 1u);

  // Restoring: the newest usable one, with a warning naming them all.
  fs::remove(dir.file("checkpoint"));
  write_bytes(dir.file("model.ckpt-5"), "torn");
  Model fresh(2);
  th::Session fresh_session(fresh.g);
  th::CheckpointManager restoring(dir.path(), manager_options());
  EXPECT_EQ(restoring.restore_latest(fresh_session), dir.file("model.ckpt-3"));
  expect_same(fresh.values(), at_3);
  ASSERT_EQ(warnings().size(), 3u);
  EXPECT_EQ(warnings()[1],
            "No checkpoint state file '" + dir.file("checkpoint") +
                "', but the directory holds checkpoints: model.ckpt-3, model.ckpt-5. Restoring "
                "the newest one that can be restored instead of starting from scratch; they are "
                "not tracked, so none of them is deleted. To start from scratch, remove them or "
                "use another directory");
  EXPECT_THAT(warnings()[2],
              HasSubstr("Checkpoint " + dir.file("model.ckpt-5") + " cannot be restored: "));
  EXPECT_FALSE(restoring.saved_at(3));  // saved again, which lists it in a new state file
  restoring.save(fresh_session, 3);
  EXPECT_EQ(th::get_checkpoint_state(dir.path())->model_checkpoint_path, dir.file("model.ckpt-3"));
  EXPECT_EQ(warnings().size(), 3u);  // said once

  // None usable: an error, not a fresh start over them.
  fs::remove(dir.file("checkpoint"));
  write_bytes(dir.file("model.ckpt-3"), "");
  EXPECT_THAT(th::testing::error_message<th::DataLossError>([&] {
                th::CheckpointManager(dir.path(), manager_options()).restore_latest(fresh_session);
              }),
              HasSubstr("None of the 2 checkpoint(s) found in " + dir.path() +
                        " (it has no state file) can be restored; not starting from scratch"));
}

// A directory where the newest checkpoint's variables file or .trainstate should be: the
// checkpoint is not there, as when the file is deleted, so the restore falls back past it with
// the warning a corrupt or missing one gets.
TEST_F(CheckpointManagerTest, ADirectoryInPlaceOfTheNewestCheckpointsFileFallsBack) {
  Model m;
  th::Session s(m.g);
  th::CheckpointManager manager(dir.path(), manager_options());
  m.steps(s, 1);
  manager.save(s, 1);
  const auto at_1 = m.values();
  m.steps(s, 1);
  manager.save(s, 2);
  const std::string newest = manager.path_for(2);
  size_t warned = 0;
  for (const std::string& file : {newest, newest + ".trainstate"}) {
    SCOPED_TRACE(file);
    const std::string bytes = read_bytes(file);
    fs::remove(file);
    fs::create_directory(file);
    Model fresh(2);
    th::Session fresh_session(fresh.g);
    th::CheckpointManager again(dir.path(), manager_options());
    EXPECT_EQ(again.restore_latest(fresh_session), manager.path_for(1));
    expect_same(fresh.values(), at_1);
    EXPECT_EQ(fresh.g.global_step_value(), 1);
    ASSERT_EQ(warnings().size(), ++warned);
    EXPECT_EQ(warnings().back(), "Checkpoint " + newest +
                                     " cannot be restored: The passed save_path is not a valid "
                                     "checkpoint: " +
                                     newest + " (" + file +
                                     " is a directory). Falling back to the previous checkpoint.");
    fs::remove(file);
    write_bytes(file, bytes);
  }
  // The files back in place: the newest one restores again, without a warning.
  Model fresh(2);
  th::Session fresh_session(fresh.g);
  EXPECT_EQ(th::CheckpointManager(dir.path(), manager_options()).restore_latest(fresh_session),
            newest);
  EXPECT_EQ(warnings().size(), warned);
}

TEST_F(CheckpointManagerTest, ADirectoryInPlaceOfAFileIsNamed) {
  Model m;
  th::Session s(m.g);
  th::CheckpointManager manager(dir.path(), manager_options());
  manager.save(s, 1);
  const std::string side = dir.file("model.ckpt-1.trainstate");
  fs::remove(side);
  fs::create_directory(side);
  const std::string not_valid =
      "The passed save_path is not a valid checkpoint: " + dir.file("model.ckpt-1") + " (" + side +
      " is a directory)";
  // The only checkpoint: nothing to fall back to, and no fresh start over it.
  EXPECT_EQ(th::testing::error_message<th::DataLossError>([&] { manager.restore_latest(s); }),
            "None of the 1 checkpoint(s) listed in " + dir.file("checkpoint") +
                " can be restored; not starting from scratch over them. " + not_valid);
  EXPECT_THAT(warnings(), ElementsAre("Checkpoint " + dir.file("model.ckpt-1") +
                                      " cannot be restored: " + not_valid +
                                      ". No earlier checkpoint is listed."));
  EXPECT_EQ(th::testing::error_message<th::NotFoundError>(
                [&] { th::Saver(m.g).restore(s, dir.file("model.ckpt-1")); }),
            not_valid);
  EXPECT_EQ(th::testing::error_message<th::FileError>(
                [&] { th::CheckpointReader reader(dir.file("model.ckpt-1")); }),
            "Cannot read checkpoint file '" + side + "': it is a directory");
  fs::remove(dir.file("checkpoint"));
  fs::create_directory(dir.file("checkpoint"));
  EXPECT_EQ(th::testing::error_message<th::FileError>([&] { manager.restore_latest(s); }),
            "Cannot read the checkpoint state '" + dir.file("checkpoint") +
                "': it is a directory, not a file");
  fs::create_directory(dir.file("weights.pt"));
  EXPECT_EQ(th::testing::error_message<th::FileError>(
                [&] { th::load_variables(m.g, dir.file("weights.pt")); }),
            "Cannot read variables file '" + dir.file("weights.pt") + "': it is a directory");
}

TEST_F(CheckpointManagerTest, RestoreLatestPropagatesAGraphMismatch) {
  Model m;
  th::Session s(m.g);
  th::CheckpointManager manager(dir.path(), manager_options());
  manager.save(s, 1);
  th::Graph other;
  other.variable("unrelated", at::zeros({1}));
  th::Session os(other);
  EXPECT_THROW(manager.restore_latest(os), th::NotFoundError);  // its variable is not saved
  EXPECT_TRUE(warnings().empty());                              // not a fallback
}

TEST_F(CheckpointManagerTest, SavedAtIsTheCheckpointItSavedOrRestoredWhileNewest) {
  Model m;
  th::Session s(m.g);
  th::CheckpointManager writer(dir.path(), manager_options());
  EXPECT_FALSE(writer.saved_at(0));
  writer.save(s, 0);
  EXPECT_TRUE(writer.saved_at(0));
  EXPECT_FALSE(writer.saved_at(1));
  // Another manager of the directory: only once it has restored that checkpoint.
  th::CheckpointManager restorer(dir.path(), manager_options());
  EXPECT_FALSE(restorer.saved_at(0));
  restorer.restore_latest(s);
  EXPECT_TRUE(restorer.saved_at(0));
  writer.save(s, 5);
  EXPECT_FALSE(writer.saved_at(0));  // no longer the newest
  fs::remove(writer.path_for(5) + ".trainstate");
  EXPECT_FALSE(writer.saved_at(5));  // a file is missing
}

TEST_F(CheckpointManagerTest, SnapshotIsWrittenOnAnotherThreadAndListedThen) {
  Model m;
  th::Session s(m.g);
  m.steps(s, 2);
  auto manager = std::make_shared<th::CheckpointManager>(dir.path(), manager_options());
  th::SaverSnapshot snap = manager->snapshot(s, 2);
  EXPECT_EQ(snap.path(), manager->path_for(2));
  const auto at_2 = m.values();
  m.steps(s, 1);  // training goes on while it is written
  std::string written;
  std::thread([&] { written = manager->write(std::move(snap)); }).join();
  EXPECT_EQ(written, manager->path_for(2));
  EXPECT_EQ(manager->latest(), manager->path_for(2));
  Model other(2);
  th::Session os(other.g);
  manager->restore_latest(os);
  expect_same(other.values(), at_2);
}

TEST_F(CheckpointManagerTest, WriteTakesOnlyNonEmptySnapshotsOfItsDirectory) {
  Model m;
  th::Session s(m.g);
  th::CheckpointManager manager(dir.path(), manager_options());
  EXPECT_EQ(
      th::testing::error_message<th::InvalidArgument>([&] { manager.write(th::SaverSnapshot()); }),
      "CheckpointManager::write: the snapshot is empty");
  th::testing::TempDir elsewhere;
  th::Saver saver(m.g, saver_options());
  EXPECT_THAT(th::testing::error_message<th::InvalidArgument>(
                  [&] { manager.write(saver.snapshot(s, elsewhere.file("model.ckpt-1"))); }),
              HasSubstr("is not in the directory"));
  EXPECT_FALSE(fs::exists(dir.file("checkpoint")));
}

TEST_F(CheckpointManagerTest, BadOptionsAreNamed) {
  auto message = [](std::string d, th::CheckpointManagerOptions o) {
    return th::testing::error_message<th::InvalidArgument>(
        [&] { th::CheckpointManager manager(d, o); });
  };
  EXPECT_THAT(message("", {}), HasSubstr("directory"));
  EXPECT_THAT(message("x", {.basename = "a/b"}), HasSubstr("basename"));
  EXPECT_THAT(message("x", {.basename = ""}), HasSubstr("basename"));
  EXPECT_THAT(message("x", {.keep_checkpoint_every_n_hours = 0}),
              HasSubstr("keep_checkpoint_every_n_hours"));
  EXPECT_THAT(th::testing::error_message<th::InvalidArgument>(
                  [] { th::restore_latest_checkpoint(std::shared_ptr<th::CheckpointManager>()); }),
              HasSubstr("manager"));
}

TEST_F(CheckpointManagerTest, SaveIntoAMissingDirectoryIsNotFoundAndListsNothing) {
  Model m;
  th::Session s(m.g);
  th::CheckpointManager manager(dir.file("missing"), manager_options());
  EXPECT_THAT(th::testing::error_message<th::NotFoundError>([&] { manager.save(s, 1); }),
              HasSubstr("Parent directory of " + dir.file("missing/model.ckpt-1")));
  EXPECT_THAT(manager.checkpoints(), ElementsAre());
}

}  // namespace checkpoint_manager_test
