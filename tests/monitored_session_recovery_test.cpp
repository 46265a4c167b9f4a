// Recovery and stopping of the monitored session engine, case by case as TF's
// monitored_session_test.py has them.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/coordinator.h"
#include "trainhooks/errors.h"
#include "trainhooks/monitored_session.h"
#include "trainhooks/preemption.h"
#include "trainhooks/stop_policy.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;

namespace monitored_session_recovery_test {

const std::string kRecovering =
    "An error was raised. This may be due to a preemption in a connected worker or parameter "
    "server. "
    "The current session will be closed and a new session will be created. Error: ";

// Counts the callbacks; before_run/after_run run the given actions (which may throw).
struct ScriptedHook : th::SessionRunHook {
  int begins = 0, creations = 0, before_runs = 0, after_runs = 0, ends = 0;
  std::function<void(ScriptedHook&)> on_before_run, on_after_run;
  th::Coordinator* coord = nullptr;
  void begin() override { ++begins; }
  void after_create_session(th::Session&, th::Coordinator& c) override {
    ++creations;
    coord = &c;
  }
  th::SessionRunArgs before_run(th::SessionRunContext&) override {
    ++before_runs;
    if (on_before_run) on_before_run(*this);
    return {};
  }
  void after_run(th::SessionRunContext&, const th::SessionRunValues&) override {
    ++after_runs;
    if (on_after_run) on_after_run(*this);
  }
  void end(th::Session&) override { ++ends; }
};

struct Fixture {
  th::testing::TinyModel m;
  th::testing::FakeEnv fake;
  std::shared_ptr<ScriptedHook> hook = std::make_shared<ScriptedHook>();

