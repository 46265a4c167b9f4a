// Runs the seed example end to end and checks what it prints and saves.
#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/zeros.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/checkpoint/variables.h"
#include "trainhooks/graph.h"
#include "trainhooks/summary/event_reader.h"

namespace th = trainhooks;
namespace fs = std::filesystem;

namespace seed_linear_regression_test {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout only
};

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string shell_quoted(const std::string& s) { return "'" + s + "'"; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class SeedLinearRegressionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string pattern =
        (fs::path(::testing::TempDir()) / "seed_linear_regression_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    model_ = (fs::path(dir_) / "model.pt").string();
    const std::string binary = TRAINHOOKS_BINARY_DIR "/examples/seed_linear_regression";
    ASSERT_TRUE(fs::exists(binary)) << binary << " is not built";
    // The training log (stderr) goes to a file: only the program's own output is checked.
    result_ = run_command(shell_quoted(binary) + " --model " + shell_quoted(model_) + " --logdir " +
                          shell_quoted((fs::path(dir_) / "logs").string()) + " 2> " +
                          shell_quoted((fs::path(dir_) / "stderr.txt").string()));
  }

  static void TearDownTestSuite() {
    std::error_code ignored;
    if (!dir_.empty()) fs::remove_all(dir_, ignored);
    dir_.clear();
    result_.reset();
  }

  void SetUp() override {
    ASSERT_TRUE(result_.has_value());
    ASSERT_EQ(result_->exit_code, 0) << "output:\n" << result_->out;
  }

  static std::vector<float> losses() {
    std::vector<float> out;
    for (const auto& line : lines_of(result_->out)) {
      float value;
      if (std::sscanf(line.c_str(), "Loss value: %f", &value) == 1) out.push_back(value);
    }
    return out;
  }

  static inline std::string dir_;
  static inline std::string model_;
  static inline std::optional<CommandResult> result_;
};

TEST_F(SeedLinearRegressionTest, PrintsOneLossLinePerStep) { EXPECT_EQ(losses().size(), 100u); }

TEST_F(SeedLinearRegressionTest, LossFallsMoreThanTenfold) {
  auto l = losses();
  ASSERT_FALSE(l.empty());
  EXPECT_GT(l.front(), 10 * l.back()) << "first " << l.front() << ", last " << l.back();
}

TEST_F(SeedLinearRegressionTest, LearnsWAndBOfTheLine) {
  float W = NAN, b = NAN;
  long long step = -1;
  int found = 0;
  for (const auto& line : lines_of(result_->out)) {
    if (std::sscanf(line.c_str(), "W = %f, b = %f, global_step = %lld", &W, &b, &step) == 3)
      ++found;
  }
  ASSERT_EQ(found, 1) << result_->out;
  EXPECT_NEAR(W, 3.0f, 0.1f);
  EXPECT_NEAR(b, 1.0f, 0.1f);
  EXPECT_EQ(step, 100);
  EXPECT_TRUE(lines_of(result_->out).back().starts_with("W = "));
}

TEST_F(SeedLinearRegressionTest, SavesTheModelExactlyOnceInEnd) {
  int saved = 0;
  for (const auto& line : lines_of(result_->out)) {
    if (line.find("Saved the model to") != std::string::npos) {
      ++saved;
      EXPECT_EQ(line, "Saved the model to " + model_);
    }
  }
  EXPECT_EQ(saved, 1);
  EXPECT_TRUE(fs::exists(model_));
  // Written by a Saver: the training state beside the variables, and the state file naming it.
  EXPECT_TRUE(fs::exists(model_ + ".trainstate"));
  EXPECT_EQ(th::latest_checkpoint(dir_), model_);
}

TEST_F(SeedLinearRegressionTest, StartsAtGlobalStepZeroWithoutACheckpointDir) {
  EXPECT_EQ(lines_of(result_->out).front(), "Starting at global step 0");
}

TEST_F(SeedLinearRegressionTest, SavedModelLoadsBackIntoAGraph) {
  th::Graph g;
  auto W = g.variable("W", at::zeros({1}));
  auto b = g.variable("b", at::zeros({1}));
  th::load_variables(g, model_);
  EXPECT_EQ(g.variable_value(W).sizes(), at::IntArrayRef({1}));
  EXPECT_EQ(g.variable_value(b).sizes(), at::IntArrayRef({1}));
  EXPECT_NEAR(g.variable_value(W).item<float>(), 3.0f, 0.1f);
  EXPECT_NEAR(g.variable_value(b).item<float>(), 1.0f, 0.1f);
}

TEST_F(SeedLinearRegressionTest, SavedModelLoadsInPythonWithTorchLoad) {
  const std::string python = "/usr/bin/python3";
  if (!fs::exists(python) ||
      run_command(python + " -c 'import torch' 2>/dev/null").exit_code != 0) {
    GTEST_SKIP() << "python3 with torch is not available; skipping the Python interop check";
  }
  const std::string script =
      "import torch; d=torch.load(" + shell_quoted(model_) + "); print(sorted(d), d['W'].shape)";
  // The script is wrapped in double quotes for the shell; the path is single-quoted inside it.
  auto r = run_command(python + " -c \"" + script + "\"");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "['W', 'b'] torch.Size([1])\n");
}

