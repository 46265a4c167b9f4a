#include "trainhooks/training_session.h"

#include <torch/torch.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "test_util.h"
#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/errors.h"
#include "trainhooks/hooks/preemption_hook.h"
#include "trainhooks/hooks/step_counter_hook.h"
#include "trainhooks/hooks/stop_at_step_hook.h"
#include "trainhooks/optimizers.h"
#include "trainhooks/summary/event_reader.h"
#include "trainhooks/summary/event_writer.h"

namespace th = trainhooks;

namespace monitored_session_test {

// Records every call it receives, in a log shared by all hooks of a test.
struct RecordingHook : th::SessionRunHook {
  std::string name;
  std::vector<std::string>* log;
  th::SessionRunArgs args;
  std::function<void(th::SessionRunContext&)> on_after_run;
  std::vector<th::RunResults> seen;
  Calls declared;  // what calls() says
  RecordingHook(std::string n, std::vector<std::string>* c, Calls d = {})
      : name(std::move(n)), log(c), declared(d) {}
  Calls calls() const override { return declared; }
  void begin() override { log->push_back(name + ".begin"); }
  void after_create_session(th::Session&, th::Coordinator&) override {
    log->push_back(name + ".after_create_session");
  }
  th::SessionRunArgs before_run(th::SessionRunContext&) override {
    log->push_back(name + ".before_run");
    return args;
  }
  void after_run(th::SessionRunContext& ctx, const th::SessionRunValues& v) override {
    log->push_back(name + ".after_run");
    seen.push_back(v.results);
    if (on_after_run) on_after_run(ctx);
  }
  void end(th::Session&) override { log->push_back(name + ".end"); }
};

struct Model {
  th::Graph g;
  th::Node x, w, loss, train;
  Model() {
    x = g.placeholder("x", {.dtype = torch::kFloat});
    w = g.variable("w", torch::tensor({1.0f}));
    loss = g.op("loss", [this](th::Run& r) { return (r[w] * r[x]).square().sum(); });
    train = g.minimize("train", loss, th::sgd(0.01));
  }
  th::Feeds feeds() { return {{x, torch::tensor({2.0f})}}; }
};

std::unique_ptr<th::SessionCreator> chief(th::Graph& g, const th::Env& env = {}) {
  return std::make_unique<th::ChiefSessionCreator>(g, th::SessionCreatorOptions{env});
}

TEST(MonitoredSessionTest, CallsHooksInTfOrder) {
  Model m;
  std::vector<std::string> calls;
  auto a = std::make_shared<RecordingHook>("a", &calls);
  auto b = std::make_shared<RecordingHook>("b", &calls);
  {
    th::MonitoredSession sess(chief(m.g), {a, b});
    EXPECT_TRUE(m.g.finalized());
    sess.run(m.train, m.feeds());
  }
  EXPECT_EQ(calls,
            (std::vector<std::string>{"a.begin", "b.begin", "a.after_create_session",
                                      "b.after_create_session", "a.before_run", "b.before_run",
                                      "a.after_run", "b.after_run", "a.end", "b.end"}));
}

// Hooks that override only some of the per-run calls (and say nothing in calls()).
struct OnlyBeforeRun : th::SessionRunHook {
  std::vector<std::string>* log;
  explicit OnlyBeforeRun(std::vector<std::string>* l) : log(l) {}
  th::SessionRunArgs before_run(th::SessionRunContext&) override {
    log->push_back("before.before_run");
    return {};
  }
};
struct OnlyAfterRun : th::SessionRunHook {
  std::vector<std::string>* log;
  std::vector<th::RunResults> seen;
  explicit OnlyAfterRun(std::vector<std::string>* l) : log(l) {}
  void after_run(th::SessionRunContext&, const th::SessionRunValues& v) override {
    log->push_back("after.after_run");
    seen.push_back(v.results);
  }
};
struct OnlyEnd : th::SessionRunHook {
  std::vector<std::string>* log;
  explicit OnlyEnd(std::vector<std::string>* l) : log(l) {}
  void end(th::Session&) override { log->push_back("none.end"); }
};

TEST(MonitoredSessionTest, AHookIsCalledPerRunOnlyForTheCallsItOverrides) {
  Model m;
  std::vector<std::string> calls;
  auto none = std::make_shared<OnlyEnd>(&calls);
  auto after = std::make_shared<OnlyAfterRun>(&calls);
  auto before = std::make_shared<OnlyBeforeRun>(&calls);
  auto both = std::make_shared<RecordingHook>("both", &calls);
  both->args.fetches = {m.w};
  {
    th::MonitoredSession sess(chief(m.g), {none, after, before, both});
    sess.run(m.train, m.feeds());
    sess.run(m.train, m.feeds());
  }
  std::vector<std::string> per_run = {"before.before_run", "both.before_run", "after.after_run",
                                      "both.after_run"};
  std::vector<std::string> expected = {"both.begin", "both.after_create_session"};
  expected.insert(expected.end(), per_run.begin(), per_run.end());
  expected.insert(expected.end(), per_run.begin(), per_run.end());
  expected.push_back("none.end");
  expected.push_back("both.end");
  EXPECT_EQ(calls, expected);
  // The hook called after the run only gets no values; the other its own fetch.
  ASSERT_EQ(after->seen.size(), 2u);
  EXPECT_TRUE(after->seen[1].empty());
  ASSERT_EQ(both->seen.size(), 2u);
  EXPECT_EQ(both->seen[1].size(), 1u);
  EXPECT_TRUE(both->seen[1].contains(m.w));
}

TEST(MonitoredSessionTest, AnOverriddenCallIsMadeWhateverCallsSays) {
  // calls() used to skip what it declared false, even an overridden call: a hook that forgot to
  // update it lost its before_run silently. What the class overrides decides now.
  Model m;
  std::vector<std::string> calls;
  auto hook =
      std::make_shared<RecordingHook>("hook", &calls, th::SessionRunHook::Calls{false, false});
  hook->args.fetches = {m.loss};
  {
    th::MonitoredSession sess(chief(m.g), {hook});
    sess.run(m.train, m.feeds());
  }
  EXPECT_EQ(calls, (std::vector<std::string>{"hook.begin", "hook.after_create_session",
                                             "hook.before_run", "hook.after_run", "hook.end"}));
  ASSERT_EQ(hook->seen.size(), 1u);
  EXPECT_TRUE(hook->seen[0].contains(m.loss));
}

TEST(MonitoredSessionTest, HookFetchesAreMergedWithTheCallersAndSplitBack) {
  Model m;
  std::vector<std::string> calls;
  auto a = std::make_shared<RecordingHook>("a", &calls);
  auto b = std::make_shared<RecordingHook>("b", &calls);
  a->args.fetches = {m.loss};
  b->args.fetches = {m.w, "global_step"};
  th::MonitoredSession sess(chief(m.g), {a, b});
  auto r = sess.run(m.train, m.feeds());
  EXPECT_EQ(r.size(), 1u);
  ASSERT_EQ(a->seen.size(), 1u);
  // The hook's loss is the very value the train op used: (1 * 2)^2 = 4.
  EXPECT_FLOAT_EQ(a->seen[0][m.loss].item<float>(), 4.0f);
  EXPECT_EQ(a->seen[0].size(), 1u);
  // A hook fetching a variable sees it after the step: w = 1 - 0.01 * 2 * w * x^2 = 0.92.
  EXPECT_FLOAT_EQ(b->seen[0][m.w].item<float>(), 0.92f);
  // The global step is its value when the run began, before the train op's increment (TF's).
  EXPECT_EQ(b->seen[0]["global_step"].item<int64_t>(), 0);
}

TEST(MonitoredSessionTest, HookFeedsReachTheRunAndConflictsAreErrors) {
  Model m;
  std::vector<std::string> calls;
  auto a = std::make_shared<RecordingHook>("a", &calls);
  a->args.feeds = {{m.x, torch::tensor({3.0f})}};
  a->args.fetches = {m.loss};
  {
    th::MonitoredSession sess(chief(m.g), {a});
    sess.run(m.w);
    EXPECT_FLOAT_EQ(a->seen[0][m.loss].item<float>(), 9.0f);
    EXPECT_EQ(th::testing::error_message([&] { sess.run(m.w, m.feeds()); }),
              "Same tensor is fed by a SessionRunHook and user. Conflict(s): [x]");
  }
  Model m2;
  auto p = std::make_shared<RecordingHook>("p", &calls);
  auto q = std::make_shared<RecordingHook>("q", &calls);
  p->args.feeds = {{m2.x, torch::tensor({3.0f})}};
  q->args.feeds = {{"x", torch::tensor({4.0f})}};
  th::MonitoredSession sess2(chief(m2.g), {p, q});
  EXPECT_THROW(sess2.run(m2.loss), th::RuntimeError);
  EXPECT_EQ(th::testing::error_message([&] { sess2.run(m2.loss); }),
            "Same tensor is fed by two hooks. Conflict(s): [x]");
}

TEST(MonitoredSessionTest, RunOptionsFromHooksAreMerged) {
  Model m;
  struct OptionsHook : th::SessionRunHook {
    th::RunOptions::TraceLevel level;
    th::SessionRunValues last;
    explicit OptionsHook(th::RunOptions::TraceLevel l) : level(l) {}
    th::SessionRunArgs before_run(th::SessionRunContext&) override {
      return {.options = {.trace_level = level, .timeout_in_ms = 100}};
    }
    void after_run(th::SessionRunContext&, const th::SessionRunValues& v) override { last = v; }
  };
  auto a = std::make_shared<OptionsHook>(th::RunOptions::FULL_TRACE);
  auto b = std::make_shared<OptionsHook>(th::RunOptions::NO_TRACE);
  th::MonitoredSession sess(chief(m.g), {a, b});
  sess.run(m.loss, m.feeds(), {.timeout_in_ms = 60000});
  EXPECT_EQ(b->last.options.trace_level, th::RunOptions::FULL_TRACE);
  EXPECT_EQ(b->last.options.timeout_in_ms, 60000);
  ASSERT_EQ(b->last.run_metadata.step_stats.size(), 1u);
  EXPECT_EQ(b->last.run_metadata.step_stats[0].name, "loss");
}

TEST(MonitoredSessionTest, RequestStopEndsAfterTheCurrentRunWhoseResultsAreReturned) {
  Model m;
  std::vector<std::string> calls;
  auto a = std::make_shared<RecordingHook>("a", &calls);
  int runs = 0;
  a->on_after_run = [&](th::SessionRunContext& ctx) {
    if (++runs == 3) ctx.request_stop();
  };
  th::MonitoredSession sess(chief(m.g), {a});
  int loops = 0;
  while (!sess.should_stop()) {
    auto r = sess.run({m.train, m.loss}, m.feeds());
    EXPECT_TRUE(r[m.loss].defined());
    ++loops;
  }
  EXPECT_EQ(loops, 3);
  EXPECT_EQ(m.g.global_step_value(), 3);
  EXPECT_THROW(sess.run(m.train, m.feeds()), th::RuntimeError);
  EXPECT_EQ(th::testing::error_message([&] { sess.run(m.train, m.feeds()); }),
            "Run called even after should_stop requested.");
}

TEST(MonitoredSessionTest, ChiefInitializesAndWorkerKeepsState) {
  Model m;
  {
    th::Session raw(m.g);
    raw.run(m.train, m.feeds());
  }
  EXPECT_EQ(m.g.global_step_value(), 1);
  {
    th::MonitoredSession worker(std::make_unique<th::WorkerSessionCreator>(m.g));
    EXPECT_EQ(m.g.global_step_value(), 1);
  }
  th::MonitoredSession chief_sess(chief(m.g));
  EXPECT_EQ(m.g.global_step_value(), 0);
  EXPECT_FLOAT_EQ(m.g.variable_value(m.w).item<float>(), 1.0f);
}

TEST(MonitoredSessionTest, EndOfInputStopsCleanly) {
  th::Graph g;
  auto batch = g.input("in", th::tensor_source({torch::arange(5).to(torch::kFloat)}, {"x"}),
                       {.batch_size = 2});
  auto w = g.variable("w", torch::tensor({1.0f}));
  auto loss = g.op("loss", [=](th::Run& r) { return (r[batch[0]] * r[w]).sum(); });
  auto train = g.minimize("train", loss, th::sgd(0.01));
  th::testing::FakeEnv fake;
  std::vector<std::string> calls;
  auto hook = std::make_shared<RecordingHook>("h", &calls);
  th::MonitoredSession sess(chief(g, fake.env()), {hook}, {.env = fake.env()});
  int runs = 0;
  th::RunResults last;
  while (!sess.should_stop()) {
    last = sess.run({train, loss});
    ++runs;
  }
  EXPECT_EQ(runs, 4);  // batches of 2, 2, 1, then the end of input
  EXPECT_EQ(g.global_step_value(), 3);
  EXPECT_TRUE(last.end_of_input());
  EXPECT_THROW(last[loss], th::OutOfRangeError);
  EXPECT_EQ(fake.log->messages(th::LogLevel::kInfo),
            (std::vector<std::string>{
                "Reached the end of input; stopping: End of input 'in' after 1 epoch(s) "
                "[while evaluating train <- loss <- in/x]"}));
  sess.close();
  EXPECT_EQ(calls.back(), "h.end");  // a clean stop runs end()
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "h.after_run"), 3);
}