  std::unique_ptr<th::MonitoredSession> session(th::MonitoredSessionOptions options = {}) {
    options.env = fake.env();
    return std::make_unique<th::MonitoredSession>(
        std::make_unique<th::ChiefSessionCreator>(m.g,
                                                  th::SessionCreatorOptions{.env = fake.env()}),
        th::Hooks{hook}, options);
  }
  int64_t step() const { return m.g.global_step_value(); }
};

TEST(MonitoredSessionRecoveryTest, OutOfRangeFromBeforeRunEndsTrainingCleanly) {
  Fixture f;
  int calls = 0;
  f.hook->on_before_run = [&](ScriptedHook&) {
    if (++calls == 3) throw th::OutOfRangeError("no more files");
  };
  auto sess = f.session();
  sess->run(f.m.train, f.m.feed());
  sess->run(f.m.train, f.m.feed());
  EXPECT_FALSE(sess->should_stop());
  th::RunResults r = sess->run(f.m.train, f.m.feed());
  EXPECT_TRUE(r.end_of_input());
  EXPECT_TRUE(sess->should_stop());
  EXPECT_EQ(f.step(), 2);  // the third step did not run
  EXPECT_NO_THROW(sess->close());
  EXPECT_EQ(f.hook->ends, 1);
  EXPECT_EQ(f.fake.log->messages(),
            (std::vector<std::string>{"Reached the end of input; stopping: no more files"}));
}

TEST(MonitoredSessionRecoveryTest, OutOfRangeFromAfterRunEndsTrainingCleanly) {
  Fixture f;
  f.hook->on_after_run = [](ScriptedHook&) { throw th::OutOfRangeError("epoch limit"); };
  auto sess = f.session();
  th::RunResults r = sess->run(f.m.train, f.m.feed());
  EXPECT_TRUE(r.end_of_input());
  EXPECT_TRUE(sess->should_stop());
  EXPECT_EQ(f.step(), 1);  // the step itself ran
  EXPECT_THROW(sess->run(f.m.train, f.m.feed()), th::RuntimeError);
  sess->close();
  EXPECT_EQ(f.hook->ends, 1);
}

class CoordinatorPreemptionTest : public ::testing::TestWithParam<int> {};

TEST_P(CoordinatorPreemptionTest, PreemptionStoredInTheCoordinatorRecovers) {
  Fixture f;
  auto sess = f.session();
  sess->run(f.m.train, f.m.feed());
  EXPECT_EQ(f.hook->creations, 1);
  // Another thread reports a lost peer through the Coordinator.
  std::exception_ptr error =
      GetParam() == 0 ? std::make_exception_ptr(th::AbortedError("peer aborted"))
                      : std::make_exception_ptr(th::UnavailableError("peer unreachable"));
  sess->coordinator().start_thread("peer", [error] { std::rethrow_exception(error); });
  sess->coordinator().wait_for_stop(10);
  EXPECT_FALSE(sess->should_stop());
  EXPECT_EQ(f.hook->creations, 2);  // a new session
  EXPECT_FALSE(sess->coordinator().should_stop());
  sess->run(f.m.train, f.m.feed());
  EXPECT_EQ(f.hook->after_runs, 2);
  sess->close();
  EXPECT_EQ(f.fake.log->messages().size(), 1u);
  EXPECT_EQ(f.fake.log->messages()[0].rfind(kRecovering, 0), 0u) << f.fake.log->messages()[0];
}

INSTANTIATE_TEST_SUITE_P(AbortedAndUnavailable, CoordinatorPreemptionTest, ::testing::Values(0, 1));

TEST(MonitoredSessionRecoveryTest, PreemptionInTheCoordinatorIsRecoveredFromTheNextRun) {
  Fixture f;
  auto sess = f.session();
  sess->coordinator().request_stop(std::make_exception_ptr(th::AbortedError("peer aborted")));
  th::RunResults r = sess->run(f.m.train, f.m.feed());
  EXPECT_FALSE(r.end_of_input());
  EXPECT_EQ(f.hook->creations, 2);
  EXPECT_EQ(f.step(), 1);
}

TEST(MonitoredSessionRecoveryTest, CancelledWhoseRootCauseInTheCoordinatorIsAbortedRecovers) {
  Fixture f;
  int calls = 0;
  f.hook->on_before_run = [&](ScriptedHook& h) {
    if (++calls == 1) {
      // The peer's failure is recorded first; this thread then sees only a cancelled queue.
      h.coord->request_stop(std::make_exception_ptr(th::AbortedError("peer aborted")));
      throw th::CancelledError("queue closed");
    }
  };
  auto sess = f.session();
  EXPECT_NO_THROW(sess->run(f.m.train, f.m.feed()));
  EXPECT_EQ(f.hook->creations, 2);
  EXPECT_EQ(f.step(), 1);
  EXPECT_EQ(f.fake.log->messages(), (std::vector<std::string>{kRecovering + "peer aborted"}));
}

TEST(MonitoredSessionRecoveryTest, CancelledWithAnotherRootCausePropagates) {
  Fixture f;
  f.hook->on_before_run = [](ScriptedHook& h) {
    h.coord->request_stop(std::make_exception_ptr(th::InternalError("bug")));
    throw th::CancelledError("queue closed");
  };
  auto sess = f.session();
  EXPECT_EQ(
      th::testing::error_message<th::CancelledError>([&] { sess->run(f.m.train, f.m.feed()); }),
      "queue closed");
  EXPECT_EQ(f.hook->creations, 1);
}

// Fails the first `failures` creations with AbortedError.
struct FlakyCreator : th::SessionCreator {
  th::ChiefSessionCreator inner;
  int failures;
  int calls = 0;
  FlakyCreator(th::Graph& g, int n) : inner(g), failures(n) {}
  th::Graph& graph() override { return inner.graph(); }
  std::unique_ptr<th::Session> create_session() override {
    if (++calls <= failures) throw th::AbortedError("master not ready");
    return inner.create_session();
  }
};

TEST(MonitoredSessionRecoveryTest, AbortedWhileCreatingTheFirstSessionIsRetried) {
  th::testing::TinyModel m;
  th::testing::FakeEnv fake;
  auto creator = std::make_unique<FlakyCreator>(m.g, 2);
  FlakyCreator* raw = creator.get();
  th::MonitoredSession sess(std::move(creator), {}, {.env = fake.env()});
  EXPECT_EQ(raw->calls, 3);
  sess.run(m.train, m.feed());
  EXPECT_EQ(m.g.global_step_value(), 1);
  EXPECT_EQ(fake.log->messages(), (std::vector<std::string>{kRecovering + "master not ready",
                                                            kRecovering + "master not ready"}));
  // The second retry waited recovery_backoff_secs, through the Env's sleeper.
  EXPECT_EQ(fake.sleeper->sleeps(), (std::vector<double>{1.0}));
}

TEST(MonitoredSessionRecoveryTest, RecoveryIsBoundedWithBackoff) {
  Fixture f;
  f.hook->on_before_run = [](ScriptedHook&) { throw th::AbortedError("always"); };
  auto sess = f.session({.recovery = {.max_attempts = 4, .backoff_secs = 0.5}});
  EXPECT_EQ(th::testing::error_message<th::AbortedError>([&] { sess->run(f.m.train, f.m.feed()); }),
            "always");
  EXPECT_EQ(f.hook->creations, 5);  // the first session and 4 recoveries
  EXPECT_EQ(f.fake.log->messages(), std::vector<std::string>(4, kRecovering + "always"));
  // Waits of 0.5, 1 and 2 s before the second, third and fourth attempts, in slices of at most
  // a second so that a signal is seen.
  EXPECT_EQ(f.fake.sleeper->sleeps(), (std::vector<double>{0.5, 1.0, 1.0, 1.0}));
  auto errors = f.fake.log->messages(th::LogLevel::kError);
  EXPECT_EQ(errors,
            (std::vector<std::string>{
                "Giving up after 4 consecutive attempts to recover the session. Error: always"}));
}

TEST(MonitoredSessionRecoveryTest, MonitoredTrainingSessionPassesTheRecoveryBounds) {
  Fixture f;
  f.hook->on_before_run = [](ScriptedHook&) { throw th::AbortedError("always"); };
  th::MonitoredTrainingSession sess(f.m.g, {.hooks = {f.hook},
                                            .summaries = {.log_step_count_steps = 0},
                                            .recovery = {.max_attempts = 3, .backoff_secs = 0.25},
                                            .handle_preemption_signals = false,
                                            .env = f.fake.env()});
  EXPECT_THROW(sess.run(f.m.train, f.m.feed()), th::AbortedError);
  EXPECT_EQ(f.hook->creations, 4);
  EXPECT_EQ(f.fake.sleeper->sleeps(), (std::vector<double>{0.25, 0.5}));
}

TEST(MonitoredSessionRecoveryTest, SuccessfulRunResetsTheRecoveryCount) {
  Fixture f;
  int calls = 0;
  f.hook->on_before_run = [&](ScriptedHook&) {
    if (++calls % 2 == 1) throw th::AbortedError("every other run");
  };
  auto sess = f.session({.recovery = {.max_attempts = 1}});
  for (int i = 0; i < 5; ++i) sess->run(f.m.train, f.m.feed());
  EXPECT_EQ(f.hook->after_runs, 5);
  EXPECT_EQ(f.hook->creations, 6);
  EXPECT_TRUE(f.fake.sleeper->sleeps().empty());
}

TEST(MonitoredSessionRecoveryTest, FileErrorsAreNeverRetried) {
  Fixture f;
  f.hook->on_after_run = [](ScriptedHook&) {
    throw th::FileError("Cannot write 'ckpt/model.ckpt-1': Input/output error");
  };
  auto sess = f.session();
  EXPECT_THROW(sess->run(f.m.train, f.m.feed()), th::FileError);
  EXPECT_EQ(f.hook->creations, 1);
  EXPECT_TRUE(f.fake.log->messages().empty());
}

// Holds every free file descriptor of the process (below a lowered soft limit), so that the next
// open() fails with EMFILE, "Too many open files"; gives them back at destruction.
class FileDescriptorsExhausted {
 public:
  FileDescriptorsExhausted() {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    struct rlimit lowered = saved_;
    lowered.rlim_cur = std::min<rlim_t>(saved_.rlim_cur, 1024);
    ::setrlimit(RLIMIT_NOFILE, &lowered);
    for (int fd; (fd = ::dup(STDERR_FILENO)) >= 0;) held_.push_back(fd);
    errno_ = errno;
  }
  ~FileDescriptorsExhausted() {
    for (int fd : held_) ::close(fd);
    ::setrlimit(RLIMIT_NOFILE, &saved_);
  }
  int error() const { return errno_; }

