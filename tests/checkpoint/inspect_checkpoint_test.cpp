#include "trainhooks/checkpoint/inspect_checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "checkpoint/checkpoint_test_model.h"
#include "test_util.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;
namespace fs = std::filesystem;
using ::testing::HasSubstr;
using th::testing::error_message;

namespace inspect_checkpoint_test {

class InspectCheckpointTest : public th::testing::CheckpointTestDir {
 protected:
  std::string list() {
    std::ostringstream out;
    th::print_checkpoint_list(out, dir.path());
    return out.str();
  }
  std::string inspect(const std::string& path, const th::InspectCheckpointOptions& options = {}) {
    std::ostringstream out;
    th::print_checkpoint(out, path, options);
    return out.str();
  }
  // {output, result}
  std::pair<std::string, bool> verify(const std::string& path) {
    std::ostringstream out;
    bool ok = th::verify_checkpoints(out, path);
    return {out.str(), ok};
  }
  std::string ckpt(int step) const { return dir.file("model.ckpt-" + std::to_string(step)); }
};

// The file sizes below are those LibTorch 1.13's pickler writes for this model: the same on every
// run (the pickles hold no time stamps), but they would change with another LibTorch.

TEST_F(InspectCheckpointTest, ListPrintsOneRowPerListedCheckpointAndMarksTheLatest) {
  EXPECT_EQ(list(), "2 checkpoints listed in " + dir.file("checkpoint") +
                        " (oldest first, * latest):\n"
                        "     step  bytes     size  written               path\n"
                        "        0   8102  7.9 KiB  2001-09-09T01:46:40Z  " +
                        ckpt(0) + "\n" + "  *     2   9110  8.9 KiB  2001-09-09T01:46:50Z  " +
                        ckpt(2) + "\n");
}

TEST_F(InspectCheckpointTest, ListNamesMissingFiles) {
  fs::remove(ckpt(0) + ".trainstate");
  fs::remove(ckpt(2));
  fs::remove(ckpt(2) + ".trainstate");
  const std::string out = list();
  EXPECT_THAT(out, HasSubstr("        0   1315  1.3 KiB  2001-09-09T01:46:40Z  " + ckpt(0) +
                             "  (missing: model.ckpt-0.trainstate)\n"));
  EXPECT_THAT(out, HasSubstr("  *     2      0      0 B  2001-09-09T01:46:50Z  " + ckpt(2) +
                             "  (missing: model.ckpt-2, model.ckpt-2.trainstate)\n"));
}

TEST_F(InspectCheckpointTest, InspectPrintsEveryFactOfTheTrainingState) {
  EXPECT_EQ(inspect(ckpt(2)), "checkpoint " + ckpt(2) +
                                  "\n"
                                  "  global step     2\n"
                                  "  written         2001-09-09T01:46:50Z\n"
                                  "  variables file  1315 bytes (1.3 KiB)\n"
                                  "  training state  7795 bytes (7.6 KiB)\n"
                                  "\n"
                                  "variables: 3 (9 elements, 40 B)\n"
                                  "  name        dtype    shape   elements\n"
                                  "  net/weight  float32  [2, 3]         6\n"
                                  "  net/bias    float32  [2]            2\n"
                                  "  scale       int64    [1]            1\n"
                                  "\n"
                                  "optimizer state: 1 train op\n"
                                  "  train op  optimizer  learning rates  bytes\n"
                                  "  train     adam       0.05               64\n"
                                  "\n"
                                  "input positions: 1 input\n"
                                  "  input   epoch  offset\n"
                                  "  data/x      0       6\n"
                                  "\n"
                                  "state: 1 key\n"
                                  "  key           bytes\n"
                                  "  test/counter      1\n"
                                  "\n"
                                  "cpu rng state: 5056 bytes\n");
}

TEST_F(InspectCheckpointTest, InspectOfADirectoryShowsItsLatestCheckpoint) {
  EXPECT_EQ(inspect(dir.path()), inspect(ckpt(2)));
}

TEST_F(InspectCheckpointTest, InspectPrintsRequestedValuesAsNumpyDoes) {
  const std::string out = inspect(ckpt(0), {.tensors = {"scale", "net/weight"}});
  EXPECT_THAT(out, HasSubstr("\ncpu rng state: 5056 bytes\n"
                             "\nnet/weight (float32 [2, 3]):\n"
                             "[[0.0 0.25 0.5], [0.75 1.0 1.25]]\n"
                             "\nscale (int64 [1]):\n"
                             "[3]\n"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("net/bias (")));
  EXPECT_THAT(inspect(ckpt(0), {.all_tensors = true}),
              HasSubstr("\nnet/bias (float32 [2]):\n[-1.5 2.0]\n"));
}

TEST_F(InspectCheckpointTest, InspectOfAnUnknownTensorIsNotFoundAndPrintsNothing) {
  std::ostringstream out;
  EXPECT_EQ(error_message<th::NotFoundError>(
                [&] { th::print_checkpoint(out, ckpt(2), {.tensors = {"net/kernel"}}); }),
            "Variable 'net/kernel' not found in checkpoint '" + ckpt(2) + "'");
  EXPECT_EQ(out.str(), "");
}

TEST_F(InspectCheckpointTest, JsonHoldsTheSameFacts) {
  std::ostringstream out;
  th::print_checkpoint_json(out, dir.path(), {.tensors = {"net/bias"}});
  const auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["path"], ckpt(2));
  EXPECT_EQ(j["trainstate_path"], ckpt(2) + ".trainstate");
  EXPECT_EQ(j["global_step"], 2);
  EXPECT_EQ(j["wall_time"], 1.0e9 + 10.5);
  EXPECT_EQ(j["written"], "2001-09-09T01:46:50Z");
  EXPECT_EQ(j["variables_file_bytes"], fs::file_size(ckpt(2)));
  EXPECT_EQ(j["trainstate_file_bytes"], fs::file_size(ckpt(2) + ".trainstate"));
  ASSERT_EQ(j["variables"].size(), 3u);
  EXPECT_EQ(j["variables"][0],
            nlohmann::json::parse(
                R"({"name": "net/weight", "dtype": "float32", "shape": [2, 3], "elements": 6})"));
  EXPECT_EQ(j["variables"][1]["name"], "net/bias");
  EXPECT_EQ(j["variables"][1]["value"].size(), 2u);  // trained: values depend on Adam's steps
  EXPECT_EQ(
      j["variables"][2],
      nlohmann::json::parse(R"({"name": "scale", "dtype": "int64", "shape": [1], "elements": 1})"));
  ASSERT_EQ(j["optimizers"].size(), 1u);
  EXPECT_EQ(j["optimizers"][0]["train_op"], "train");
  EXPECT_EQ(j["optimizers"][0]["learning_rates"], nlohmann::json::parse("[0.05]"));
  EXPECT_EQ(j["optimizers"][0]["type"], "adam");
  EXPECT_EQ(j["optimizers"][0]["state_bytes"], 64);
  EXPECT_EQ(j["inputs"], nlohmann::json::parse(R"([{"name": "data/x", "epoch": 0, "offset": 6}])"));
  EXPECT_EQ(j["state"], nlohmann::json::parse(R"([{"key": "test/counter", "bytes": 1}])"));
  EXPECT_EQ(j["cpu_rng_state_bytes"], 5056);

