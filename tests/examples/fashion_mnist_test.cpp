// Runs the Fashion-MNIST example end to end on a tiny IDX dataset written here: what it prints,
// its flags' errors, its summaries, and that a run interrupted by SIGINT and run again continues
// the same schedule: the learning rate, the global step sequence, the losses and the final
// variables equal an uninterrupted run's.
#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/child_process.h"
#include "test_util.h"
#include "trainhooks/checkpoint/checkpoint_reader.h"
#include "trainhooks/checkpoint/checkpoint_state.h"
#include "trainhooks/summary/event_reader.h"

namespace th = trainhooks;
namespace fs = std::filesystem;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

namespace fashion_mnist_test {

const std::string kExample = TRAINHOOKS_BINARY_DIR "/examples/fashion_mnist";

void put_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

// A gzip IDX file of unsigned bytes with dimensions `dims`.
void write_idx_gz(const std::string& path, const std::vector<uint32_t>& dims,
                  const std::vector<uint8_t>& data) {
  std::string bytes;
  put_u32(bytes, 0x00000800u | static_cast<uint32_t>(dims.size()));
  for (uint32_t d : dims) put_u32(bytes, d);
  bytes.append(data.begin(), data.end());
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

// Fashion-MNIST's four files with `train` and `test` random 28x28 images whose label is
// recognisable (the mean brightness), so a few hundred steps learn something.
void write_dataset(const std::string& dir, uint32_t train, uint32_t test) {
  fs::create_directories(dir);
  uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  for (auto [prefix, n] : {std::pair<std::string, uint32_t>{"train", train}, {"t10k", test}}) {
    std::vector<uint8_t> images(static_cast<size_t>(n) * 28 * 28), labels(n);
    for (uint32_t i = 0; i < n; ++i) {
      labels[i] = static_cast<uint8_t>(next() % 10);
      for (size_t p = 0; p < 28 * 28; ++p)
        images[i * 28 * 28 + p] = static_cast<uint8_t>(labels[i] * 20 + next() % 60);
    }
    write_idx_gz(dir + "/" + prefix + "-images-idx3-ubyte.gz", {n, 28, 28}, images);
    write_idx_gz(dir + "/" + prefix + "-labels-idx1-ubyte.gz", {n}, labels);
  }
}

struct Result {
  int status = -1;
  std::vector<std::string> lines;
};

Result run_example(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv = {kExample};
  argv.insert(argv.end(), args.begin(), args.end());
  th::testing::ChildProcess child(argv, log);
  auto status = child.wait(300);
  if (!status) child.kill_and_reap();
  return {status.value_or(-1), child.lines()};
}

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// step -> value of `tag` over every event file in `dir`; a step written twice fails the test.
std::map<int64_t, double> scalars(const std::string& dir, const std::string& tag) {
  std::map<int64_t, double> out;
  for (const auto& e : th::summary::read_events(dir)) {
    for (const auto& v : e.values) {
      if (v.tag == tag) {
        EXPECT_TRUE(out.emplace(e.step, v.scalar).second) << tag << " step " << e.step;
      }
    }
  }
  return out;
}

// Runs the example with `args` and kills it (SIGKILL) as soon as `logdir`'s newest checkpoint is
// `checkpoint` (e.g. "ckpt-100"), mid-way between two checkpoints; returns the step of the newest
// checkpoint left, the one a rerun resumes from.
int64_t kill_after_checkpoint(const std::vector<std::string>& args, const std::string& logdir,
                              const std::string& checkpoint, const std::string& log) {
  std::vector<std::string> argv = {kExample};
  argv.insert(argv.end(), args.begin(), args.end());
  {
    th::testing::ChildProcess child(argv, log);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline && child.running()) {
      auto state = th::get_checkpoint_state(logdir);
      if (state && state->model_checkpoint_path.find(checkpoint) != std::string::npos) break;
      child.wait(0.01);
    }
    child.kill_and_reap();
  }
  return th::load_checkpoint(logdir).global_step();
}

// The final checkpoints of two runs of `steps` steps hold the same variables bit for bit.
void expect_same_final_variables(const std::string& a, const std::string& b, int64_t steps) {
  auto x = th::load_checkpoint(a), y = th::load_checkpoint(b);
  EXPECT_EQ(x.global_step(), steps);
  EXPECT_EQ(y.global_step(), steps);
  ASSERT_EQ(x.variable_names(), y.variable_names());
  for (const auto& name : x.variable_names())
    EXPECT_TRUE(at::equal(x.get_tensor(name), y.get_tensor(name))) << name;
}

class FashionMnistExampleTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = new th::testing::TempDir;
    write_dataset(data_->path(), 256, 64);
  }
  static void TearDownTestSuite() { delete data_; }

  // A small run: batch 8 (32 steps per epoch), one thread, no progress bar.
  std::vector<std::string> args(const std::string& logdir, int64_t steps) const {
    return {"--data-dir",
            data_->path(),
            "--logdir",
            logdir,
            "--steps=" + std::to_string(steps),  // the equals form, as users also write it
            "--batch-size",
            "8",
            "--warmup-steps",
            "50",
            "--eval-every",
            "100",
            "--threads",
            "1",
            "--no-progress"};
  }

  static th::testing::TempDir* data_;
  th::testing::TempDir dir;
};
th::testing::TempDir* FashionMnistExampleTest::data_ = nullptr;