 private:
  struct rlimit saved_ {};
  std::vector<int> held_;
  int errno_ = 0;
};

// UndefinedBehaviorSanitizer's vptr check reads an object's memory through a pipe
// (sanitizer_common's IsAccessibleMemoryRange); in a process with no descriptor left, it reports
// each polymorphic call it has not seen before as "invalid vptr", wherever it is. Its handler is in
// the process only when the build is instrumented with it (`make sanitize`).
bool ubsan_vptr_check_in_process() {
  return ::dlsym(RTLD_DEFAULT, "__ubsan_handle_dynamic_type_cache_miss_abort") != nullptr ||
         ::dlsym(RTLD_DEFAULT, "__ubsan_handle_dynamic_type_cache_miss") != nullptr;
}

// The case: a save that keeps failing with a file error once retried forever. It ends
// training with the error instead: no new session, no retry, no log of a recovery.
TEST(MonitoredSessionRecoveryTest, ASaveFailingWithTooManyOpenFilesEndsTraining) {
  if (ubsan_vptr_check_in_process())
    GTEST_SKIP() << "UBSan's vptr check needs free file descriptors; make test runs this case";
  th::testing::TempDir dir;
  Fixture f;
  th::MonitoredTrainingSession sess(f.m.g,
                                    {.checkpoint_dir = dir.path(),
                                     .hooks = {f.hook},
                                     .checkpoints = {.save_steps = 1},
                                     .summaries = {.save_steps = 0, .log_step_count_steps = 0},
                                     .handle_preemption_signals = false,
                                     .env = f.fake.env()});
  sess.run(f.m.train, f.m.feed());
  std::string message;
  {
    FileDescriptorsExhausted exhausted;
    ASSERT_EQ(exhausted.error(), EMFILE);
    // The save of step 2, in the CheckpointSaverHook's after_run, cannot open its file.
    message = th::testing::error_message<th::ResourceExhaustedError>(
        [&] { sess.run(f.m.train, f.m.feed()); });
  }
  EXPECT_THAT(message, ::testing::HasSubstr(dir.path() + "/"));
  EXPECT_THAT(message, ::testing::HasSubstr("Too many open files"));
  EXPECT_EQ(f.hook->creations, 1);
  EXPECT_EQ(f.step(), 2);
  for (const auto& line : f.fake.log->messages())
    EXPECT_EQ(line.find("An error was raised"), std::string::npos) << line;
  EXPECT_TRUE(f.fake.sleeper->sleeps().empty());
  // The checkpoint before is intact and still the newest; the failed one left no file.
  EXPECT_EQ(th::latest_checkpoint(dir.path()), dir.file("model.ckpt-1"));
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find("model.ckpt-2"), std::string::npos) << e.path();
}