  std::ostringstream values;
  th::print_checkpoint_json(values, ckpt(0), {.all_tensors = true});
  const auto v = nlohmann::json::parse(values.str());
  EXPECT_EQ(v["variables"][0]["value"],
            nlohmann::json::parse("[[0.0, 0.25, 0.5], [0.75, 1.0, 1.25]]"));
  EXPECT_EQ(v["variables"][1]["value"], nlohmann::json::parse("[-1.5, 2.0]"));
  EXPECT_EQ(v["variables"][2]["value"], nlohmann::json::parse("[3]"));
}

TEST_F(InspectCheckpointTest, VerifyPrintsOkForEveryListedCheckpoint) {
  auto [out, ok] = verify(dir.path());
  EXPECT_TRUE(ok);
  EXPECT_EQ(out, "OK " + ckpt(0) + " (step 0, 3 variables, 8102 bytes)\n" + "OK " + ckpt(2) +
                     " (step 2, 3 variables, 9110 bytes)\n" + "2 of 2 checkpoints OK\n");
  std::tie(out, ok) = verify(ckpt(2));
  EXPECT_TRUE(ok);
  EXPECT_EQ(out, "OK " + ckpt(2) + " (step 2, 3 variables, 9110 bytes)\n");
}

TEST_F(InspectCheckpointTest, VerifyReportsAFlippedByteAndATruncatedFile) {
  th::testing::flip_byte(ckpt(2), 100);
  auto [out, ok] = verify(ckpt(2));
  EXPECT_FALSE(ok);
  EXPECT_EQ(out, "CORRUPT " + ckpt(2) + ": Checkpoint file '" + ckpt(2) +
                     "' is corrupt: its CRC32C does not match the one recorded in '" + ckpt(2) +
                     ".trainstate'\n");

  const std::string side = ckpt(0) + ".trainstate";
  const std::string bytes = th::testing::read_file_bytes(side);
  th::testing::write_file_bytes(side, bytes.substr(0, bytes.size() - 10));
  std::tie(out, ok) = verify(dir.path());
  EXPECT_FALSE(ok);
  EXPECT_EQ(out, "CORRUPT " + ckpt(0) + ": Checkpoint file '" + side +
                     "' is truncated: its header announces " + std::to_string(bytes.size() - 28) +
                     " payload bytes, the file has " + std::to_string(bytes.size() - 38) + "\n" +
                     "CORRUPT " + ckpt(2) + ": Checkpoint file '" + ckpt(2) +
                     "' is corrupt: its CRC32C does not match the one recorded in '" + ckpt(2) +
                     ".trainstate'\n" + "0 of 2 checkpoints OK\n");
}