TEST(MonitoredSessionTest, RunStepFnUsesTheRawSessionWithoutHooks) {
  Model m;
  std::vector<std::string> calls;
  auto a = std::make_shared<RecordingHook>("a", &calls);
  th::MonitoredSession sess(chief(m.g), {a});
  calls.clear();
  float v = sess.run_step_fn([&](th::StepContext& ctx) {
    return ctx.session().run(m.loss, m.feeds())[m.loss].item<float>();
  });
  EXPECT_FLOAT_EQ(v, 4.0f);
  EXPECT_TRUE(calls.empty());
  sess.run_step_fn([&](th::StepContext& ctx) { ctx.run_with_hooks(m.train, m.feeds()); });
  EXPECT_EQ(calls, (std::vector<std::string>{"a.before_run", "a.after_run"}));
  EXPECT_FALSE(sess.should_stop());
  sess.run_step_fn([&](th::StepContext& ctx) { ctx.request_stop(); });
  EXPECT_TRUE(sess.should_stop());
  EXPECT_THROW(sess.run_step_fn([](th::StepContext&) {}), th::RuntimeError);
}

TEST(MonitoredSessionTest, CloseIsIdempotentAndRunsEndOnce) {
  Model m;
  std::vector<std::string> calls;
  auto a = std::make_shared<RecordingHook>("a", &calls);
  th::MonitoredSession sess(chief(m.g), {a});
  sess.close();
  sess.close();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "a.end"), 1);
  EXPECT_TRUE(sess.closed());
  EXPECT_TRUE(sess.should_stop());
  EXPECT_EQ(th::testing::error_message([&] { sess.run(m.loss, m.feeds()); }),
            "Attempted to use a closed MonitoredSession.");
}

