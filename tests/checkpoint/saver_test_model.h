// The fixture of the Saver, training-state and CheckpointManager tests: a model with every kind
// of checkpointed state (a module trained by Adam, a shuffled endless input, a registered
// StateProvider), a fake Env, a temporary directory and small file helpers.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_test_model.h"
#include "test_util.h"
#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/checkpoint/tf1_saver.h"
#include "trainhooks/env.h"
#include "trainhooks/graph.h"
#include "trainhooks/input.h"
#include "trainhooks/optimizers.h"
#include "trainhooks/session.h"

namespace torch::nn {
class Module;
}

namespace trainhooks::testing::saver_fixture {

namespace th = trainhooks;
using V1Saver = th::compat::v1::Saver;

// The names these tests have always used for checkpoint_test_model.h's helpers.
inline std::string read_bytes(const std::string& path) { return read_file_bytes(path); }
inline void write_bytes(const std::string& path, const std::string& bytes) {
  write_file_bytes(path, bytes);
}

struct Counter : th::StateProvider {
  int value = 0;
  std::string save_state() const override { return std::to_string(value); }
  void load_state(std::string_view bytes) override { value = std::stoi(std::string(bytes)); }
};

// A module, an Adam train op, a shuffled endless input and a registered counter.
struct Model {
  // In saver_test_model.cpp, so that the tests including this header do not parse LibTorch's nn
  // modules.
  explicit Model(int64_t seed = 1, th::OptimizerFactory optimizer = th::adam(0.05));
  void steps(th::Session& s, int n) {
    for (int i = 0; i < n; ++i) s.run({train});
  }
  std::vector<at::Tensor> values() const;

  th::Graph g;
  std::shared_ptr<torch::nn::Module> net;  // a Linear(3, 2)
  th::InputNodes batch;
  th::Node loss, train;
  Counter counter;
};

inline void expect_same(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i], b[i])) << "variable " << i;
}

template <typename E, typename Fn>
std::string message_of(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "<no exception>";
}

class SaverTest : public ::testing::Test {
 protected:
  // TensorFlow 1's Saver (most of these tests are TF's SaverTest) and the one-path Saver.
  th::compat::v1::SaverOptions options(int max_to_keep = 5) {
    return {.max_to_keep = max_to_keep, .env = fe.env()};
  }
  th::SaverOptions saver_options() { return {.env = fe.env()}; }
  std::vector<std::string> warnings() const { return fe.log->messages(th::LogLevel::kWarning); }

  th::testing::FakeEnv fe;
  th::testing::TempDir dir;
};

}  // namespace trainhooks::testing::saver_fixture