TEST_F(InspectCheckpointTest, VerifyReportsMissingFiles) {
  fs::remove(ckpt(0));
  auto [out, ok] = verify(dir.path());
  EXPECT_FALSE(ok);
  EXPECT_THAT(out, HasSubstr("MISSING " + ckpt(0) + ": Checkpoint file '" + ckpt(0) +
                             "' does not exist\n"));
  EXPECT_THAT(out, HasSubstr("\n1 of 2 checkpoints OK\n"));
}

TEST(InspectCheckpointErrorsTest, MissingDirectoryAndMissingStateFileAreNamed) {
  th::testing::TempDir dir;
  std::ostringstream out;
  EXPECT_EQ(
      error_message<th::NotFoundError>([&] { th::print_checkpoint_list(out, dir.file("nope")); }),
      "Checkpoint directory '" + dir.file("nope") + "' does not exist");
  EXPECT_EQ(error_message<th::NotFoundError>([&] { th::print_checkpoint_list(out, dir.path()); }),
            "No checkpoint state file in '" + dir.path() + "'");
  EXPECT_EQ(error_message<th::NotFoundError>([&] { th::verify_checkpoints(out, dir.path()); }),
            "No checkpoint state file in '" + dir.path() + "'");
  EXPECT_EQ(error_message<th::NotFoundError>([&] { th::print_checkpoint(out, dir.path()); }),
            "No checkpoint state file in '" + dir.path() + "'");
  EXPECT_EQ(out.str(), "");
}

// ---- The `trainhooks` binary ------------------------------------------------------------------

struct Result {
  std::string output;  // stdout, then stderr
  int status = -1;
};

Result run_cli(const std::string& args) {
  const std::string command = std::string("timeout 60 ") + TRAINHOOKS_CLI + " " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return {};
  Result r;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), pipe)) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST_F(InspectCheckpointTest, CliExitsWithZeroOnlyWhenEverythingIsFine) {
  Result r = run_cli("checkpoint list " + dir.path());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, list());
  r = run_cli("checkpoint inspect " + dir.path() + " --tensor scale --tensor net/weight");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, inspect(dir.path(), {.tensors = {"scale", "net/weight"}}));
  r = run_cli("checkpoint inspect --json " + ckpt(0));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["global_step"], 0);
  r = run_cli("checkpoint verify " + dir.path());
  EXPECT_EQ(r.status, 0) << r.output;

  r = run_cli("checkpoint inspect " + dir.path() + " --tensor nope");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output,
            "trainhooks checkpoint: Variable 'nope' not found in checkpoint '" + ckpt(2) + "'\n");
  r = run_cli("checkpoint list " + dir.file("nope"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "trainhooks checkpoint: Checkpoint directory '" + dir.file("nope") +
                          "' does not exist\n");
  fs::remove(dir.file("checkpoint"));
  r = run_cli("checkpoint list " + dir.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "trainhooks checkpoint: No checkpoint state file in '" + dir.path() +
                          "'; it holds checkpoints that no state file lists: model.ckpt-0, "
                          "model.ckpt-2 (give one by its path)\n");

  th::testing::flip_byte(ckpt(2), 100);
  r = run_cli("checkpoint verify " + ckpt(2));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, ::testing::StartsWith("CORRUPT " + ckpt(2) + ": "));
  r = run_cli("checkpoint verify " + ckpt(0));
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST_F(InspectCheckpointTest, CliTakesSeveralTensorNamesAndTheTrainstateFile) {
  const std::string expected = inspect(ckpt(2), {.tensors = {"scale", "net/weight"}});
  for (const std::string& args :
       {ckpt(2) + " --tensor scale net/weight", ckpt(2) + " --tensor scale --tensor net/weight",
        "--tensor scale net/weight -- " + ckpt(2),
        ckpt(2) + ".trainstate --tensor scale net/weight"}) {
    Result r = run_cli("checkpoint inspect " + args);
    EXPECT_EQ(r.status, 0) << args << "\n" << r.output;
    EXPECT_EQ(r.output, expected) << args;
  }
  Result r = run_cli("checkpoint verify " + ckpt(2) + ".trainstate");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "OK " + ckpt(2) + " (step 2, 3 variables, 9110 bytes)\n");
}

