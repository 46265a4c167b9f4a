// Data-parallel training over several processes: tests/tools/distributed_trainer.cpp started as
// 2 ranks on loopback, by the test itself over a file store, and by torchrun (elastic restart).
// Every wait is bounded: a rank that hangs is killed and the test fails with its log.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "checkpoint/child_process.h"
#include "distributed/trainer_command.h"
#include "test_util.h"

namespace th = trainhooks;
using ::testing::HasSubstr;
using th::testing::ChildProcess;
using th::testing::describe_status;
using th::testing::free_port;
using th::testing::read_text;
using th::testing::TempDir;
using th::testing::trainer_command;

namespace distributed_training_test {

constexpr double kTimeout = 120;  // for a whole run of the trainer

struct RankRun {
  std::optional<int> status;
  std::vector<std::string> lines;
  std::string log;
  // "step N ..." lines by step (the last printed for each step).
  std::map<int64_t, std::string> steps() const {
    std::map<int64_t, std::string> out;
    for (const auto& l : lines)
      if (l.rfind("step ", 0) == 0) out[std::stoll(l.substr(5))] = l.substr(l.find(' ', 5) + 1);
    return out;
  }
  // "<step> <variables>" of the "final <rank> ..." line ("" when there is none).
  std::string final_variables() const {
    for (const auto& l : lines)
      if (l.rfind("final ", 0) == 0) return l.substr(l.find(' ', 6) + 1);
    return "";
  }
  // The example ids of every "ids <step> <id>..." line (--print-ids 1), in order.
  std::vector<int64_t> ids() const {
    std::vector<int64_t> out;
    for (const auto& l : lines) {
      if (l.rfind("ids ", 0) != 0) continue;
      std::istringstream in(l.substr(4));
      int64_t step = 0, id = 0;
      in >> step;
      while (in >> id) out.push_back(id);
    }
    return out;
  }
  bool ok() const { return status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0; }
  std::string describe() const {
    return (status ? describe_status(*status) : std::string("still running")) + "; log:\n" + log;
  }
};

// Runs `world` ranks of the trainer over a file store in `dir` and waits for all of them.
std::vector<RankRun> run_ranks(const TempDir& dir, int world, std::vector<std::string> args) {
  static int serial = 0;
  const std::string store = dir.file("store-" + std::to_string(++serial));
  std::vector<std::unique_ptr<ChildProcess>> children;
  std::vector<std::string> logs;
  args.insert(args.end(), {"--file-store", store});
  for (int r = 0; r < world; ++r) {
    logs.push_back(dir.file("rank" + std::to_string(r) + "-" + std::to_string(serial) + ".log"));
    children.push_back(std::make_unique<ChildProcess>(
        trainer_command({"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(world)}, args),
        logs.back()));
  }
  std::vector<RankRun> runs(world);
  for (int r = 0; r < world; ++r) {
    runs[r].status = children[r]->wait(kTimeout);
    if (!runs[r].status) children[r]->kill_and_reap();
    runs[r].lines = children[r]->lines();
    runs[r].log = read_text(logs[r]);
  }
  return runs;
}

RankRun run_single(const TempDir& dir, const std::vector<std::string>& args) {
  const std::string log = dir.file("single.log");
  ChildProcess child(trainer_command({}, args), log);
  RankRun run;
  run.status = child.wait(kTimeout);
  if (!run.status) child.kill_and_reap();
  run.lines = child.lines();
  run.log = read_text(log);
  return run;
}

// The values of a step line ("0x1.8p-1 ...") as doubles.
std::vector<double> values(const std::string& line) {
  std::istringstream in(line);
  std::vector<double> out;
  std::string word;
  while (in >> word) out.push_back(std::strtod(word.c_str(), nullptr));
  return out;
}

TEST(DistributedTrainingTest, TwoRanksOnHalfBatchesTrainAsOneProcessOnTheWholeBatch) {
  TempDir dir;
  const RankRun one = run_single(dir, {"--last-step", "12", "--batch", "16"});
  ASSERT_TRUE(one.ok()) << one.describe();
  const std::vector<RankRun> two = run_ranks(dir, 2, {"--last-step", "12", "--batch", "8"});
  ASSERT_TRUE(two[0].ok()) << two[0].describe();
  ASSERT_TRUE(two[1].ok()) << two[1].describe();
  const auto expected = one.steps();
  ASSERT_EQ(expected.size(), 12u);
  for (int r = 0; r < 2; ++r) {
    const auto got = two[r].steps();
    ASSERT_EQ(got.size(), 12u) << two[r].describe();
    for (const auto& [step, line] : expected) {
      const std::vector<double> want = values(line), have = values(got.at(step));
      ASSERT_EQ(want.size(), 4u);
      ASSERT_EQ(have.size(), 4u);
      for (size_t i = 0; i < 4; ++i)
        EXPECT_NEAR(have[i], want[i], 1e-5 + 1e-5 * std::abs(want[i])) << "step " << step;
    }
  }
  // The ranks apply the same averaged update: the same bits at every step.
  EXPECT_EQ(two[0].steps(), two[1].steps());
  EXPECT_EQ(two[0].final_variables(), two[1].final_variables());
}

TEST(DistributedTrainingTest, WorkersContinueFromTheChiefsRestoredCheckpoint) {
  TempDir dir;
  const std::string ckpt = dir.file("ckpt");
  auto first =
      run_ranks(dir, 2, {"--dir", ckpt, "--save-steps", "3", "--last-step", "5", "--batch", "8"});
  ASSERT_TRUE(first[0].ok()) << first[0].describe();
  ASSERT_TRUE(first[1].ok()) << first[1].describe();
  // Only the chief writes checkpoints; its final one holds step 5.
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/model.ckpt-5"));
  auto resumed =
      run_ranks(dir, 2, {"--dir", ckpt, "--save-steps", "3", "--last-step", "10", "--batch", "8"});
  ASSERT_TRUE(resumed[0].ok()) << resumed[0].describe();
  ASSERT_TRUE(resumed[1].ok()) << resumed[1].describe();
  // The worker received step 5's state: its first step is 6, and the ranks agree throughout.
  EXPECT_EQ(resumed[1].steps().begin()->first, 6);
  EXPECT_EQ(resumed[0].steps(), resumed[1].steps());
  EXPECT_THAT(resumed[0].log, HasSubstr("Broadcast 2 variables and the training state at global "
                                        "step 5 to 1 ranks."));
  // And the whole equals a straight run of 10 steps, bit for bit (input positions, the step).
  auto straight = run_ranks(dir, 2, {"--last-step", "10", "--batch", "8"});
  ASSERT_TRUE(straight[0].ok()) << straight[0].describe();
  EXPECT_EQ(resumed[0].final_variables(), straight[0].final_variables());
  EXPECT_EQ(resumed[1].final_variables(), straight[1].final_variables());
}

// A checkpoint of W0 ranks resumed on W1: the input continues the epoch's order from where all
// W0 ranks together left it, so that every one of the 64 examples of the interrupted epoch is read
// exactly once across the ranks, before and after the change (the input positions are global).
void resume_on_another_number_of_ranks(int w0, int w1) {
  SCOPED_TRACE(::testing::Message() << w0 << " ranks, then " << w1);
  TempDir dir;
  const std::string ckpt = dir.file("ckpt");
  constexpr int64_t kBatch = 4, kFirstSteps = 3;
  const std::vector<std::string> common{
      "--dir", ckpt, "--save-steps", "1000", "--batch", std::to_string(kBatch), "--print-ids", "1"};
  auto with = [&](std::vector<std::string> args, int64_t last_step) {
    args.insert(args.end(), {"--last-step", std::to_string(last_step)});
    return args;
  };
  auto first = run_ranks(dir, w0, with(common, kFirstSteps));
  std::vector<int64_t> read;
  for (const auto& r : first) {
    ASSERT_TRUE(r.ok()) << r.describe();
    const auto ids = r.ids();
    read.insert(read.end(), ids.begin(), ids.end());
  }
  ASSERT_EQ(static_cast<int64_t>(read.size()), kFirstSteps * kBatch * w0);
  // What is left of the epoch, shared out among w1 ranks (64 - read divides by 1, 2 and 4 here).
  const int64_t per_rank = (64 - static_cast<int64_t>(read.size())) / w1;
  const int64_t more_steps = (per_rank + kBatch - 1) / kBatch;
  auto second = run_ranks(dir, w1, with(common, kFirstSteps + more_steps));
  for (const auto& r : second) {
    ASSERT_TRUE(r.ok()) << r.describe();
    EXPECT_EQ(r.steps().begin()->first, kFirstSteps + 1) << r.describe();
    const auto ids = r.ids();
    read.insert(read.end(), ids.begin(), ids.end());
  }
  std::sort(read.begin(), read.end());
  std::vector<int64_t> every(64);
  for (int64_t i = 0; i < 64; ++i) every[i] = i;
  EXPECT_EQ(read, every);
  const auto ranks = [](int n) { return fmt::format("{} rank{}", n, n == 1 ? "" : "s"); };
  const std::string said = fmt::format(
      "Resuming a {}-rank checkpoint on {}: every input "
      "continues its epoch's order where the {} left it "
      "('train/x' at example {} of epoch 0)",
      w0, ranks(w1), ranks(w0), kFirstSteps * kBatch * w0);
  EXPECT_THAT(second[0].log, HasSubstr(said));
  // The ranks of the resumed run still train one model.
  for (const auto& r : second) EXPECT_EQ(r.final_variables(), second[0].final_variables());
}

TEST(DistributedTrainingTest, AResumeOnFewerRanksReadsEveryExampleOfTheEpochOnce) {
  resume_on_another_number_of_ranks(2, 1);
}

TEST(DistributedTrainingTest, AResumeOnMoreRanksReadsEveryExampleOfTheEpochOnce) {
  resume_on_another_number_of_ranks(1, 2);
  resume_on_another_number_of_ranks(2, 4);
}

// The training itself continues across the change: with the global batch kept
// (InputOptions::global_batch_size), every step after the resume trains on the same examples as a
// run that never changed its number of ranks, so the variables (and the loss curve) follow that
// run's to rounding, across the end of the first epoch too (6 steps of 16 of 64 examples).
void resume_continues_the_training(int w0, int w1) {
  SCOPED_TRACE(::testing::Message() << w0 << " ranks, then " << w1);
  TempDir dir;
  const std::string ckpt = dir.file("ckpt");
  const std::vector<std::string> common{"--save-steps", "1000", "--global-batch", "16"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  auto first = run_ranks(dir, w0, with({"--dir", ckpt, "--last-step", "3"}));
  for (const auto& r : first) ASSERT_TRUE(r.ok()) << r.describe();
  auto second = run_ranks(dir, w1, with({"--dir", ckpt, "--last-step", "6"}));
  for (const auto& r : second) ASSERT_TRUE(r.ok()) << r.describe();
  auto straight = run_ranks(dir, 1, with({"--last-step", "6"}));
  ASSERT_TRUE(straight[0].ok()) << straight[0].describe();
  const auto want = straight[0].steps(), before = first[0].steps(), after = second[0].steps();
  ASSERT_EQ(before.size(), 3u);
  ASSERT_EQ(after.size(), 3u);
  for (int64_t step = 1; step <= 6; ++step) {
    const std::vector<double> expected = values(want.at(step)),
                              got = values((step <= 3 ? before : after).at(step));
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], expected[i], 1e-5 + 1e-5 * std::abs(expected[i])) << "step " << step;
  }
  // Still moving: the resumed steps are not the first run's last state over again.
  EXPECT_NE(after.at(4), before.at(3));
}

TEST(DistributedTrainingTest, AResumeOnAnotherNumberOfRanksContinuesTheSameTraining) {
  resume_continues_the_training(2, 1);
  resume_continues_the_training(1, 2);
  resume_continues_the_training(2, 4);
}

// InputOptions::global_batch_size: the same batch of all ranks together on 1 and on 2 ranks, so
// that the two runs train the same model (to rounding: the mean over two halves).
TEST(DistributedTrainingTest, AGlobalBatchIsSharedOutAmongTheRanks) {
  TempDir dir;
  auto one = run_ranks(dir, 1, {"--last-step", "6", "--global-batch", "16", "--print-ids", "1"});
  auto two = run_ranks(dir, 2, {"--last-step", "6", "--global-batch", "16", "--print-ids", "1"});
  ASSERT_TRUE(one[0].ok()) << one[0].describe();
  for (const auto& r : two) ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(one[0].ids().size(), 6u * 16);
  EXPECT_EQ(two[0].ids().size(), 6u * 8);
  const std::vector<double> a = values(one[0].steps().at(6)), b = values(two[0].steps().at(6));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 + 1e-5 * std::abs(a[i]));
  auto three = run_ranks(dir, 3, {"--last-step", "2", "--global-batch", "16"});
  ASSERT_TRUE(three[0].status);
  EXPECT_THAT(three[0].log,
              HasSubstr("input 'train': global_batch_size 16 does not divide among 3 shards"));
}

TEST(DistributedTrainingTest, AStopRequestedOnOneRankStopsEveryRankAfterTheSameStep) {
  TempDir dir;
  auto runs = run_ranks(
      dir, 2, {"--last-step", "50", "--batch", "8", "--stop-rank", "1", "--stop-at", "4"});
  ASSERT_TRUE(runs[0].ok()) << runs[0].describe();
  ASSERT_TRUE(runs[1].ok()) << runs[1].describe();
  EXPECT_EQ(runs[0].steps().rbegin()->first, 4);
  EXPECT_EQ(runs[1].steps().rbegin()->first, 4);
  EXPECT_EQ(runs[0].final_variables(), runs[1].final_variables());
}

TEST(DistributedTrainingTest, ModelAveragingMakesTheRanksEqualAtEachAverage) {
  TempDir dir;
  auto runs = run_ranks(
      dir, 2, {"--mode", "local", "--average-every", "4", "--last-step", "8", "--batch", "8"});
  ASSERT_TRUE(runs[0].ok()) << runs[0].describe();
  ASSERT_TRUE(runs[1].ok()) << runs[1].describe();
  const auto a = runs[0].steps(), b = runs[1].steps();
  EXPECT_NE(a.at(3), b.at(3));  // each rank trained on its own shard
  EXPECT_EQ(a.at(4), b.at(4));  // and the average made them one model
  EXPECT_EQ(a.at(8), b.at(8));
}

TEST(DistributedTrainingTest, ReplicaConsistencyCheckNamesTheVariableAndTheRank) {
  TempDir dir;
  auto runs = run_ranks(
      dir, 2, {"--check-every", "2", "--perturb-at", "3", "--last-step", "10", "--batch", "8"});
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(runs[r].status) << runs[r].describe();
    EXPECT_TRUE(WIFEXITED(*runs[r].status) && WEXITSTATUS(*runs[r].status) == 1)
        << runs[r].describe();
    EXPECT_THAT(runs[r].log, HasSubstr("ReplicaConsistencyHook: at global step 4 variable 'b' "
                                       "differs from rank 0's on rank 1"));
    // The check runs before the step is printed: step 4 is never reported.
    EXPECT_EQ(runs[r].steps().rbegin()->first, 3);
  }
}