TEST(MonitoredSessionTest, EndIsSkippedWhileAnExceptionUnwinds) {
  Model m;
  std::vector<std::string> calls;
  auto a = std::make_shared<RecordingHook>("a", &calls);
  try {
    th::MonitoredSession sess(chief(m.g), {a});
    sess.run(m.loss);  // x not fed
  } catch (const th::InvalidArgument&) {
  }
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "a.end"), 0);
}

// A hook whose state, the number of runs it saw, checkpoints carry.
struct CountingHook : th::SessionRunHook, th::StateProvider {
  std::string key;
  int64_t runs = 0;
  explicit CountingHook(std::string k = "hooks/counting") : key(std::move(k)) {}
  th::StateProvider* state() override { return this; }
  std::string state_key() const override { return key; }
  std::string save_state() const override { return std::to_string(runs); }
  void load_state(std::string_view bytes) override { runs = std::stoll(std::string(bytes)); }
  void after_run(th::SessionRunContext&, const th::SessionRunValues&) override { ++runs; }
};

std::vector<std::string> state_keys(const th::Graph& g) {
  std::vector<std::string> keys;
  for (const auto& [key, provider] : g.state_providers()) keys.push_back(key);
  return keys;
}

TEST(MonitoredSessionTest, HookStateIsRegisteredWhileTheSessionIsOpen) {
  Model m;
  auto hook = std::make_shared<CountingHook>();
  th::MonitoredSession sess(chief(m.g), {hook});
  auto providers = m.g.state_providers();
  ASSERT_EQ(providers.size(), 1u);
  EXPECT_EQ(providers[0].first, "hooks/counting");
  EXPECT_EQ(providers[0].second, hook.get());
  sess.close();
  EXPECT_TRUE(state_keys(m.g).empty());
}