TEST_F(InspectCheckpointTest, CliSaysWhenAPathIsNotACheckpoint) {
  const std::string text = dir.file("notes.txt");
  th::testing::write_file_bytes(text, "not a checkpoint\n");
  // Each start of the tool loads LibTorch (seconds): one command per case.
  Result r = run_cli("checkpoint inspect " + text);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "trainhooks checkpoint: '" + text +
                          "' is not a checkpoint: a checkpoint has a training-state file beside "
                          "it, and '" +
                          text + ".trainstate' does not exist\n");
  r = run_cli("checkpoint verify " + text);
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output,
              ::testing::StartsWith("trainhooks checkpoint: '" + text + "' is not a checkpoint: "));
  r = run_cli("checkpoint verify " + dir.file("checkpoint"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "trainhooks checkpoint: '" + dir.file("checkpoint") +
                          "' is a checkpoint state file, not a checkpoint; give its directory, '" +
                          dir.path() + "'\n");
  r = run_cli("checkpoint inspect " + dir.file("model.ckpt-7"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "trainhooks checkpoint: '" + dir.file("model.ckpt-7") + "' does not exist\n");
  // A directory where a file should be.
  fs::remove(dir.file("checkpoint"));
  fs::create_directory(dir.file("checkpoint"));
  r = run_cli("checkpoint list " + dir.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "trainhooks checkpoint: Cannot read the checkpoint state '" +
                          dir.file("checkpoint") + "': it is a directory, not a file\n");
  // Checkpoints without a state file are named.
  fs::remove(dir.file("checkpoint"));
  r = run_cli("checkpoint verify " + dir.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "trainhooks checkpoint: No checkpoint state file in '" + dir.path() +
                          "'; it holds checkpoints that no state file lists: model.ckpt-0, "
                          "model.ckpt-2 (give one by its path)\n");
}

// The state file lists paths relative to its directory: a copy's verify reads the copy's files.
TEST_F(InspectCheckpointTest, CliVerifyOfACopyReadsTheCopy) {
  th::testing::TempDir elsewhere;
  const std::string copy = elsewhere.file("copy");
  fs::copy(dir.path(), copy, fs::copy_options::recursive);
  th::testing::flip_byte(copy + "/model.ckpt-2", 100);
  Result r = run_cli("checkpoint verify " + copy);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "OK " + copy + "/model.ckpt-0 (step 0, 3 variables, 8102 bytes)\n" +
                          "CORRUPT " + copy + "/model.ckpt-2: Checkpoint file '" + copy +
                          "/model.ckpt-2' is corrupt: its CRC32C does not match the one recorded "
                          "in '" +
                          copy + "/model.ckpt-2.trainstate'\n1 of 2 checkpoints OK\n");
  r = run_cli("checkpoint verify " + dir.path());
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST(InspectCheckpointCliTest, UsageErrorsExitWithTwoAndSayWhatIsValid) {
  Result r = run_cli("bogus");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.output,
            "trainhooks: unknown subcommand 'bogus'; valid subcommands: checkpoint, events, graph, "
            "board, report (see trainhooks --help)\n");
  r = run_cli("checkpoint lst runs");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.output,
            "trainhooks checkpoint: unknown subcommand 'lst'; valid subcommands: list, inspect, "
            "verify, export (see trainhooks checkpoint --help)\n");
  r = run_cli("");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.output,
            "trainhooks: a subcommand is required; valid subcommands: checkpoint, events, graph, "
            "board, report (see trainhooks --help)\n");
  r = run_cli("checkpoint list");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(
      r.output,
      "trainhooks checkpoint list: DIR is required (see trainhooks checkpoint list --help)\n");
  r = run_cli("checkpoint inspect a b");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.output,
            "trainhooks checkpoint inspect: The following argument was not expected: b (see "
            "trainhooks checkpoint inspect --help)\n");
  r = run_cli("checkpoint --bogus list x");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.output,
            "trainhooks checkpoint: unknown option '--bogus' (see trainhooks checkpoint --help)\n");

  r = run_cli("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.output, HasSubstr("checkpoint"));
}

TEST(InspectCheckpointCliTest, VersionPrintsTheProjectVersion) {
  const Result r = run_cli("--version");
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.output, ::testing::MatchesRegex("trainhooks [0-9]+\\.[0-9]+\\.[0-9]+\n"));
  const std::string cmake = th::testing::read_file_bytes(TRAINHOOKS_SOURCE_DIR "/CMakeLists.txt");
  const size_t at = cmake.find("project(trainhooks VERSION ");
  ASSERT_NE(at, std::string::npos);
  const size_t start = at + std::string("project(trainhooks VERSION ").size();
  EXPECT_EQ(r.output, "trainhooks " + cmake.substr(start, cmake.find(' ', start) - start) + "\n");
}

}  // namespace inspect_checkpoint_test