// Raises `signal` on its `at`-th sleep (counting from 1), then sleeps as a FakeSleeper does.
struct SignallingSleeper : th::Sleeper {
  int signal, at, calls = 0;
  std::vector<double> sleeps;
  SignallingSleeper(int s, int n) : signal(s), at(n) {}
  void sleep_for(double seconds) override {
    sleeps.push_back(seconds);
    if (++calls == at) std::raise(signal);
  }
};

TEST(MonitoredSessionRecoveryTest, ASignalDuringTheBackoffEndsRecovery) {
  Fixture f;
  th::PreemptionHandler handler;  // records the signal instead of ending the process
  auto sleeper = std::make_shared<SignallingSleeper>(SIGTERM, 3);
  f.hook->on_before_run = [](ScriptedHook&) { throw th::AbortedError("always"); };
  auto env = f.fake.env();
  env.sleeper = sleeper;
  auto sess = std::make_unique<th::MonitoredSession>(
      std::make_unique<th::ChiefSessionCreator>(f.m.g, th::SessionCreatorOptions{.env = env}),
      th::Hooks{f.hook}, th::MonitoredSessionOptions{.env = env, .recovery = {.backoff_secs = 8}});
  EXPECT_EQ(th::testing::error_message<th::AbortedError>([&] { sess->run(f.m.train, f.m.feed()); }),
            "always");
  th::PreemptionHandler::clear();
  // The first retry at once; the second's 8 s wait ended by SIGTERM after its third second.
  EXPECT_EQ(f.hook->creations, 2);
  EXPECT_EQ(sleeper->sleeps, (std::vector<double>{1.0, 1.0, 1.0}));
  EXPECT_EQ(f.fake.log->messages(), std::vector<std::string>(2, kRecovering + "always"));
  EXPECT_EQ(
      f.fake.log->messages(th::LogLevel::kError),
      (std::vector<std::string>{"Not recovering the session: received SIGTERM. Error: always"}));
}