TEST_F(FashionMnistExampleTest, TrainsEvaluatesAndWritesSummaries) {
  const std::string logdir = dir.file("run");
  auto r = run_example(args(logdir, 200), dir.file("stderr.txt"));
  ASSERT_EQ(exit_code(r.status), 0) << read_file(dir.file("stderr.txt"));
  ASSERT_FALSE(r.lines.empty());
  EXPECT_THAT(r.lines.back(), ::testing::MatchesRegex(
                                  "Final test accuracy: [0-9.]+ % at step 200 \\(200 steps in .*"));
  const std::string err = read_file(dir.file("stderr.txt"));
  EXPECT_THAT(err, HasSubstr("eval: accuracy = "));
  EXPECT_THAT(err, HasSubstr("(step 100)"));
  EXPECT_THAT(err, HasSubstr("(step 200)"));
  // Training summaries: loss, accuracy, learning_rate, weight histograms, the input grid.
  std::set<std::string> tags;
  std::set<th::summary::ValueKind> kinds;
  for (const auto& e : th::summary::read_events(logdir))
    for (const auto& v : e.values) {
      tags.insert(v.tag);
      kinds.insert(v.kind);
    }
  for (const char* tag : {"loss", "accuracy", "learning_rate", "weights/conv1.weight",
                          "weights/fc.weight", "inputs/image"})
    EXPECT_TRUE(tags.count(tag)) << tag;
  EXPECT_TRUE(kinds.count(th::summary::ValueKind::kHistogram));
  EXPECT_TRUE(kinds.count(th::summary::ValueKind::kImage));
  // Evaluation summaries in their own run directory.
  EXPECT_EQ(scalars(logdir + "/eval", "accuracy").size(), 2u);
  EXPECT_EQ(scalars(logdir + "/eval", "loss").size(), 2u);
  // Running the finished run again trains nothing.
  auto again = run_example(args(logdir, 200), dir.file("stderr2.txt"));
  EXPECT_EQ(exit_code(again.status), 0);
  ASSERT_FALSE(again.lines.empty());
  EXPECT_THAT(again.lines.back(), HasSubstr("is complete (200 of 200 steps)"));
}