TEST(DistributedTrainingTest, APeerKilledMidTrainingEndsTheOtherWithAnErrorNotAHang) {
  TempDir dir;
  auto runs = run_ranks(
      dir, 2, {"--die-at-step", "3", "--last-step", "50", "--batch", "8", "--timeout", "20"});
  ASSERT_TRUE(runs[1].status);
  EXPECT_TRUE(WIFSIGNALED(*runs[1].status) && WTERMSIG(*runs[1].status) == SIGKILL);
  ASSERT_TRUE(runs[0].status) << "rank 0 still ran after its peer died: " << runs[0].describe();
  EXPECT_TRUE(WIFEXITED(*runs[0].status) && WEXITSTATUS(*runs[0].status) == 1)
      << runs[0].describe();
  EXPECT_THAT(runs[0].log, HasSubstr("trainhooks distributed:"));
  EXPECT_THAT(runs[0].log, HasSubstr("on rank 0 of 2"));
}

TEST(DistributedTrainingTest, TorchrunRestartsAKilledWorkerAndEveryRankEndsAtTheLastStep) {
  const std::string torchrun = "/usr/bin/torchrun";
  if (!std::filesystem::exists(torchrun)) GTEST_SKIP() << "no " << torchrun << " (python3-torch)";
  TempDir dir;
  const std::string ckpt = dir.file("ckpt");
  const std::string log = dir.file("torchrun.log");
  std::vector<std::string> argv =
      trainer_command({}, {"--dir", ckpt, "--save-steps", "3", "--last-step", "10", "--batch", "8",
                           "--die-at-step", "5", "--timeout", "30"});
  // torchrun in place of the trainer: /usr/bin/env -u ... torchrun <flags> trainer args...
  const auto at = std::find(argv.begin(), argv.end(), std::string(TRAINHOOKS_DISTRIBUTED_TRAINER));
  argv.insert(
      at, {torchrun, "--no_python", "--redirects", "2", "--tee", "2", "--nnodes=1",
           "--nproc_per_node=2", "--max_restarts=3", "--master_addr", "127.0.0.1", "--master_port",
           std::to_string(free_port()), "--log_dir", dir.file("torchrun-logs")});
  ChildProcess child(argv, log);
  const std::optional<int> status = child.wait(240);
  if (!status) child.kill_and_reap();
  const std::string output = read_text(log);
  ASSERT_TRUE(status) << "torchrun did not finish; its output:\n" << output;
  ASSERT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << describe_status(*status) << "\n"
                                                               << output;
  std::map<std::string, std::string> finals;  // rank -> "step values"
  for (const auto& l : child.lines()) {
    if (l.rfind("final ", 0) != 0) continue;
    std::istringstream in(l);
    std::string word, rank;
    in >> word >> rank;
    finals[rank] = l.substr(l.find(' ', 6) + 1);
  }
  ASSERT_EQ(finals.size(), 2u) << output;
  EXPECT_EQ(finals["0"], finals["1"]);
  EXPECT_EQ(finals["0"].substr(0, 3), "10 ");
  // The restart resumed from the newest checkpoint: the same result as a run never killed.
  auto straight = run_ranks(dir, 2, {"--last-step", "10", "--batch", "8"});
  ASSERT_TRUE(straight[0].ok()) << straight[0].describe();
  EXPECT_EQ(straight[0].final_variables(), finals["0"]);
  // No checkpoint is damaged.
  int verify_status = 0;
  const std::string verify = th::testing::run_command(
      std::string("timeout 60 ") + TRAINHOOKS_CLI + " checkpoint verify " + ckpt + " 2>&1",
      verify_status);
  EXPECT_EQ(verify_status, 0) << verify;
}

}  // namespace distributed_training_test