TEST(MonitoredSessionTest, AHookWithStateServesConsecutiveSessionsOnOneGraphOrAnother) {
  Model m, other;
  auto hook = std::make_shared<CountingHook>();
  for (th::Graph* g : {&m.g, &m.g, &other.g}) {
    th::MonitoredSession sess(chief(*g), {hook});
    EXPECT_EQ(state_keys(*g), std::vector<std::string>{"hooks/counting"});
  }
  EXPECT_TRUE(state_keys(m.g).empty());
  EXPECT_TRUE(state_keys(other.g).empty());
}

TEST(MonitoredSessionTest, ASessionDestroyedWhileAnExceptionUnwindsLeavesNoHookState) {
  Model m;
  auto hook = std::make_shared<CountingHook>();
  try {
    th::MonitoredSession sess(chief(m.g), {hook});
    sess.run(m.loss);  // x not fed
  } catch (const th::InvalidArgument&) {
  }
  EXPECT_TRUE(state_keys(m.g).empty());
  th::MonitoredSession again(chief(m.g), {hook});  // no AlreadyExistsError
}

TEST(MonitoredSessionTest, ASessionThatFailsToStartLeavesNoHookState) {
  Model m;
  auto hook = std::make_shared<CountingHook>();
  struct FailingCreation : th::SessionRunHook {
    void after_create_session(th::Session&, th::Coordinator&) override {
      throw th::InvalidArgument("cannot start");
    }
  };
  EXPECT_THROW(th::MonitoredSession(chief(m.g), {hook, std::make_shared<FailingCreation>()}),
               th::InvalidArgument);
  EXPECT_TRUE(state_keys(m.g).empty());

  // Two hooks under one key: the second cannot register, and the first is unregistered again.
  EXPECT_EQ(th::testing::error_message<th::AlreadyExistsError>([&] {
              th::MonitoredSession s(chief(m.g), {hook, std::make_shared<CountingHook>()});
            }),
            "MonitoredSession: hooks[1]: register_state: state 'hooks/counting' is already "
            "registered");
  EXPECT_TRUE(state_keys(m.g).empty());
}