TEST_F(FashionMnistExampleTest, AnInterruptedRunContinuesTheSameSchedule) {
  const int64_t steps = 1000;
  auto with = [&](std::vector<std::string> a) {
    for (auto s : {"--summary-steps", "1", "--save-steps", "100"}) a.push_back(s);
    return a;
  };
  // Uninterrupted.
  const std::string straight = dir.file("straight");
  auto r = run_example(with(args(straight, steps)), dir.file("straight.txt"));
  ASSERT_EQ(exit_code(r.status), 0) << read_file(dir.file("straight.txt"));

  // Interrupted by SIGINT once the checkpoint of step 100 exists, then run again. The interrupted
  // run makes its batches ahead on two threads (the same batches): they stop with it.
  const std::string resumed = dir.file("resumed");
  int64_t stopped_at = 0;
  {
    auto argv = with(args(resumed, steps));
    argv.insert(argv.begin(), kExample);
    argv.insert(argv.end(), {"--num-workers", "2"});
    th::testing::ChildProcess child(argv, dir.file("resumed.txt"));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline && child.running()) {
      auto state = th::get_checkpoint_state(resumed);
      if (state && !state->model_checkpoint_path.empty() &&
          state->model_checkpoint_path.find("ckpt-0") == std::string::npos)
        break;
      child.wait(0.01);
    }
    child.send(SIGINT);
    auto status = child.wait(120);
    ASSERT_TRUE(status.has_value());
    ASSERT_EQ(exit_code(*status), 130) << read_file(dir.file("resumed.txt"));
    ASSERT_FALSE(child.lines().empty());
    EXPECT_THAT(child.lines().back(), HasSubstr("Stopped by SIGINT at step "));
    stopped_at = th::load_checkpoint(resumed).global_step();
  }
  ASSERT_GT(stopped_at, 0);
  ASSERT_LT(stopped_at, steps) << "the run ended before the signal: make it longer";
  auto again = run_example(with(args(resumed, steps)), dir.file("resumed.txt"));
  ASSERT_EQ(exit_code(again.status), 0) << read_file(dir.file("resumed.txt"));
  EXPECT_THAT(fmt::format("{}", fmt::join(again.lines, "\n")),
              HasSubstr(fmt::format("Resumed at step {}", stopped_at)));

  // Every step's learning rate and loss, once each, equal; so are the final variables.
  for (const char* tag : {"learning_rate", "loss"}) {
    auto a = scalars(straight, tag), b = scalars(resumed, tag);
    EXPECT_EQ(a.size(), static_cast<size_t>(steps)) << tag;
    EXPECT_EQ(a, b) << tag;
  }
  expect_same_final_variables(straight, resumed, steps);
}

// --ema: the averages are checkpoint variables of their own, a run killed (SIGKILL) mid-way
// continues them bit for bit from its newest checkpoint, and a rerun must keep the decay.
TEST_F(FashionMnistExampleTest, MovingAveragesResumeBitForBitAfterAKill) {
  const int64_t steps = 300;
  auto with = [&](const std::string& logdir) {
    auto a = args(logdir, steps);
    for (auto s : {"--save-steps", "50", "--ema", "0.99"}) a.push_back(s);
    return a;
  };
  const std::string straight = dir.file("straight");
  auto r = run_example(with(straight), dir.file("straight.txt"));
  ASSERT_EQ(exit_code(r.status), 0) << read_file(dir.file("straight.txt"));

  const std::string resumed = dir.file("resumed");
  const int64_t killed_at =
      kill_after_checkpoint(with(resumed), resumed, "ckpt-100", dir.file("killed.txt"));
  ASSERT_GT(killed_at, 0);
  ASSERT_LT(killed_at, steps) << "the run ended before the kill: make it longer";
  auto other = run_example(args(resumed, steps), dir.file("other.txt"));
  EXPECT_EQ(exit_code(other.status), 1);
  EXPECT_THAT(read_file(dir.file("other.txt")),
              HasSubstr(fmt::format("--ema 0 differs from the 0.99 of the run in {}", resumed)));
  auto again = run_example(with(resumed), dir.file("again.txt"));
  ASSERT_EQ(exit_code(again.status), 0) << read_file(dir.file("again.txt"));

  auto x = th::load_checkpoint(straight), y = th::load_checkpoint(resumed);
  EXPECT_EQ(y.global_step(), steps);
  ASSERT_EQ(x.variable_names(), y.variable_names());
  int averages = 0;
  for (const auto& name : x.variable_names()) {
    if (name.ends_with("/ExponentialMovingAverage")) ++averages;
    EXPECT_TRUE(at::equal(x.get_tensor(name), y.get_tensor(name))) << name;
  }
  EXPECT_EQ(averages, 6);  // the weights and biases of two convolutions and the linear layer
  // The average trails the weights.
  EXPECT_FALSE(at::equal(x.get_tensor("net/fc.weight"),
                         x.get_tensor("net/fc.weight/ExponentialMovingAverage")));
}

