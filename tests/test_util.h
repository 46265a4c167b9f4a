// Shared test helpers: a fake Env and small graphs.
#pragma once

#include <exception>
#include <memory>
#include <string>

#include "trainhooks/env.h"
#include "trainhooks/testing/fake_env.h"

namespace trainhooks::testing {

struct FakeEnv {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::shared_ptr<FakeSleeper> sleeper = std::make_shared<FakeSleeper>(clock);
  std::shared_ptr<CapturingLogSink> log = std::make_shared<CapturingLogSink>();
  Env env() const { return Env{clock, sleeper, log}; }
};

}  // namespace trainhooks::testing

// ---- A tiny trainable model and a monitored session over it ----------------------------------

#include "trainhooks/graph.h"
#include "trainhooks/monitored_session.h"

namespace trainhooks::testing {

// loss = (w * x - 2)^2 with `w` a float scalar variable starting at 0 and `x` a float scalar
// placeholder; `train` is minimize(loss, sgd(0.1)), which creates and increments the global step.
// Nodes may still be added to `g` until a session finalizes it.
struct TinyModel {
  TinyModel();
  Graph g;
  Node x, w, loss, train;
  // {{x, value}}.
  Feeds feed(float value = 1.0f) const;
};

// A MonitoredSession whose creator (ChiefSessionCreator, or WorkerSessionCreator, which keeps the
// graph's state) and the session itself use `env`.
std::unique_ptr<MonitoredSession> chief_session(Graph& g, Hooks hooks, const Env& env);
std::unique_ptr<MonitoredSession> worker_session(Graph& g, Hooks hooks, const Env& env);

}  // namespace trainhooks::testing

namespace trainhooks::testing {

// The message of the E that `fn` throws, or "" when it throws nothing (another exception
// escapes and fails the test).
template <typename E = std::exception, typename Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

// A fresh directory under the system temp dir, removed with its contents at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Runs `command` with /bin/sh and returns what it printed on stdout; its wait status goes to
// `status`.
std::string run_command(const std::string& command, int& status);

// A loopback TCP port that nothing listened on a moment ago (bound to port 0, read, closed).
int free_port();

}  // namespace trainhooks::testing