TEST(MonitoredSessionRecoveryTest, ASignalReceivedBeforeTheErrorPreventsRecovery) {
  Fixture f;
  th::PreemptionHandler handler;
  f.hook->on_before_run = [](ScriptedHook&) {
    std::raise(SIGTERM);
    throw th::UnavailableError("peer gone");
  };
  auto sess = f.session();
  EXPECT_THROW(sess->run(f.m.train, f.m.feed()), th::UnavailableError);
  th::PreemptionHandler::clear();
  EXPECT_EQ(f.hook->creations, 1);
  EXPECT_TRUE(f.fake.log->messages().empty());
  EXPECT_EQ(
      f.fake.log->messages(th::LogLevel::kError),
      (std::vector<std::string>{"Not recovering the session: received SIGTERM. Error: peer gone"}));
}

TEST(MonitoredSessionRecoveryTest, AStopRequestedBeforeTheErrorPreventsRecovery) {
  Fixture f;
  f.hook->on_after_run = [](ScriptedHook& h) {
    h.coord->request_stop();  // training is ending anyway
    throw th::AbortedError("peer gone");
  };
  auto sess = f.session();
  EXPECT_THROW(sess->run(f.m.train, f.m.feed()), th::AbortedError);
  EXPECT_EQ(f.hook->creations, 1);
  EXPECT_EQ(f.fake.log->messages(th::LogLevel::kError),
            (std::vector<std::string>{
                "Not recovering the session: a stop was requested. Error: peer gone"}));
}

TEST(MonitoredSessionRecoveryTest, RunStepFnRerunsTheWholeStepFunctionOnAborted) {
  Fixture f;
  auto sess = f.session();
  int side_effects = 0;
  int value = sess->run_step_fn([&](th::StepContext& ctx) {
    ++side_effects;
    ctx.run_with_hooks(f.m.train, f.m.feed());
    if (side_effects == 1) throw th::AbortedError("preempted inside the step");
    return 7;
  });
  EXPECT_EQ(value, 7);
  EXPECT_EQ(side_effects, 2);
  EXPECT_EQ(f.hook->creations, 2);
  // The new session's chief initialised the state again (no checkpoint to restore): one step.
  EXPECT_EQ(f.step(), 1);
}