TEST_F(SeedLinearRegressionTest, WritesSummariesEveryTenStepsAndLogsStepsPerSecond) {
  std::map<std::string, std::vector<int64_t>> steps;
  float last_loss = -1;
  for (const auto& e : th::summary::read_events(fs::path(dir_) / "logs")) {
    for (const auto& v : e.values) {
      steps[v.tag].push_back(e.step);
      if (v.tag == "loss") last_loss = static_cast<float>(v.scalar);
    }
  }
  const std::vector<int64_t> every_ten{1, 11, 21, 31, 41, 51, 61, 71, 81, 91};
  EXPECT_EQ(steps["loss"], every_ten);
  EXPECT_EQ(steps["W"], every_ten);
  EXPECT_EQ(steps["b"], every_ten);
  EXPECT_EQ(steps["global_step/sec"], (std::vector<int64_t>{11, 21, 31, 41, 51, 61, 71, 81, 91}));
  // The loss written at step 91 is the one printed by the hook on that step.
  ASSERT_GE(losses().size(), 91u);
  EXPECT_FLOAT_EQ(last_loss, losses()[90]);
  std::ifstream err(fs::path(dir_) / "stderr.txt");
  std::string text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  size_t count = 0;
  for (size_t at = text.find("INFO:trainhooks:global_step/sec: "); at != std::string::npos;
       at = text.find("INFO:trainhooks:global_step/sec: ", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 9u);
}

// stdout is line-buffered into a pipe: with stderr in the same pipe, each `Loss value:` line comes
// out where it was printed among the log lines (the 10th step's before the global_step/sec line
// the 11th step logs, the 11th's after it), not in one block at the exit.
TEST(SeedLinearRegressionOutputTest, LossLinesAndLogLinesComeOutInOrderIntoAPipe) {
  std::string pattern = (fs::path(::testing::TempDir()) / "seed_order_XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  const fs::path dir = pattern;
  const std::string binary = TRAINHOOKS_BINARY_DIR "/examples/seed_linear_regression";
  auto r = run_command(shell_quoted(binary) + " --steps 21 --model " +
                       shell_quoted((dir / "model.pt").string()) + " --logdir " +
                       shell_quoted((dir / "logs").string()) + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::vector<int> losses_before_each_rate;
  int losses = 0;
  for (const auto& line : lines_of(r.out)) {
    if (line.starts_with("Loss value: ")) ++losses;
    if (line.starts_with("INFO:trainhooks:global_step/sec: "))
      losses_before_each_rate.push_back(losses);
  }
  EXPECT_EQ(losses, 21);
  EXPECT_EQ(losses_before_each_rate, (std::vector<int>{10, 20})) << r.out;
  EXPECT_EQ(lines_of(r.out).front(), "Starting at global step 0") << r.out;
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

// A second run with the same checkpoint directory resumes where the first stopped, and ends with
// the same bits as one uninterrupted run of the same total length.
TEST(SeedLinearRegressionResumeTest, ASecondRunResumesFromTheFirstRunsCheckpoint) {
  std::string pattern = (fs::path(::testing::TempDir()) / "seed_resume_XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  const fs::path dir = pattern;
  const std::string binary = TRAINHOOKS_BINARY_DIR "/examples/seed_linear_regression";
  auto run = [&](const std::string& name, int steps, const std::string& ckpt) {
    return run_command(shell_quoted(binary) + " --steps " + std::to_string(steps) + " --model " +
                       shell_quoted((dir / name).string()) + " --checkpoint_dir " +
                       shell_quoted((dir / ckpt).string()) + " --save_steps 20 2> " +
                       shell_quoted((dir / (name + ".stderr")).string()));
  };
  auto first = run("first.pt", 30, "ckpt");
  ASSERT_EQ(first.exit_code, 0) << first.out;
  auto second = run("second.pt", 20, "ckpt");
  ASSERT_EQ(second.exit_code, 0) << second.out;
  auto straight = run("straight.pt", 50, "straight_ckpt");
  ASSERT_EQ(straight.exit_code, 0) << straight.out;

  EXPECT_EQ(lines_of(first.out).front(), "Starting at global step 0");
  EXPECT_EQ(lines_of(second.out).front(), "Starting at global step 30");
  EXPECT_THAT(lines_of(second.out).back(), ::testing::EndsWith(", global_step = 50"));
  std::ifstream err(dir / "second.pt.stderr");
  std::string text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, ::testing::HasSubstr("INFO:trainhooks:Restoring parameters from " +
                                         (dir / "ckpt/model.ckpt-30").string() + "\n"));
  // The first run saves at creation, at 20 and at its end (30); the second, which does not
  // rewrite 30, saves 20 steps after it (50).
  EXPECT_EQ(th::latest_checkpoint((dir / "ckpt").string()), (dir / "ckpt/model.ckpt-50").string());
  for (int step : {0, 20, 30, 50})
    EXPECT_TRUE(
        th::Saver::checkpoint_exists((dir / ("ckpt/model.ckpt-" + std::to_string(step))).string()))
        << step;

  th::Graph a, b;
  auto Wa = a.variable("W", at::zeros({1})), ba = a.variable("b", at::zeros({1}));
  auto Wb = b.variable("W", at::zeros({1})), bb = b.variable("b", at::zeros({1}));
  th::load_variables(a, (dir / "second.pt").string());
  th::load_variables(b, (dir / "straight.pt").string());
  EXPECT_TRUE(at::equal(a.variable_value(Wa), b.variable_value(Wb)));
  EXPECT_TRUE(at::equal(a.variable_value(ba), b.variable_value(bb)));
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

}  // namespace seed_linear_regression_test
