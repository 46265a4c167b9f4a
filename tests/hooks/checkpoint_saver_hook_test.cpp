#include "trainhooks/hooks/checkpoint_saver_hook.h"

#include <ATen/core/Tensor.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/types.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/checkpoint/checkpoint_state.h"
#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/coordinator.h"
#include "trainhooks/errors.h"
#include "trainhooks/summary/event_reader.h"
#include "trainhooks/summary/event_writer.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;
namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

namespace checkpoint_saver_hook_test {

// Records every call, as TF's MockCheckpointSaverListener counts them.
struct RecordingListener : th::CheckpointSaverListener {
  std::vector<std::string> calls;
  bool ask_for_stop = false;
  void begin() override { calls.push_back("begin"); }
  void before_save(th::Session&, int64_t step) override {
    calls.push_back("before_save " + std::to_string(step));
  }
  bool after_save(th::Session&, int64_t step) override {
    calls.push_back("after_save " + std::to_string(step));
    return ask_for_stop;
  }
  void end(th::Session&, int64_t step) override { calls.push_back("end " + std::to_string(step)); }
  int count(const std::string& prefix) const {
    int n = 0;
    for (const auto& c : calls) n += c.rfind(prefix, 0) == 0;
    return n;
  }
};

class CheckpointSaverHookTest : public ::testing::Test {
 protected:
  ~CheckpointSaverHookTest() override { th::summary::EventWriter::clear_cache(); }

  std::shared_ptr<th::CheckpointSaverHook> hook(th::CheckpointSaverHookOptions o) {
    return std::make_shared<th::CheckpointSaverHook>(dir(), std::move(o));
  }
  std::unique_ptr<th::MonitoredSession> session(th::Hooks hooks) {
    return th::testing::chief_session(m.g, std::move(hooks), fe.env());
  }
  void run(th::MonitoredSession& sess, int n, double secs_before_each = 0) {
    for (int i = 0; i < n; ++i) {
      fe.clock->advance(secs_before_each);
      sess.run(m.train, m.feed());
    }
  }
  // The steps saved so far, from the state file's list (max_to_keep large enough in tests).
  std::vector<int64_t> saved_steps() const {
    std::vector<int64_t> out;
    auto state = th::get_checkpoint_state(dir());
    if (!state) return out;
    for (const auto& p : state->all_model_checkpoint_paths)
      out.push_back(std::stoll(p.substr(p.rfind('-') + 1)));
    return out;
  }
  std::vector<std::string> save_lines(std::initializer_list<int64_t> steps) const {
    std::vector<std::string> out;
    for (int64_t s : steps) {
      out.push_back("Calling checkpoint listeners before saving checkpoint " + std::to_string(s) +
                    "...");
      out.push_back("Saving checkpoints for " + std::to_string(s) + " into " +
                    root.file("ckpt/model.ckpt") + ".");
      out.push_back("Calling checkpoint listeners after saving checkpoint " + std::to_string(s) +
                    "...");
    }
    return out;
  }