TEST(MonitoredSessionRecoveryTest, RunStepFnRerunsWhenAHookInsideRunWithHooksAborts) {
  Fixture f;
  int calls = 0;
  f.hook->on_before_run = [&](ScriptedHook&) {
    if (++calls == 2) throw th::AbortedError("hook aborted");
  };
  auto sess = f.session();
  int side_effects = 0;
  sess->run_step_fn([&](th::StepContext& ctx) {
    ++side_effects;
    ctx.run_with_hooks(f.m.train, f.m.feed());
    ctx.run_with_hooks(f.m.train, f.m.feed());
  });
  // First attempt: run 1 fine, run 2 aborted inside the hook (not retried there); second attempt:
  // both runs.
  EXPECT_EQ(side_effects, 2);
  EXPECT_EQ(f.hook->before_runs, 4);
  EXPECT_EQ(f.hook->after_runs, 3);
  EXPECT_EQ(f.hook->creations, 2);
}

TEST(MonitoredSessionRecoveryTest, SingularMonitoredSessionDoesNotRecover) {
  th::testing::TinyModel m;
  th::testing::FakeEnv fake;
  auto hook = std::make_shared<ScriptedHook>();
  hook->on_before_run = [](ScriptedHook&) { throw th::AbortedError("Abort"); };
  th::SingularMonitoredSession sess(m.g, {hook}, {.env = fake.env()});
  EXPECT_THROW(sess.run(m.train, m.feed()), th::AbortedError);
  EXPECT_EQ(hook->creations, 1);
  sess.coordinator().request_stop(std::make_exception_ptr(th::UnavailableError("gone")));
  EXPECT_THROW(sess.should_stop(), th::UnavailableError);
}

// TF's StopCoordinatorWithException: on its `calls_before_stopping`-th after_run, another thread
// stores `error` in the Coordinator while this run is still in its hooks.
struct StopCoordinatorWithException : th::SessionRunHook {
  int calls_before_stopping;
  std::exception_ptr error;
  th::Coordinator* coord = nullptr;
  StopCoordinatorWithException(int calls, std::exception_ptr e)
      : calls_before_stopping(calls), error(std::move(e)) {}
  void after_create_session(th::Session&, th::Coordinator& c) override { coord = &c; }
  void after_run(th::SessionRunContext&, const th::SessionRunValues&) override {
    if (--calls_before_stopping != 0) return;
    std::thread side([this] { coord->request_stop(error); });
    side.join();
  }
};

struct CountingFixture {
  th::testing::TinyModel m;
  th::testing::FakeEnv fake;
  int sessions_created = 0;

  std::unique_ptr<th::MonitoredSession> session(std::shared_ptr<th::SessionRunHook> hook) {
    struct Counting : th::ChiefSessionCreator {
      int* count;
      Counting(th::Graph& g, th::SessionCreatorOptions o, int* c)
          : th::ChiefSessionCreator(g, std::move(o)), count(c) {}
      std::unique_ptr<th::Session> create_session() override {
        ++*count;
        return th::ChiefSessionCreator::create_session();
      }
    };
    return std::make_unique<th::MonitoredSession>(
        std::make_unique<Counting>(m.g, th::SessionCreatorOptions{.env = fake.env()},
                                   &sessions_created),
        th::Hooks{std::move(hook)}, th::MonitoredSessionOptions{.env = fake.env()});
  }
};

TEST(RecoverableSessionTest, RecoveryFromCoordinatorException) {
  CountingFixture f;
  auto sess = f.session(std::make_shared<StopCoordinatorWithException>(
      2, std::make_exception_ptr(th::AbortedError("Aborted at N"))));
  EXPECT_EQ(f.sessions_created, 1);
  EXPECT_FALSE(sess->should_stop());
  sess->run(f.m.train, f.m.feed());  // call 0: the Coordinator does not abort
  EXPECT_FALSE(sess->should_stop());
  sess->run(f.m.train, f.m.feed());  // call 1: aborted while the run is in after_run
  // Even though the Coordinator was asked to stop, a new session is created and training goes on.
  EXPECT_FALSE(sess->should_stop());
  EXPECT_EQ(f.sessions_created, 2);
  EXPECT_EQ(f.fake.log->messages(th::LogLevel::kError), std::vector<std::string>{});
  EXPECT_EQ(f.fake.log->messages(th::LogLevel::kInfo),
            std::vector<std::string>{kRecovering + "Aborted at N"});
  sess->run(f.m.train, f.m.feed());
  EXPECT_NO_THROW(sess->close());
}