// --accumulate-steps: a step is three batches and one optimizer step; a run killed (SIGKILL),
// almost surely inside a window's micro-batches, continues from its newest checkpoint (a window
// never spans one) bit for bit, and a rerun must keep the number.
TEST_F(FashionMnistExampleTest, GradientAccumulationResumesBitForBitAfterAKill) {
  const int64_t steps = 120;
  auto with = [&](const std::string& logdir) {
    auto a = args(logdir, steps);
    for (auto s : {"--save-steps", "20", "--accumulate-steps", "3", "--summary-steps", "10"})
      a.push_back(s);
    return a;
  };
  const std::string straight = dir.file("straight");
  auto r = run_example(with(straight), dir.file("straight.txt"));
  ASSERT_EQ(exit_code(r.status), 0) << read_file(dir.file("straight.txt"));
  EXPECT_THAT(read_file(straight + "/plan.json"), HasSubstr("\"accumulate_steps\": 3"));
  // 120 steps of 3 batches of 8: 11.25 epochs of 256 examples.
  EXPECT_THAT(fmt::format("{}", fmt::join(r.lines, "\n")), ContainsRegex("11\\.[23] epochs"));

  const std::string resumed = dir.file("resumed");
  const int64_t killed_at =
      kill_after_checkpoint(with(resumed), resumed, "ckpt-40", dir.file("killed.txt"));
  ASSERT_GT(killed_at, 0);
  ASSERT_LT(killed_at, steps) << "the run ended before the kill: make it longer";
  auto other = run_example(args(resumed, steps), dir.file("other.txt"));
  EXPECT_EQ(exit_code(other.status), 1);
  EXPECT_THAT(
      read_file(dir.file("other.txt")),
      HasSubstr(fmt::format("--accumulate-steps 1 differs from the 3 of the run in {}", resumed)));
  auto again = run_example(with(resumed), dir.file("again.txt"));
  ASSERT_EQ(exit_code(again.status), 0) << read_file(dir.file("again.txt"));

  // The loss of every step summarised after the resume (the window's mean; what the killed run
  // had not flushed is lost with it) and the final variables are equal.
  auto a = scalars(straight, "loss"), b = scalars(resumed, "loss");
  EXPECT_GE(a.size(), static_cast<size_t>(steps / 10));  // every 10th step
  int64_t after_resume = 0;
  for (const auto& [step, value] : b) {
    EXPECT_EQ(value, a[step]) << "step " << step;
    if (step > killed_at) ++after_resume;
  }
  EXPECT_GE(after_resume, (steps - killed_at) / 10);
  expect_same_final_variables(straight, resumed, steps);
}

// --num-workers: threads make the training batches ahead, random flips included, and the run is
// bit for bit the run without them, also when it is killed (SIGKILL) mid-way and resumed, with
// other values (they are not part of the plan).
TEST_F(FashionMnistExampleTest, WorkersAheadTrainTheSameAndResumeBitForBitAfterAKill) {
  const int64_t steps = 300;
  auto with = [&](const std::string& logdir, std::vector<std::string> ahead) {
    auto a = args(logdir, steps);
    for (auto s : {"--save-steps", "50", "--regularize", "on"}) a.push_back(s);
    a.insert(a.end(), ahead.begin(), ahead.end());
    return a;
  };
  const std::string straight = dir.file("straight");
  auto r = run_example(with(straight, {}), dir.file("straight.txt"));
  ASSERT_EQ(exit_code(r.status), 0) << read_file(dir.file("straight.txt"));

  const std::string resumed = dir.file("resumed");
  const int64_t killed_at = kill_after_checkpoint(with(resumed, {"--num-workers", "2"}), resumed,
                                                  "ckpt-100", dir.file("killed.txt"));
  ASSERT_GT(killed_at, 0);
  ASSERT_LT(killed_at, steps) << "the run ended before the kill: make it longer";
  auto again =
      run_example(with(resumed, {"--num-workers", "3", "--prefetch", "1"}), dir.file("again.txt"));
  ASSERT_EQ(exit_code(again.status), 0) << read_file(dir.file("again.txt"));
  EXPECT_THAT(fmt::format("{}", fmt::join(again.lines, "\n")),
              HasSubstr(fmt::format("Resumed at step {}", killed_at)));

  expect_same_final_variables(straight, resumed, steps);
  EXPECT_EQ(th::load_checkpoint(straight).input_positions(),
            th::load_checkpoint(resumed).input_positions());
}