  // The hook creates the checkpoint directory.
  std::string dir() const { return root.file("ckpt"); }

  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
  th::testing::TempDir root;
};

TEST_F(CheckpointSaverHookTest, SavesAtCreationEveryNStepsAndAtEnd) {
  auto sess = session({hook({.save_steps = 2, .saver_options = {.max_to_keep = 10}})});
  EXPECT_THAT(saved_steps(), ElementsAre(0));
  run(*sess, 1);
  EXPECT_THAT(saved_steps(), ElementsAre(0));
  run(*sess, 1);
  EXPECT_THAT(saved_steps(), ElementsAre(0, 2));
  run(*sess, 3);
  EXPECT_THAT(saved_steps(), ElementsAre(0, 2, 4));
  sess->close();
  EXPECT_THAT(saved_steps(), ElementsAre(0, 2, 4, 5));
  EXPECT_THAT(fe.log->messages(), ElementsAreArray(save_lines({0, 2, 4, 5})));
  EXPECT_TRUE(fe.log->messages(th::LogLevel::kWarning).empty());
  EXPECT_EQ(th::latest_checkpoint(dir()), root.file("ckpt/model.ckpt-5"));
}

TEST_F(CheckpointSaverHookTest, DoesNotSaveTwiceAtEndWhenTheLastStepWasSaved) {
  auto sess = session({hook({.save_steps = 2})});
  run(*sess, 4);
  sess->close();
  EXPECT_THAT(saved_steps(), ElementsAre(0, 2, 4));
  EXPECT_THAT(fe.log->messages(), ElementsAreArray(save_lines({0, 2, 4})));
}

TEST_F(CheckpointSaverHookTest, TheSavedCheckpointHoldsTheStateAtThatStep) {
  auto sess = session({hook({.save_steps = 3})});
  run(*sess, 3);
  const at::Tensor w3 = m.g.variable_value(m.w).detach().clone();
  run(*sess, 1);
  sess->close();
  th::testing::TinyModel other;
  th::Session s(other.g);
  th::Saver(other.g).restore(s, root.file("ckpt/model.ckpt-3"));
  EXPECT_TRUE(torch::equal(other.g.variable_value(other.w), w3));
  EXPECT_EQ(other.g.global_step_value(), 3);
}

TEST_F(CheckpointSaverHookTest, ListenersAreCalledInOrderWithTheSavedSteps) {
  auto listener = std::make_shared<RecordingListener>();
  auto sess = session({hook({.save_steps = 1, .listeners = {listener}})});
  run(*sess, 2);
  sess->close();
  // TF's test_listener_with_monitored_session: begin 1, before_save 3, after_save 3, end 1.
  EXPECT_THAT(listener->calls,
              ElementsAre("begin", "before_save 0", "after_save 0", "before_save 1", "after_save 1",
                          "before_save 2", "after_save 2", "end 2"));
}

TEST_F(CheckpointSaverHookTest, ListenerThatAsksToStopStopsTrainingAfterThatRun) {
  auto listener = std::make_shared<RecordingListener>();
  auto sess = session({hook({.save_steps = 1, .listeners = {listener}})});
  run(*sess, 2);
  EXPECT_FALSE(sess->should_stop());
  listener->ask_for_stop = true;
  run(*sess, 1);
  EXPECT_TRUE(sess->should_stop());
  auto info = fe.log->messages();
  EXPECT_EQ(info.back(),
            "A CheckpointSaverListener requested that training be stopped. listener: "
            "checkpoint_saver_hook_test::RecordingListener");
  sess->close();
  EXPECT_EQ(listener->count("end"), 1);
  EXPECT_EQ(listener->count("before_save"), 4);  // 0, 1, 2, 3; not again at end
}

TEST_F(CheckpointSaverHookTest, SaveSecsFollowsTheClock) {
  auto listener = std::make_shared<RecordingListener>();
  auto sess = session({hook({.save_secs = 2, .listeners = {listener}})});
  run(*sess, 1, 0.5);  // step 1: not saved
  run(*sess, 1, 2.0);  // step 2, 2.5 s after the save at creation: saved
  run(*sess, 2, 0.1);  // steps 3, 4: not saved
  run(*sess, 1, 7.3);  // step 5: saved
  EXPECT_THAT(saved_steps(), ElementsAre(0, 2, 5));
  run(*sess, 1, 0.5);  // step 6: not saved until end
  sess->close();
  EXPECT_THAT(saved_steps(), ElementsAre(0, 2, 5, 6));
  EXPECT_EQ(listener->count("before_save"), 4);
  EXPECT_EQ(listener->count("after_save"), 4);
  EXPECT_EQ(listener->count("begin"), 1);
  EXPECT_EQ(listener->count("end"), 1);
}

TEST_F(CheckpointSaverHookTest, WritesCheckpointSessionLogsToTheEventFile) {
  auto sess = session({hook({.save_steps = 2})});
  run(*sess, 3);
  sess->close();
  std::vector<std::pair<int64_t, std::string>> logs;
  for (const auto& e : th::summary::read_events(dir())) {
    if (e.session_log) {
      EXPECT_EQ(e.session_log->status, th::summary::SessionStatus::kCheckpoint);
      logs.emplace_back(e.step, e.session_log->checkpoint_path);
    }
  }
  const std::string path = root.file("ckpt/model.ckpt");
  EXPECT_THAT(logs, ElementsAre(std::pair<int64_t, std::string>{0, path},
                                std::pair<int64_t, std::string>{2, path},
                                std::pair<int64_t, std::string>{3, path}));
}

TEST_F(CheckpointSaverHookTest, UsesTheGivenSaverAndItsRetention) {
  auto saver = std::make_shared<th::compat::v1::Saver>(
      m.g, th::compat::v1::SaverOptions{.max_to_keep = 2, .env = fe.env()});
  auto h = hook({.save_steps = 1, .saver = saver, .checkpoint_basename = "net"});
  auto sess = session({h});
  EXPECT_EQ(h->saver(), saver);
  EXPECT_EQ(h->save_path(), root.file("ckpt/net"));
  run(*sess, 3);
  sess->close();
  EXPECT_THAT(saver->last_checkpoints(dir()),
              ElementsAre(root.file("ckpt/net-2"), root.file("ckpt/net-3")));
  EXPECT_FALSE(fs::exists(root.file("ckpt/net-1")));
}

TEST_F(CheckpointSaverHookTest, SavesThroughAGivenManager) {
  auto manager = std::make_shared<th::CheckpointManager>(
      dir(), th::CheckpointManagerOptions{.basename = "net", .max_to_keep = 2, .env = fe.env()});
  auto h = std::make_shared<th::CheckpointSaverHook>(
      manager, th::CheckpointSaverHookOptions{.save_steps = 1});
  EXPECT_EQ(h->manager(), manager);
  EXPECT_EQ(h->save_path(), root.file("ckpt/net"));
  auto sess = session({h});
  run(*sess, 3);
  sess->close();
  EXPECT_THAT(manager->checkpoints(),
              ElementsAre(root.file("ckpt/net-2"), root.file("ckpt/net-3")));
  EXPECT_FALSE(fs::exists(root.file("ckpt/net-1")));
}

TEST_F(CheckpointSaverHookTest, AGivenManagerMustBeThereAndTakesNoSaver) {
  auto message = [](std::shared_ptr<th::CheckpointManager> manager,
                    th::CheckpointSaverHookOptions o) {
    return th::testing::error_message<th::InvalidArgument>(
        [&] { th::CheckpointSaverHook h(std::move(manager), std::move(o)); });
  };
  EXPECT_THAT(message(nullptr, {.save_steps = 1}), ::testing::HasSubstr("manager is null"));
  auto manager = std::make_shared<th::CheckpointManager>(dir());
  EXPECT_THAT(
      message(manager, {.save_steps = 1, .saver = std::make_shared<th::compat::v1::Saver>(m.g)}),
      ::testing::HasSubstr("not both"));
  EXPECT_EQ(message(manager, {}), "Either save_secs or save_steps should be provided.");
}

TEST_F(CheckpointSaverHookTest, OptionsAreValidatedWithTFTexts) {
  auto message = [&](th::CheckpointSaverHookOptions o, std::string d = "x") {
    try {
      th::CheckpointSaverHook h(d, std::move(o));
    } catch (const th::InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_EQ(message({.save_secs = 10, .save_steps = 20}),
            "Can not provide both save_secs and save_steps.");
  EXPECT_EQ(message({}), "Either save_secs or save_steps should be provided.");
  EXPECT_EQ(message({.save_steps = 0}), "CheckpointSaverHook: save_steps must be positive, got 0");
  EXPECT_EQ(message({.save_secs = -1}), "CheckpointSaverHook: save_secs must be positive, got -1");
  EXPECT_THAT(message({.save_steps = 1}, ""), ::testing::HasSubstr("checkpoint_dir"));
  EXPECT_THAT(message({.save_steps = 1, .checkpoint_basename = "a/b"}),
              ::testing::HasSubstr("checkpoint_basename"));
  EXPECT_THAT(message({.save_steps = 1, .listeners = {nullptr}}),
              ::testing::HasSubstr("listeners[0]"));
}

TEST_F(CheckpointSaverHookTest, NeedsAGlobalStep) {
  th::Graph g;
  auto v = g.variable("v", torch::zeros({1}));
  (void)v;
  try {
    th::testing::chief_session(g, {hook({.save_steps = 1})}, fe.env());
    FAIL() << "no error";
  } catch (const th::RuntimeError& e) {
    EXPECT_STREQ(e.what(), "Global step should be created to use CheckpointSaverHook.");
  }
}

TEST_F(CheckpointSaverHookTest, RejectsASaverOfAnotherGraph) {
  th::testing::TinyModel other;
  auto saver = std::make_shared<th::compat::v1::Saver>(other.g);
  EXPECT_THROW(session({hook({.save_steps = 1, .saver = saver})}), th::InvalidArgument);
}

}  // namespace checkpoint_saver_hook_test

namespace checkpoint_saver_hook_test {

std::vector<std::string> without_waiting(std::vector<std::string> lines) {
  std::erase_if(lines, [](const std::string& l) { return l.rfind("Waiting for the", 0) == 0; });
  return lines;
}

TEST_F(CheckpointSaverHookTest, AsyncSavesEveryTriggerAndReportsOnTheTrainingThreadInOrder) {
  auto listener = std::make_shared<RecordingListener>();
  auto sess = session({hook({.save_steps = 1,
                             .listeners = {listener},
                             .saver_options = {.max_to_keep = 10},
                             .async_save = true})});
  run(*sess, 4);
  sess->close();
  EXPECT_THAT(saved_steps(), ElementsAre(0, 1, 2, 3, 4));
  // A trigger waits for the write in flight, so each save is reported before the next begins.
  EXPECT_THAT(listener->calls,
              ElementsAre("begin", "before_save 0", "after_save 0", "before_save 1", "after_save 1",
                          "before_save 2", "after_save 2", "before_save 3", "after_save 3",
                          "before_save 4", "after_save 4", "end 4"));
  EXPECT_THAT(without_waiting(fe.log->messages()), ElementsAreArray(save_lines({0, 1, 2, 3, 4})));
  EXPECT_TRUE(fe.log->messages(th::LogLevel::kWarning).empty());
}

TEST_F(CheckpointSaverHookTest, AsyncCheckpointsHoldTheStateOfTheirStep) {
  auto sess =
      session({hook({.save_steps = 1, .saver_options = {.max_to_keep = 10}, .async_save = true})});
  std::vector<at::Tensor> w{m.g.variable_value(m.w).detach().clone()};
  for (int i = 1; i <= 5; ++i) {
    run(*sess, 1);
    w.push_back(m.g.variable_value(m.w).detach().clone());
  }
  run(*sess, 1);  // step 6, saved at end
  sess->close();
  for (int step = 0; step <= 5; ++step) {
    th::testing::TinyModel other;
    th::Session s(other.g);
    th::Saver(other.g).restore(s, root.file("ckpt/model.ckpt-" + std::to_string(step)));
    EXPECT_TRUE(torch::equal(other.g.variable_value(other.w), w[step])) << "step " << step;
    EXPECT_EQ(other.g.global_step_value(), step);
  }
  EXPECT_EQ(th::latest_checkpoint(dir()), root.file("ckpt/model.ckpt-6"));
}

TEST_F(CheckpointSaverHookTest, AsyncWriteErrorIsReportedByClose) {
  // A directory where the variables file of step 2 goes: only the write itself fails.
  fs::create_directories(root.file("ckpt/model.ckpt-2"));
  auto listener = std::make_shared<RecordingListener>();
  auto sess = session({hook({.save_steps = 2, .listeners = {listener}, .async_save = true})});
  run(*sess, 2);
  const std::string error = th::testing::error_message<th::Error>([&] { sess->close(); });
  EXPECT_THAT(error, ::testing::HasSubstr("Cannot write checkpoint file '" +
                                          root.file("ckpt/model.ckpt-2") + "'"));
  EXPECT_THAT(saved_steps(), ElementsAre(0));
  EXPECT_EQ(listener->count("after_save 2"), 0);
  EXPECT_EQ(listener->count("end"), 1);  // end() still reached the listeners
}

TEST_F(CheckpointSaverHookTest, AsyncWriteErrorIsRaisedByALaterRun) {
  fs::create_directories(root.file("ckpt/model.ckpt-1"));
  auto sess = session({hook({.save_steps = 1, .async_save = true})});
  // Step 1's write fails; the next trigger (step 2) waits for it and raises its error.
  run(*sess, 1);
  EXPECT_THAT(th::testing::error_message<th::Error>([&] { run(*sess, 1); }),
              ::testing::HasSubstr(root.file("ckpt/model.ckpt-1")));
}

TEST_F(CheckpointSaverHookTest, ARestartDoesNotRewriteTheCheckpointItRestoredFrom) {
  const std::string path3 = root.file("ckpt/model.ckpt-3");
  {
    th::MonitoredTrainingSession sess(m.g, {.checkpoint_dir = dir(),
                                            .checkpoints = {.save_steps = 2},
                                            .summaries = {.log_step_count_steps = 0},
                                            .env = fe.env()});
    run(sess, 3);
  }
  EXPECT_THAT(saved_steps(), ElementsAre(0, 2, 3));
  const auto mtime = fs::last_write_time(path3);
  fe.log->clear();
  th::testing::TinyModel again;
  {
    th::MonitoredTrainingSession sess(again.g,
                                      {.checkpoint_dir = dir(),
                                       .checkpoints = {.save_steps = 2, .async_save = true},
                                       .summaries = {.log_step_count_steps = 0},
                                       .env = fe.env()});
    EXPECT_EQ(again.g.global_step_value(), 3);
    EXPECT_EQ(fs::last_write_time(path3), mtime);
    sess.run(again.train, again.feed());
  }
  EXPECT_THAT(saved_steps(), ElementsAre(0, 2, 3, 4));
  auto info = fe.log->messages();
  ASSERT_FALSE(info.empty());
  EXPECT_EQ(info.front(), "Restoring parameters from " + path3);
  EXPECT_THAT(without_waiting(std::vector<std::string>(info.begin() + 1, info.end())),
              ElementsAreArray(save_lines({4})));
}

}  // namespace checkpoint_saver_hook_test

namespace checkpoint_saver_hook_test {

// Asks the Coordinator to stop as soon as the session exists (as PreemptionHook does for a signal
// received before the first step).
struct StopAtCreationHook : th::SessionRunHook {
  void after_create_session(th::Session&, th::Coordinator& coord) override { coord.request_stop(); }
};

// Makes every snapshot slow, so the writer thread sees the stop request before any job.
struct SlowState : th::StateProvider {
  std::string save_state() const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return "x";
  }
  void load_state(std::string_view) override {}
};

TEST_F(CheckpointSaverHookTest, AsyncSaveAfterTheWriterEndedIsWrittenOnTheTrainingThread) {
  SlowState slow;
  m.g.register_state("test/slow", &slow);
  auto sess = session(
      {std::make_shared<StopAtCreationHook>(), hook({.save_steps = 1, .async_save = true})});
  EXPECT_TRUE(sess->should_stop());
  sess->close();  // returns: nothing waits for a writer that has gone
  EXPECT_THAT(saved_steps(), ElementsAre(0));
  EXPECT_THAT(without_waiting(fe.log->messages()), ElementsAreArray(save_lines({0})));
  m.g.unregister_state("test/slow");
}

}  // namespace checkpoint_saver_hook_test