TEST(MonitoredSessionTest, HookStateNeedsAKey) {
  Model m;
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [&] { th::MonitoredSession s(chief(m.g), {std::make_shared<CountingHook>("")}); }),
            "MonitoredSession: hooks[0] declares a state() with an empty state_key()");
  EXPECT_TRUE(state_keys(m.g).empty());
}

TEST(MonitoredSessionTest, AbortedRunRecreatesTheSessionAndRetries) {
  th::testing::FakeEnv fake;
  th::Graph g;
  int attempts = 0;
  auto flaky = g.op("flaky", [&](th::Run&) {
    if (++attempts == 1) throw th::AbortedError("worker 1 was preempted");
    return torch::ones({1});
  });
  std::vector<std::string> calls;
  auto a = std::make_shared<RecordingHook>("a", &calls);
  th::MonitoredSession sess(chief(g, fake.env()), {a}, {.env = fake.env()});
  auto r = sess.run(flaky);
  EXPECT_FLOAT_EQ(r[flaky].item<float>(), 1.0f);
  EXPECT_EQ(attempts, 2);
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "a.after_create_session"), 2);
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "a.before_run"), 2);
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "a.after_run"), 1);
  EXPECT_EQ(fake.log->messages(th::LogLevel::kInfo),
            (std::vector<std::string>{"An error was raised. This may be due to a preemption in a "
                                      "connected worker or parameter server. "
                                      "The current session will be closed and a new session will "
                                      "be created. Error: worker 1 was "
                                      "preempted [while evaluating flaky]"}));
}

TEST(MonitoredSessionTest, UnavailableIsRecoveredAndOtherErrorsPropagate) {
  th::Graph g;
  int attempts = 0;
  auto flaky = g.op("flaky", [&](th::Run&) {
    if (++attempts == 1) throw th::UnavailableError("connection reset");
    return torch::ones({1});
  });
  auto broken = g.op("broken", [](th::Run&) -> torch::Tensor { throw th::InternalError("bug"); });
  th::testing::FakeEnv fake;
  th::MonitoredSession sess(chief(g, fake.env()), {}, {.env = fake.env()});
  EXPECT_NO_THROW(sess.run(flaky));
  EXPECT_THROW(sess.run(broken), th::InternalError);
}

TEST(MonitoredSessionTest, RegularExceptionReportedToCoordPassThroughRun) {
  Model m;
  th::testing::FakeEnv fake;
  th::MonitoredSession sess(chief(m.g, fake.env()), {}, {.env = fake.env()});
  sess.run(m.train, m.feeds());
  EXPECT_EQ(m.g.global_step_value(), 1);
  sess.coordinator().request_stop(
      std::make_exception_ptr(th::RuntimeError("a thread wants to stop")));
  // The run performs normally; the error is raised when the session is closed.
  sess.run(m.train, m.feeds());
  EXPECT_EQ(m.g.global_step_value(), 2);
  EXPECT_EQ(th::testing::error_message<th::RuntimeError>([&] { sess.close(); }),
            "a thread wants to stop");
}