// --precision bf16-mixed: the forward passes in bfloat16, the checkpoint's variables float32, and a
// run killed (SIGKILL) mid-way continues bit for bit from its newest checkpoint.
TEST_F(FashionMnistExampleTest, MixedPrecisionCheckpointsFloat32AndResumesBitForBitAfterAKill) {
  const int64_t steps = 120;
  auto with = [&](const std::string& logdir) {
    auto a = args(logdir, steps);
    a.insert(a.end(), {"--precision", "bf16-mixed", "--summary-steps", "10", "--save-steps", "20"});
    return a;
  };
  const std::string straight = dir.file("straight");
  auto r = run_example(with(straight), dir.file("straight.txt"));
  ASSERT_EQ(exit_code(r.status), 0) << read_file(dir.file("straight.txt"));
  EXPECT_THAT(r.lines.back(), HasSubstr("Final test accuracy: "));
  auto ckpt = th::load_checkpoint(straight);
  for (const auto& name : ckpt.variable_names()) {
    if (name.starts_with("net/")) {
      EXPECT_EQ(ckpt.get_tensor(name).scalar_type(), at::kFloat) << name;
    }
  }
  const auto losses = scalars(straight, "loss");
  ASSERT_FALSE(losses.empty());
  EXPECT_LT(losses.rbegin()->second, losses.begin()->second);  // it trained

  const std::string resumed = dir.file("resumed");
  const int64_t killed_at =
      kill_after_checkpoint(with(resumed), resumed, "ckpt-40", dir.file("killed.txt"));
  ASSERT_GT(killed_at, 0);
  ASSERT_LT(killed_at, steps) << "the run ended before the kill: make it longer";
  auto again = run_example(with(resumed), dir.file("again.txt"));
  ASSERT_EQ(exit_code(again.status), 0) << read_file(dir.file("again.txt"));
  expect_same_final_variables(straight, resumed, steps);
}

TEST_F(FashionMnistExampleTest, TheTimeLimitStopsWithACheckpointAndARerunContinues) {
  const std::string logdir = dir.file("run");
  // Far more steps than 0.6 s allow: the TimeLimitHook ends the run, not the plan, and the exit
  // status says so (75, EX_TEMPFAIL, or --time-limit-exit-code).
  auto a = args(logdir, 100000);
  for (auto s : {"--time-limit", "0.01"}) a.push_back(s);
  auto r = run_example(a, dir.file("first.txt"));
  ASSERT_EQ(exit_code(r.status), 75) << read_file(dir.file("first.txt"));
  const int64_t stopped_at = th::load_checkpoint(logdir).global_step();
  ASSERT_GT(stopped_at, 0);
  ASSERT_LT(stopped_at, 100000);
  ASSERT_FALSE(r.lines.empty());
  EXPECT_THAT(r.lines.back(),
              MatchesRegex(fmt::format("Stopped at the time limit of 0.01 min at step {} of "
                                       "100000, before the end of the plan \\(test accuracy so "
                                       "far: [0-9.]+ %\\); the checkpoint is in {}. Run the same "
                                       "command again to continue.",
                                       stopped_at, logdir)));
  for (const auto& line : r.lines) EXPECT_THAT(line, Not(HasSubstr("Final test accuracy")));
  EXPECT_THAT(read_file(dir.file("first.txt")), HasSubstr("TimeLimitHook: time limit of 0.6 s"));
  a.push_back("--time-limit-exit-code=0");
  auto again = run_example(a, dir.file("second.txt"));
  ASSERT_EQ(exit_code(again.status), 0) << read_file(dir.file("second.txt"));
  EXPECT_THAT(fmt::format("{}", fmt::join(again.lines, "\n")),
              HasSubstr(fmt::format("Resumed at step {}", stopped_at)));
  EXPECT_GT(th::load_checkpoint(logdir).global_step(), stopped_at);
}