TEST(RecoverableSessionTest, StepFnRecoveryFromCoordinatorExceptionWhenRunHooks) {
  CountingFixture f;
  auto sess = f.session(std::make_shared<StopCoordinatorWithException>(
      2, std::make_exception_ptr(th::AbortedError("Aborted at N"))));
  auto step = [&](th::StepContext& ctx) { ctx.run_with_hooks(f.m.train, f.m.feed()); };
  sess->run_step_fn(step);
  EXPECT_FALSE(sess->should_stop());
  sess->run_step_fn(step);
  EXPECT_FALSE(sess->should_stop());
  EXPECT_EQ(f.sessions_created, 2);
}

TEST(RecoverableSessionTest, RecoveryFromNonPreemptionInCoordinator) {
  CountingFixture f;
  auto sess = f.session(std::make_shared<StopCoordinatorWithException>(
      2,
      std::make_exception_ptr(th::UnknownError("Some fatal exception inside the coordinator."))));
  sess->run(f.m.train, f.m.feed());
  EXPECT_FALSE(sess->should_stop());
  sess->run(f.m.train, f.m.feed());
  // A non-redeemable error: training stops (should_stop() is true, it does not raise), the session
  // is not created again, and close() raises the error.
  EXPECT_TRUE(sess->should_stop());
  EXPECT_TRUE(sess->should_stop());
  EXPECT_EQ(f.sessions_created, 1);
  EXPECT_EQ(th::testing::error_message<th::UnknownError>([&] { sess->close(); }),
            "Some fatal exception inside the coordinator.");
}

TEST(RecoverableSessionTest, RecoveryFromNonPreemptionInCoordinatorWhenRunHooks) {
  CountingFixture f;
  auto sess = f.session(std::make_shared<StopCoordinatorWithException>(
      2,
      std::make_exception_ptr(th::UnknownError("Some fatal exception inside the coordinator."))));
  auto step = [&](th::StepContext& ctx) { ctx.run_with_hooks(f.m.train, f.m.feed()); };
  sess->run_step_fn(step);
  EXPECT_FALSE(sess->should_stop());
  sess->run_step_fn(step);
  EXPECT_TRUE(sess->should_stop());
  EXPECT_EQ(f.sessions_created, 1);
  EXPECT_THROW(sess->close(), th::UnknownError);
}

TEST(MonitoredSessionRecoveryTest, AnErrorFromACoordinatorThreadStopsTrainingAndIsRaisedByClose) {
  Fixture f;
  auto sess = f.session({.stop_grace_period_secs = 5});
  sess->run(f.m.train, f.m.feed());
  sess->coordinator().start_thread("writer", [] { throw th::ResourceExhaustedError("disk full"); });
  sess->coordinator().wait_for_stop(10);
  EXPECT_TRUE(sess->should_stop());
  EXPECT_EQ(f.step(), 1);
  EXPECT_EQ(th::testing::error_message<th::ResourceExhaustedError>([&] { sess->close(); }),
            "disk full");
  EXPECT_EQ(f.hook->ends, 1);  // end() ran first: the final checkpoint is still attempted
}