TEST(MonitoredSessionTest, RegularExceptionReportedToCoordPassThroughReturn) {
  Model m;
  th::testing::FakeEnv fake;
  {
    th::MonitoredSession sess(chief(m.g, fake.env()), {}, {.env = fake.env()});
    sess.run(m.train, m.feeds());
    sess.coordinator().request_stop(
        std::make_exception_ptr(th::RuntimeError("a thread wants to stop")));
    EXPECT_TRUE(sess.should_stop());  // true, not raised
    EXPECT_TRUE(sess.should_stop());
  }  // leaving the scope closes the session: the destructor cannot raise, it logs the error
  EXPECT_EQ(fake.log->messages(th::LogLevel::kError),
            std::vector<std::string>{
                "Error while closing the monitored session: a thread wants to stop"});
}

TEST(MonitoredSessionTest, ShouldStopTrueAfterCoordinatorError) {
  Model m;
  th::MonitoredSession sess(chief(m.g), {}, {.stop_grace_period_secs = 5});
  sess.coordinator().start_thread("failing", [] { throw th::DataLossError("disk gone"); });
  sess.coordinator().wait_for_stop(10);
  EXPECT_TRUE(sess.should_stop());
  EXPECT_EQ(th::testing::error_message<th::DataLossError>([&] { sess.close(); }), "disk gone");
  EXPECT_TRUE(sess.should_stop());
}

// TF's hooks see the global step before the train op's increment in before_run and in the values
// they fetch (StepCounterHook's stale_global_step; LoggingTensorHook logs step = 0 first), and
// after it once the run is done (guide.md, "The global step around a run").
TEST(MonitoredSessionTest, HooksSeeTheGlobalStepBeforeTheIncrementAndAfterTheRun) {
  Model m;
  struct StepHook : th::SessionRunHook {
    th::Node gs;
    std::vector<int64_t> before, fetched, after;
    explicit StepHook(th::Node g) : gs(g) {}
    th::SessionRunArgs before_run(th::SessionRunContext& ctx) override {
      before.push_back(ctx.session().global_step());
      return {{gs}};
    }
    void after_run(th::SessionRunContext& ctx, const th::SessionRunValues& v) override {
      fetched.push_back(v.results[gs].item<int64_t>());
      after.push_back(ctx.session().global_step());
    }
  };
  auto hook = std::make_shared<StepHook>(m.g.global_step());
  th::MonitoredSession sess(chief(m.g), {hook});
  auto r = sess.run({m.train, m.g.global_step()}, m.feeds());
  EXPECT_EQ(r[m.g.global_step()].item<int64_t>(), 0);  // the caller's fetch: the same rule
  sess.run(m.train, m.feeds());
  EXPECT_EQ(hook->before, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(hook->fetched, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(hook->after, (std::vector<int64_t>{1, 2}));
  // A run of the raw session after the step reads the new value.
  EXPECT_EQ(sess.raw_session().run(m.g.global_step())[m.g.global_step()].item<int64_t>(), 2);
}

TEST(MonitoredSessionTest, NullHookAndCreatorAreRejected) {
  Model m;
  EXPECT_EQ(th::testing::error_message([&] { th::MonitoredSession s(chief(m.g), {nullptr}); }),
            "MonitoredSession: hooks[0] is null");
  EXPECT_THROW(th::MonitoredSession(nullptr), th::InvalidArgument);
}

TEST(SingularMonitoredSessionTest, RawSessionRunsWithoutHooks) {
  Model m;
  std::vector<std::string> calls;
  auto a = std::make_shared<RecordingHook>("a", &calls);
  th::SingularMonitoredSession sess(m.g, {a});
  calls.clear();
  sess.raw_session().run(m.train, m.feeds());
  EXPECT_TRUE(calls.empty());
  EXPECT_EQ(m.g.global_step_value(), 1);
}

TEST(MonitoredTrainingSessionTest, ChiefAddsTheStepCounterWithTfLogLine) {
  th::testing::FakeEnv fake;
  Model m;
  th::MonitoredTrainingSession sess(m.g,
                                    {.summaries = {.log_step_count_steps = 10}, .env = fake.env()});
  ASSERT_EQ(sess.hooks().size(), 2u);  // PreemptionHook, StepCounterHook
  for (int i = 0; i < 21; ++i) {
    fake.clock->advance(0.5);
    sess.run(m.train, m.feeds());
  }
  // Baseline at step 1, then every 10 steps: 10 steps in 5 fake seconds.
  EXPECT_EQ(fake.log->messages(th::LogLevel::kInfo),
            (std::vector<std::string>{"global_step/sec: 2", "global_step/sec: 2"}));
}

TEST(MonitoredTrainingSessionTest, HookOrderIsPreemptionChiefOnlyThenDefaultsThenUserHooks) {
  Model m;
  std::vector<std::string> calls;
  auto user = std::make_shared<RecordingHook>("user", &calls);
  auto chief_only = std::make_shared<RecordingHook>("chief", &calls);
  th::MonitoredTrainingSession sess(m.g, {.hooks = {user}, .chief_only_hooks = {chief_only}});
  ASSERT_EQ(sess.hooks().size(), 4u);
  EXPECT_NE(std::dynamic_pointer_cast<th::PreemptionHook>(sess.hooks()[0]), nullptr);
  EXPECT_EQ(sess.hooks()[1], chief_only);
  EXPECT_NE(std::dynamic_pointer_cast<th::StepCounterHook>(sess.hooks()[2]), nullptr);
  EXPECT_EQ(sess.hooks()[3], user);
}

TEST(MonitoredTrainingSessionTest, WorkerRunsOnlyThePreemptionHookAndUserHooks) {
  Model m;
  std::vector<std::string> calls;
  auto user = std::make_shared<RecordingHook>("user", &calls);
  auto chief_only = std::make_shared<RecordingHook>("chief", &calls);
  th::MonitoredTrainingSession sess(
      m.g, {.is_chief = false, .hooks = {user}, .chief_only_hooks = {chief_only}});
  ASSERT_EQ(sess.hooks().size(), 2u);
  EXPECT_NE(std::dynamic_pointer_cast<th::PreemptionHook>(sess.hooks()[0]), nullptr);
  EXPECT_EQ(sess.hooks()[1], user);
}

TEST(MonitoredTrainingSessionTest, PreemptionHandlingCanBeTurnedOff) {
  Model m;
  th::MonitoredTrainingSession sess(m.g, {.is_chief = false, .handle_preemption_signals = false});
  EXPECT_TRUE(sess.hooks().empty());
}

TEST(MonitoredTrainingSessionTest, StopAtStepHookEndsTheSeedLoop) {
  Model m;
  auto stop = std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.num_steps = 7});
  th::MonitoredTrainingSession sess(m.g,
                                    {.hooks = {stop}, .summaries = {.log_step_count_steps = 0}});
  int runs = 0;
  while (!sess.should_stop()) {
    sess.run(m.train, m.feeds());
    ++runs;
  }
  EXPECT_EQ(runs, 7);
  EXPECT_EQ(m.g.global_step_value(), 7);
}

