// Shared test helpers: a fake Env and small graphs.
#pragma once

#include <memory>

#include "trainhooks/env.h"

namespace trainhooks::testing {

struct FakeEnv {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::shared_ptr<FakeSleeper> sleeper = std::make_shared<FakeSleeper>(clock);
  std::shared_ptr<CapturingLogSink> log = std::make_shared<CapturingLogSink>();
  Env env() const { return Env{clock, sleeper, log}; }
};

}  // namespace trainhooks::testing