TEST(MonitoredSessionRecoveryTest, TheCoordinatorsErrorWinsOverAHooksEndErrorAtClose) {
  Fixture f;
  struct FailingEnd : th::SessionRunHook {
    void end(th::Session&) override { throw th::FileError("cannot flush"); }
  };
  auto sess = std::make_unique<th::MonitoredSession>(
      std::make_unique<th::ChiefSessionCreator>(f.m.g,
                                                th::SessionCreatorOptions{.env = f.fake.env()}),
      th::Hooks{std::make_shared<FailingEnd>()}, th::MonitoredSessionOptions{.env = f.fake.env()});
  sess->coordinator().request_stop(std::make_exception_ptr(th::UnknownError("thread failed")));
  EXPECT_EQ(th::testing::error_message<th::UnknownError>([&] { sess->close(); }), "thread failed");
  EXPECT_EQ(f.fake.log->messages(th::LogLevel::kError),
            std::vector<std::string>{"A hook's end() failed too: cannot flush"});
}

// Records what it was asked and answers as told.
struct ScriptedPolicy : th::StopPolicy {
  std::vector<bool> asked;
  std::function<bool(bool)> answer = [](bool local) { return local; };
  bool decide(bool local_stop) override {
    asked.push_back(local_stop);
    return answer(local_stop);
  }
};

TEST(MonitoredSessionStopTest, EveryDecisionGoesThroughTheStopPolicyOncePerRun) {
  Fixture f;
  auto policy = std::make_shared<ScriptedPolicy>();
  int runs = 0;
  // Another process wants to stop after the third run; this one never does.
  policy->answer = [&](bool local) { return local || runs == 3; };
  f.hook->on_after_run = [&](ScriptedHook&) { ++runs; };
  auto sess = f.session({.stop_policy = policy});
  while (!sess->should_stop()) sess->run(f.m.train, f.m.feed());
  EXPECT_EQ(f.step(), 3);
  // One decision after the session was created, then one per run.
  EXPECT_EQ(policy->asked, (std::vector<bool>{false, false, false, false}));
}

TEST(MonitoredSessionStopTest, HookRequestEndOfInputAndCoordinatorAllReachThePolicy) {
  Fixture f;
  auto policy = std::make_shared<ScriptedPolicy>();
  policy->answer = [](bool) { return false; };  // the others keep going: so does this process
  f.hook->on_after_run = [](ScriptedHook& h) {
    if (h.after_runs == 2) h.coord->request_stop();
  };
  auto sess = f.session({.stop_policy = policy});
  sess->run(f.m.train, f.m.feed());
  sess->run(f.m.train, f.m.feed());
  // With a policy, the Coordinator's stop counts only through the agreed decision.
  EXPECT_FALSE(sess->should_stop());
  EXPECT_EQ(policy->asked, (std::vector<bool>{false, false, true}));
}

TEST(MonitoredSessionStopTest, WithoutAPolicyACoordinatorStopIsSeenAtOnce) {
  Fixture f;
  auto sess = f.session();
  sess->run(f.m.train, f.m.feed());
  sess->coordinator().request_stop();
  EXPECT_TRUE(sess->should_stop());
  // As TF's: only a hook's (or step function's) stop request refuses a run.
  sess->run(f.m.train, f.m.feed());
  EXPECT_EQ(f.step(), 2);
  EXPECT_TRUE(sess->should_stop());
}

TEST(MonitoredSessionStopTest, AStopAgreedThroughThePolicyRefusesTheNextRun) {
  Fixture f;
  auto policy = std::make_shared<ScriptedPolicy>();
  policy->answer = [](bool) { return true; };  // another process stopped
  auto sess = f.session({.stop_policy = policy});
  EXPECT_TRUE(sess->should_stop());
  EXPECT_EQ(th::testing::error_message<th::RuntimeError>([&] { sess->run(f.m.train, f.m.feed()); }),
            "Run called even after should_stop requested.");
}

TEST(MonitoredSessionStopTest, InvalidRecoveryOptionsAreRejected) {
  Fixture f;
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [&] { f.session({.recovery = {.max_attempts = -1}}); }),
            "MonitoredSession: invalid recovery.max_attempts -1");
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [&] { f.session({.recovery = {.backoff_secs = -2}}); }),
            "MonitoredSession: invalid recovery.backoff_secs -2");
}

}  // namespace monitored_session_recovery_test