TEST(MonitoredTrainingSessionTest, OptionErrorsAreClear) {
  Model m;
  EXPECT_EQ(th::testing::error_message([&] {
              th::MonitoredTrainingSession s(m.g,
                                             {.checkpoints = {.save_secs = 10, .save_steps = 10}});
            }),
            "Can not provide both save_checkpoint_secs and save_checkpoint_steps.");
  EXPECT_EQ(th::testing::error_message([&] {
              th::MonitoredTrainingSession s(m.g,
                                             {.summaries = {.save_steps = 10, .save_secs = 10}});
            }),
            "Can not provide both save_summaries_secs and save_summaries_steps.");
  EXPECT_EQ(th::testing::error_message([&] {
              th::MonitoredTrainingSession s(m.g, {.summaries = {.log_step_count_steps = -1}});
            }),
            "Invalid summaries.log_step_count_steps: -1");
  EXPECT_EQ(th::testing::error_message(
                [&] { th::MonitoredTrainingSession s(m.g, {.checkpoints = {.save_steps = 10}}); }),
            "MonitoredTrainingSession: checkpoint options were given without checkpoint_dir");
  EXPECT_FALSE(m.g.finalized());  // nothing was built
}

TEST(MonitoredTrainingSessionTest, ChiefSavesAndARestartContinuesFromTheLatestCheckpoint) {
  th::testing::TempDir dir;
  th::testing::FakeEnv fake;
  std::vector<float> w_after;
  {
    Model m;
    auto stop = std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.last_step = 5});
    th::MonitoredTrainingSession sess(m.g, {.checkpoint_dir = dir.path(),
                                            .hooks = {stop},
                                            .checkpoints = {.save_steps = 2},
                                            .summaries = {.log_step_count_steps = 0},
                                            .env = fake.env()});
    while (!sess.should_stop()) sess.run(m.train, m.feeds());
    sess.close();
    w_after.push_back(m.g.variable_value(m.w).item<float>());
  }
  // Saved at creation (0), every 2 steps, and at the end (5).
  for (int step : {0, 2, 4, 5})
    EXPECT_TRUE(th::Saver::checkpoint_exists(dir.file("model.ckpt-" + std::to_string(step))))
        << step;
  EXPECT_EQ(th::latest_checkpoint(dir.path()), dir.file("model.ckpt-5"));
  auto saves = fake.log->messages(th::LogLevel::kInfo);
  EXPECT_NE(std::find(saves.begin(), saves.end(),
                      "Saving checkpoints for 5 into " + dir.file("model.ckpt") + "."),
            saves.end());
  {
    Model m;  // a new process: fresh graph, same checkpoint_dir
    auto stop = std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.num_steps = 3});
    th::MonitoredTrainingSession sess(m.g, {.checkpoint_dir = dir.path(),
                                            .hooks = {stop},
                                            .checkpoints = {.save_steps = 2},
                                            .summaries = {.log_step_count_steps = 0},
                                            .env = fake.env()});
    EXPECT_EQ(m.g.global_step_value(), 5);
    EXPECT_EQ(m.g.variable_value(m.w).item<float>(), w_after[0]);
    int runs = 0;
    while (!sess.should_stop()) {
      sess.run(m.train, m.feeds());
      ++runs;
    }
    EXPECT_EQ(runs, 3);
    EXPECT_EQ(m.g.global_step_value(), 8);
  }
  EXPECT_EQ(th::latest_checkpoint(dir.path()), dir.file("model.ckpt-8"));
  // TensorBoard learns of every save through SessionLog CHECKPOINT in the checkpoint directory.
  th::summary::EventWriter::for_logdir(dir.path())->flush();
  std::vector<int64_t> checkpoint_steps;
  for (const auto& e : th::summary::read_events(dir.path()))
    if (e.session_log && e.session_log->status == th::summary::SessionStatus::kCheckpoint)
      checkpoint_steps.push_back(e.step);
  // The restart does not rewrite checkpoint 5, which it restored from.
  EXPECT_EQ(checkpoint_steps, (std::vector<int64_t>{0, 2, 4, 5, 7, 8}));
}