// A machine slower than the one the plan was timed on (each step 15 ms longer than timed, about
// 5 times): the run is re-planned while it trains (at step 200, with hundreds of steps left to
// fit), ends at the re-planned step with its learning rate decayed, records the new plan, and a
// rerun finds the run complete at that step.
TEST_F(FashionMnistExampleTest, ASlowerMachineIsRePlannedAndTheScheduleStillEnds) {
  const std::string logdir = dir.file("run");
  const std::vector<std::string> a = {"--data-dir",
                                      data_->path(),
                                      "--logdir",
                                      logdir,
                                      "--minutes",
                                      "0.5",
                                      "--batch-size",
                                      "8",
                                      "--regularize",
                                      "off",
                                      "--summary-steps",
                                      "10",
                                      "--threads",
                                      "1",
                                      "--no-progress",
                                      "--step-delay-ms",
                                      "15"};
  auto r = run_example(a, dir.file("first.txt"));
  ASSERT_EQ(exit_code(r.status), 0) << read_file(dir.file("first.txt"));
  const std::string out = fmt::format("{}", fmt::join(r.lines, "\n"));
  EXPECT_THAT(out, ContainsRegex("Re-planned at step [0-9]+: [0-9.]+ ms per step here, so the run "
                                 "ends at step [0-9]+ instead of [0-9]+, within the budget"));
  const auto plan = nlohmann::json::parse(read_file(logdir + "/plan.json"));
  ASSERT_FALSE(plan.at("replans").empty()) << plan.dump();
  const int64_t last = plan["replans"].back()["last_step"].get<int64_t>();
  EXPECT_LT(last, plan["total_steps"].get<int64_t>());
  EXPECT_EQ(plan["warmup_steps"].get<int64_t>(),
            std::min<int64_t>(200, plan["total_steps"].get<int64_t>() / 10));
  EXPECT_EQ(th::load_checkpoint(logdir).global_step(), last);
  EXPECT_THAT(r.lines.back(),
              MatchesRegex(fmt::format("Final test accuracy: [0-9.]+ % at step {} .*", last)));
  // The schedule ended with the run: the last rate written is a small fraction of the peak.
  const auto rates = scalars(logdir, "learning_rate");
  ASSERT_FALSE(rates.empty());
  EXPECT_GT(rates.rbegin()->first, last - 20);
  EXPECT_LT(rates.rbegin()->second, 0.01 * 2e-3);
  auto again = run_example(a, dir.file("second.txt"));
  EXPECT_EQ(exit_code(again.status), 0) << read_file(dir.file("second.txt"));
  ASSERT_FALSE(again.lines.empty());
  EXPECT_EQ(again.lines.back(),
            fmt::format("The run in {} is complete ({} of {} steps). Train again with a new "
                        "--logdir.",
                        logdir, last, last));
}

