// Errors at close(): the final checkpoint failing on a real file system (a checkpoint directory
// replaced by a regular file, which stops writes even as root), raised by an explicit close() and
// logged by the destructor at ERROR with the steps that were lost; every hook's end() runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "test_util.h"
#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/errors.h"
#include "trainhooks/monitored_session.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;
namespace fs = std::filesystem;

namespace monitored_session_close_test {

constexpr char kClosing[] = "Error while closing the monitored session: ";

// A checkpoint directory that can no longer be written: moved away, a regular file in its place.
void break_directory(const std::string& dir) {
  fs::rename(dir, dir + ".moved");
  std::ofstream(dir) << "not a directory\n";
}

struct TrainingRun {
  th::testing::TempDir tmp;
  th::testing::FakeEnv fake;
  th::testing::TinyModel m;
  std::string ckpt = tmp.file("ckpt");

  // A chief saving every 50 steps, after `steps` steps.
  std::unique_ptr<th::MonitoredTrainingSession> train(int steps) {
    auto sess = std::make_unique<th::MonitoredTrainingSession>(
        m.g, th::MonitoredTrainingSessionOptions{
                 .checkpoint_dir = ckpt,
                 .checkpoints = {.save_steps = 50},
                 .summaries = {.save_steps = 0, .log_step_count_steps = 0},
                 .handle_preemption_signals = false,
                 .env = fake.env()});
    for (int i = 0; i < steps; ++i) sess->run(m.train, m.feed());
    return sess;
  }
};

TEST(MonitoredSessionCloseTest, TheDestructorLogsAFailedFinalSaveWithTheStepsLost) {
  TrainingRun r;
  auto sess = r.train(70);
  ASSERT_EQ(th::latest_checkpoint(r.ckpt), r.ckpt + "/model.ckpt-50");
  break_directory(r.ckpt);
  sess.reset();  // the final save of step 70 fails
  EXPECT_EQ(r.fake.log->messages(th::LogLevel::kError),
            (std::vector<std::string>{std::string(kClosing) + "Parent directory of " + r.ckpt +
                                      "/model.ckpt-70 doesn't exist, can't save; steps 51..70 "
                                      "since the last checkpoint (step 50) were not saved."}));
  // The checkpoints written before are intact.
  EXPECT_TRUE(th::Saver::checkpoint_exists(r.ckpt + ".moved/model.ckpt-50"));
}

TEST(MonitoredSessionCloseTest, AnExplicitCloseRaisesTheErrorAndTheDestructorStaysQuiet) {
  TrainingRun r;
  auto sess = r.train(70);
  break_directory(r.ckpt);
  EXPECT_EQ(th::testing::error_message<th::NotFoundError>([&] { sess->close(); }),
            "Parent directory of " + r.ckpt + "/model.ckpt-70 doesn't exist, can't save.");
  EXPECT_TRUE(sess->closed());
  EXPECT_EQ(sess->unsaved_steps(),
            "steps 51..70 since the last checkpoint (step 50) were not saved");
  sess.reset();
  EXPECT_TRUE(r.fake.log->messages(th::LogLevel::kError).empty());
}

TEST(MonitoredSessionCloseTest, NothingIsLostWhenTheFinalSaveSucceeds) {
  TrainingRun r;
  auto sess = r.train(70);
  sess->close();
  EXPECT_EQ(sess->unsaved_steps(), "");
  EXPECT_EQ(th::latest_checkpoint(r.ckpt), r.ckpt + "/model.ckpt-70");
  EXPECT_TRUE(r.fake.log->messages(th::LogLevel::kError).empty());
}

// A hook whose end() can fail, and which records that it ran.
struct EndHook : th::SessionRunHook {
  std::string error;
  int ends = 0;
  explicit EndHook(std::string e = "") : error(std::move(e)) {}
  void end(th::Session&) override {
    ++ends;
    if (!error.empty()) throw th::FileError(error);
  }
};

std::unique_ptr<th::MonitoredSession> session_with(th::testing::TinyModel& m, th::Hooks hooks,
                                                   const th::Env& env,
                                                   std::optional<int64_t> checkpoint_step) {
  return std::make_unique<th::MonitoredSession>(
      std::make_unique<th::ChiefSessionCreator>(m.g, th::SessionCreatorOptions{.env = env}),
      std::move(hooks),
      th::MonitoredSessionOptions{
          .env = env, .last_checkpoint_step = [checkpoint_step] { return checkpoint_step; }});
}

TEST(MonitoredSessionCloseTest, WithoutACheckpointEveryStepIsLost) {
  th::testing::TinyModel m;
  th::testing::FakeEnv fake;
  auto sess =
      session_with(m, {std::make_shared<EndHook>("Cannot write 'model.pt': Input/output error")},
                   fake.env(), std::nullopt);
  for (int i = 0; i < 3; ++i) sess->run(m.train, m.feed());
  sess.reset();
  EXPECT_EQ(fake.log->messages(th::LogLevel::kError),
            (std::vector<std::string>{std::string(kClosing) +
                                      "Cannot write 'model.pt': Input/output error; steps 1..3 "
                                      "were not saved (no checkpoint)."}));
}

TEST(MonitoredSessionCloseTest, ACheckpointOfTheLastStepLosesNothing) {
  th::testing::TinyModel m;
  th::testing::FakeEnv fake;
  auto sess = session_with(
      m, {std::make_shared<EndHook>("Cannot write 'events': Input/output error")}, fake.env(), 3);
  for (int i = 0; i < 3; ++i) sess->run(m.train, m.feed());
  sess.reset();
  EXPECT_EQ(fake.log->messages(th::LogLevel::kError),
            (std::vector<std::string>{std::string(kClosing) +
                                      "Cannot write 'events': Input/output error"}));
}

TEST(MonitoredSessionCloseTest, EveryHooksEndRunsAndTheFirstErrorIsRaised) {
  th::testing::TinyModel m;
  th::testing::FakeEnv fake;
  auto first = std::make_shared<EndHook>("first");
  auto second = std::make_shared<EndHook>("second");
  auto last = std::make_shared<EndHook>();
  auto sess = th::testing::chief_session(m.g, {first, second, last}, fake.env());
  sess->run(m.train, m.feed());
  EXPECT_EQ(th::testing::error_message<th::FileError>([&] { sess->close(); }), "first");
  EXPECT_EQ(first->ends, 1);
  EXPECT_EQ(second->ends, 1);
  EXPECT_EQ(last->ends, 1);
  EXPECT_EQ(fake.log->messages(th::LogLevel::kError),
            (std::vector<std::string>{"hooks[1].end() failed too: second"}));
  EXPECT_EQ(sess->unsaved_steps(), "");  // the session does not know of checkpoints
}

}  // namespace monitored_session_close_test
