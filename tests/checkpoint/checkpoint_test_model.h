// A small model with every kind of checkpointed state, and a directory with two of its
// checkpoints, for the CheckpointReader and `trainhooks checkpoint` tests.
#pragma once

#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include "test_util.h"
#include "trainhooks/checkpoint/tf1_saver.h"
#include "trainhooks/graph.h"
#include "trainhooks/input.h"
#include "trainhooks/optimizers.h"
#include "trainhooks/session.h"

namespace trainhooks::testing {

// Variables net/weight [2, 3] and net/bias [2] (float, trained by Adam), scale [1] (int64, not
// trained); an input `data` of 12 examples in batches of 3; a StateProvider `test/counter`.
struct CheckpointTestModel {
  struct Counter : StateProvider {
    int value = 7;
    std::string save_state() const override { return std::to_string(value); }
    void load_state(std::string_view bytes) override { value = std::stoi(std::string(bytes)); }
  };

  // In checkpoint_test_model.cpp, so that the tests including this header parse only
  // <ATen/core/Tensor.h> of ATen.
  CheckpointTestModel();
  void steps(Session& s, int n) {
    for (int i = 0; i < n; ++i) s.run({train});
  }

  Graph g;
  Node train;
  Counter counter;
};

// `dir` holds model.ckpt-0 (written at wall time 1e9) and model.ckpt-2 (two steps and 10.5 s
// later), both listed in its state file.
class CheckpointTestDir : public ::testing::Test {
 protected:
  void SetUp() override {
    CheckpointTestModel m;
    Session s(m.g);
    compat::v1::Saver saver(m.g, {.env = fe.env()});
    saver.save(s, dir.file("model.ckpt"), 0);
    fe.clock->advance(10.5);
    m.steps(s, 2);
    saver.save(s, dir.file("model.ckpt"), m.g.global_step_value());
  }

  FakeEnv fe;
  TempDir dir;
};

inline std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_file_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Inverts the bits of the byte at `offset`.
inline void flip_byte(const std::string& path, size_t offset) {
  std::string bytes = read_file_bytes(path);
  bytes.at(offset) = static_cast<char>(~bytes.at(offset));
  write_file_bytes(path, bytes);
}

}  // namespace trainhooks::testing