// --global-batch-size in place of --batch-size: the plan records it, a resumed run must give the
// same, and the two flags together are a usage error.
TEST_F(FashionMnistExampleTest, AGlobalBatchSizeIsPlannedAndKeptOnResume) {
  const std::string logdir = dir.file("run");
  std::vector<std::string> a = args(logdir, 60);
  const auto at = std::find(a.begin(), a.end(), std::string("--batch-size"));
  ASSERT_NE(at, a.end());
  *at = "--global-batch-size";
  auto r = run_example(a, dir.file("first.txt"));
  ASSERT_EQ(exit_code(r.status), 0) << read_file(dir.file("first.txt"));
  const auto plan = nlohmann::json::parse(read_file(logdir + "/plan.json"));
  EXPECT_EQ(plan.at("global_batch_size").get<int64_t>(), 8);
  EXPECT_EQ(plan.at("batch_size").get<int64_t>(), 0);
  EXPECT_EQ(th::load_checkpoint(logdir).global_step(), 60);
  auto other = run_example(args(logdir, 60), dir.file("second.txt"));
  EXPECT_EQ(exit_code(other.status), 1);
  EXPECT_THAT(read_file(dir.file("second.txt")),
              HasSubstr(fmt::format("fashion_mnist: --batch-size 8 differs from the "
                                    "--global-batch-size 8 of the run in {}: use the same, or a "
                                    "new --logdir\n",
                                    logdir)));
  auto both = run_example({"--batch-size", "8", "--global-batch-size", "8"}, dir.file("both.txt"));
  EXPECT_EQ(exit_code(both.status), 2);
  EXPECT_EQ(read_file(dir.file("both.txt")),
            "fashion_mnist: --batch-size excludes --global-batch-size (see --help)\n");
}

TEST_F(FashionMnistExampleTest, BadFlagsAndMissingDataAreClearErrors) {
  auto bad = run_example({"--batch-size", "0"}, dir.file("err1.txt"));
  EXPECT_EQ(exit_code(bad.status), 2);
  EXPECT_THAT(read_file(dir.file("err1.txt")), HasSubstr("--batch-size"));
  auto both = run_example({"--steps", "10", "--minutes", "1"}, dir.file("err2.txt"));
  EXPECT_EQ(exit_code(both.status), 2);
  EXPECT_THAT(read_file(dir.file("err2.txt")), HasSubstr("excludes"));
  auto missing =
      run_example({"--data-dir", dir.file("nowhere"), "--logdir", dir.file("run"), "--steps", "10"},
                  dir.file("err3.txt"));
  EXPECT_EQ(exit_code(missing.status), 1);
  const std::string err = read_file(dir.file("err3.txt"));
  EXPECT_THAT(err, HasSubstr(dir.file("nowhere")));
  EXPECT_THAT(err, HasSubstr("dataset-fashion-mnist"));
  auto help = run_example({"--help"}, dir.file("err4.txt"));
  EXPECT_EQ(exit_code(help.status), 0);
  EXPECT_THAT(fmt::format("{}", fmt::join(help.lines, "\n")), HasSubstr("--minutes"));
  EXPECT_THAT(fmt::format("{}", fmt::join(help.lines, "\n")), HasSubstr("--preempted-exit-code"));
  EXPECT_THAT(fmt::format("{}", fmt::join(help.lines, "\n")), HasSubstr("--num-workers"));
  EXPECT_THAT(fmt::format("{}", fmt::join(help.lines, "\n")), HasSubstr("--prefetch"));
}

// Each usage error is one line naming the flag, exit status 2, before any file is written.
TEST_F(FashionMnistExampleTest, UsageErrorsNameTheFlagAndExitWithTwo) {
  const std::string logdir = dir.file("run");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--steps", "abc"}, "--steps: must be a positive number, got 'abc'"},
      {{"--steps", "-1"}, "--steps: must be a positive number, got '-1'"},
      {{"--save-steps", "abc"}, "--save-steps: must be a positive number, got 'abc'"},
      {{"--steps", "--logdir", logdir},
       "--steps: value missing (the next argument is the flag '--logdir')"},
      {{"--logdir", "--steps", "5"},
       "--logdir: value missing (the next argument is the flag '--steps')"},
      {{"--steps", "5", "stray"}, "The following argument was not expected: stray"},
      {{"--preempted-exit-code", "256"}, "--preempted-exit-code: Value 256 not in range 0 to 255"},
      {{"--ema", "1"}, "--ema: must be a number in (0, 1), got '1'"},
      {{"--precision", "fp16"}, "--precision: fp16 not in {fp32,bf16-mixed}"},
      {{"--ema", "-0.5"}, "--ema: must be a number in (0, 1), got '-0.5'"},
      {{"--accumulate-steps", "0"}, "--accumulate-steps: must be a positive number, got '0'"},
      {{"--num-workers", "-1"}, "--num-workers: must be an integer from 0 to 64, got '-1'"},
      {{"--num-workers", "1.5"}, "--num-workers: must be an integer from 0 to 64, got '1.5'"},
      {{"--prefetch", "x"}, "--prefetch: must be an integer from 0 to 1024, got 'x'"},
  };
  int n = 0;
  for (const auto& [flags, text] : cases) {
    const std::string err = dir.file("usage" + std::to_string(++n) + ".txt");
    auto r = run_example(flags, err);
    EXPECT_EQ(exit_code(r.status), 2) << ::testing::PrintToString(flags);
    EXPECT_EQ(read_file(err), "fashion_mnist: " + text + " (see --help)\n");
    EXPECT_TRUE(r.lines.empty());
  }
  EXPECT_FALSE(fs::exists(logdir));
}