TEST(MonitoredTrainingSessionTest, HookStateIsSavedInCheckpointsAndRestoredOnRestart) {
  th::testing::TempDir dir;
  th::testing::FakeEnv fake;
  auto hook = std::make_shared<CountingHook>();
  const th::MonitoredTrainingSessionOptions options{.checkpoint_dir = dir.path(),
                                                    .hooks = {hook},
                                                    .checkpoints = {.save_steps = 100},
                                                    .summaries = {.log_step_count_steps = 0},
                                                    .env = fake.env()};
  {
    Model m;
    th::MonitoredTrainingSession sess(m.g, options);
    for (int i = 0; i < 3; ++i) sess.run(m.train, m.feeds());
  }  // the final checkpoint, at step 3, is saved in end()
  EXPECT_EQ(hook->runs, 3);
  {
    Model m;  // a new process: fresh graph and hook
    auto fresh = std::make_shared<CountingHook>();
    auto restarted = options;
    restarted.hooks = {fresh};
    th::MonitoredTrainingSession sess(m.g, restarted);
    EXPECT_EQ(m.g.global_step_value(), 3);
    EXPECT_EQ(fresh->runs, 3);
    sess.run(m.train, m.feeds());
  }
  {
    Model m;  // the first hook object again, in a third session
    th::MonitoredTrainingSession sess(m.g, options);
    EXPECT_EQ(m.g.global_step_value(), 4);
    EXPECT_EQ(hook->runs, 4);
  }
}

TEST(MonitoredTrainingSessionTest, CheckpointOptionsNeedACheckpointDir) {
  Model m;
  EXPECT_EQ(th::testing::error_message([&] {
              th::MonitoredTrainingSession s(m.g, {.checkpoints = {.manager = {.max_to_keep = 3}}});
            }),
            "MonitoredTrainingSession: checkpoint options were given without checkpoint_dir");
}

}  // namespace monitored_session_test