TEST_F(FashionMnistExampleTest, AGarbledStateFileIsOneLineNamingItNotAnAbort) {
  const std::string logdir = dir.file("run");
  fs::create_directories(logdir);
  std::ofstream(logdir + "/checkpoint") << "model_checkpoint_path: \"model.ckpt-5\ngarbage";
  auto r = run_example(args(logdir, 100), dir.file("err.txt"));
  EXPECT_EQ(exit_code(r.status), 1) << read_file(dir.file("err.txt"));
  std::vector<std::string> mine;
  std::istringstream in(read_file(dir.file("err.txt")));
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("fashion_mnist: ")) mine.push_back(line);
  ASSERT_EQ(mine.size(), 1u) << read_file(dir.file("err.txt"));
  EXPECT_THAT(mine[0], HasSubstr(logdir + "/checkpoint"));
}

// The main job under torchrun with --distributed: 2 ranks, each on its shard, one report (the
// chief's), summaries and checkpoints written once, by the chief.
TEST_F(FashionMnistExampleTest, DistributedUnderTorchrunTrainsOnceAndReportsOnce) {
  const std::string torchrun = "/usr/bin/torchrun";
  if (!fs::exists(torchrun)) GTEST_SKIP() << "no " << torchrun << " (python3-torch)";
  const std::string logdir = dir.file("run");
  std::vector<std::string> argv = {"/usr/bin/env",
                                   "-u",
                                   "RANK",
                                   "-u",
                                   "WORLD_SIZE",
                                   torchrun,
                                   "--no_python",
                                   "--redirects",
                                   "2",
                                   "--tee",
                                   "2",
                                   "--nnodes=1",
                                   "--nproc_per_node=2",
                                   "--master_addr",
                                   "127.0.0.1",
                                   "--master_port",
                                   std::to_string(th::testing::free_port()),
                                   "--log_dir",
                                   dir.file("logs"),
                                   kExample,
                                   "--distributed"};
  for (const auto& a : args(logdir, 60)) argv.push_back(a);
  th::testing::ChildProcess child(argv, dir.file("stderr.txt"));
  auto status = child.wait(300);
  if (!status) child.kill_and_reap();
  const std::string err = read_file(dir.file("stderr.txt"));
  ASSERT_TRUE(status) << "torchrun did not finish:\n" << err;
  ASSERT_EQ(exit_code(*status), 0) << err;
  int finals = 0;
  for (const auto& l : child.lines())
    if (l.rfind("Final test accuracy:", 0) == 0) ++finals;
  EXPECT_EQ(finals, 1) << err;
  EXPECT_TRUE(fs::exists(logdir + "/model.ckpt-60")) << err;
  EXPECT_THAT(err, HasSubstr("Broadcast "));
  // One writer of each step's summaries: a second would repeat steps (scalars() fails on that).
  EXPECT_FALSE(scalars(logdir, "loss").empty());
  EXPECT_EQ(scalars(logdir + "/eval", "accuracy").size(), 1u);
}

}  // namespace fashion_mnist_test
