// The seed program's flags, errors and exit statuses (docs/guide.md, "Exit statuses of the
// examples"): --help, usage errors (2), errors as one line naming the file and the cause (1),
// never an abort; SIGTERM and SIGINT (128 + the signal, or --preempted_exit_code); a final save
// that fails after SIGTERM (1, with the steps lost).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/child_process.h"
#include "test_util.h"

namespace th = trainhooks;
namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace seed_linear_regression_exit_test {

const std::string kSeed = TRAINHOOKS_BINARY_DIR "/examples/seed_linear_regression";
constexpr char kPrefix[] = "seed_linear_regression: ";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

struct Result {
  int status = -1;               // waitpid status
  std::vector<std::string> out;  // stdout lines
  std::vector<std::string> err;  // stderr lines
  int exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
  // The program's own lines on stderr (the log's are INFO:..., WARNING:..., ERROR:...).
  std::vector<std::string> messages() const {
    std::vector<std::string> m;
    for (const auto& l : err)
      if (l.starts_with(kPrefix)) m.push_back(l);
    return m;
  }
  std::string describe() const {
    std::string s = th::testing::describe_status(status) + "\nstderr:\n";
    for (const auto& l : err) s += l + "\n";
    return s;
  }
};

class SeedExitTest : public ::testing::Test {
 protected:
  // Runs argv (the seed with `args` unless `argv` is given whole) to its end.
  Result run(const std::vector<std::string>& args, std::vector<std::string> argv = {}) {
    if (argv.empty()) argv.push_back(kSeed);
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string err = dir.file("stderr-" + std::to_string(++runs_) + ".txt");
    th::testing::ChildProcess child(argv, err);
    auto status = child.wait(120);
    Result r{status ? *status : child.kill_and_reap(), child.lines(),
             lines_of(th::testing::read_text(err))};
    EXPECT_TRUE(status.has_value()) << "still running after 120 s";
    return r;
  }

  // The program failed with one line of its own, last on stderr but for `trailing` lines (an
  // event file closed at exit saying what it could not write); returns it.
  std::string one_error_line(const Result& r, int expected_exit, size_t trailing = 0) {
    EXPECT_EQ(r.exit_code(), expected_exit) << r.describe();
    const auto m = r.messages();
    EXPECT_EQ(m.size(), 1u) << r.describe();
    EXPECT_GT(r.err.size(), trailing);
    if (m.size() != 1 || r.err.size() <= trailing) return "";
    EXPECT_EQ(r.err[r.err.size() - 1 - trailing], m[0]) << r.describe();
    return m[0];
  }

  th::testing::TempDir dir;
  int runs_ = 0;
};

TEST_F(SeedExitTest, HelpListsTheFlagsAndNeitherTrainsNorWritesFiles) {
  const std::string cwd = dir.file("cwd");
  fs::create_directory(cwd);
  auto r = run({}, {"/bin/sh", "-c", "cd \"$1\" && exec \"$2\" --help", "sh", cwd, kSeed});
  EXPECT_EQ(r.exit_code(), 0) << r.describe();
  const std::string help = ::testing::PrintToString(r.out);
  for (const char* flag : {"--steps", "--model", "--logdir", "--checkpoint_dir", "--save_steps",
                           "--preempted_exit_code"})
    EXPECT_THAT(help, HasSubstr(flag));
  EXPECT_THAT(help, ::testing::Not(HasSubstr("Loss value")));
  EXPECT_TRUE(fs::is_empty(cwd)) << "--help wrote files";
}

TEST_F(SeedExitTest, UsageErrorsNameTheFlagAndExitWithTwo) {
  const std::string model = dir.file("model.pt");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--steps", "abc"}, "--steps: must be a positive integer, got 'abc'"},
      {{"--steps", "-1"}, "--steps: must be a positive integer, got '-1'"},
      {{"--steps", "0"}, "--steps: must be a positive integer, got '0'"},
      {{"--steps", "5x"}, "--steps: must be a positive integer, got '5x'"},
      {{"--save_steps", "abc"}, "--save_steps: must be a positive integer, got 'abc'"},
      {{"--steps", "--model", model},
       "--steps: value missing (the next argument is the flag '--model')"},
      {{"--model", "--steps", "5"},
       "--model: value missing (the next argument is the flag '--steps')"},
      {{"--steps"}, "--steps: 1 required INT:POSITIVE missing"},
      {{"--steps", "5", "stray"}, "The following argument was not expected: stray"},
      {{"--bogus", "1"}, "The following arguments were not expected: 1 --bogus"},
      {{"--preempted_exit_code", "256"}, "--preempted_exit_code: Value 256 not in range 0 to 255"},
  };
  for (const auto& [args, text] : cases) {
    auto r = run(args);
    EXPECT_EQ(one_error_line(r, 2), kPrefix + text + " (see --help)")
        << ::testing::PrintToString(args);
    EXPECT_TRUE(r.out.empty()) << ::testing::PrintToString(args);
  }
  EXPECT_FALSE(fs::exists(model));
}

TEST_F(SeedExitTest, TheEqualsFormOfAFlagWorks) {
  auto r = run({"--steps=5", "--model=" + dir.file("model.pt")});
  ASSERT_EQ(r.exit_code(), 0) << r.describe();
  int losses = 0;
  for (const auto& l : r.out) losses += l.starts_with("Loss value: ");
  EXPECT_EQ(losses, 5);
  EXPECT_THAT(r.out.back(), ::testing::EndsWith(", global_step = 5"));
}

TEST_F(SeedExitTest, AGarbledStateFileIsAnErrorNamingIt) {
  const std::string ckpt = dir.file("ckpt");
  fs::create_directory(ckpt);
  std::ofstream(ckpt + "/checkpoint") << "model_checkpoint_path: \"model.ckpt-5\n\x01\x02garbage";
  auto r = run({"--steps", "5", "--model", dir.file("model.pt"), "--checkpoint_dir", ckpt});
  const std::string line = one_error_line(r, 1);
  EXPECT_THAT(line, HasSubstr(ckpt + "/checkpoint"));
}

TEST_F(SeedExitTest, NoUsableCheckpointIsAnErrorNamingIt) {
  const std::string ckpt = dir.file("ckpt");
  ASSERT_EQ(
      run({"--steps", "5", "--model", dir.file("first.pt"), "--checkpoint_dir", ckpt}).exit_code(),
      0);
  // Every listed checkpoint's variables file is garbage.
  for (const auto& e : fs::directory_iterator(ckpt)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("model.ckpt-") && !name.ends_with(".trainstate"))
      std::ofstream(e.path(), std::ios::trunc) << "not a checkpoint";
  }
  auto r = run({"--steps", "5", "--model", dir.file("model.pt"), "--checkpoint_dir", ckpt});
  const std::string line = one_error_line(r, 1);
  EXPECT_THAT(line, HasSubstr(ckpt));
  EXPECT_FALSE(fs::exists(dir.file("model.pt")));
}

TEST_F(SeedExitTest, ACheckpointDirThatIsAFileIsAnErrorNamingIt) {
  const std::string ckpt = dir.file("ckpt");
  std::ofstream(ckpt) << "a file\n";
  auto r = run({"--steps", "5", "--model", dir.file("model.pt"), "--checkpoint_dir", ckpt});
  const std::string line = one_error_line(r, 1);
  EXPECT_THAT(line, HasSubstr(ckpt));
}

TEST_F(SeedExitTest, AModelThatCannotBeSavedIsAnErrorAtTheEnd) {
  const std::string model = dir.file("missing/model.pt");
  auto r = run({"--steps", "5", "--model", model});
  EXPECT_EQ(one_error_line(r, 1),
            kPrefix + ("Parent directory of " + model + " doesn't exist, can't save."));
  // Trained, then failed in close(): no final line.
  EXPECT_EQ(r.out.front(), "Starting at global step 0");
  EXPECT_THAT(r.out.back(), StartsWith("Loss value: "));
}

// Whether this process may run a command in a mount namespace of its own (root, unshare): a
// small file system mounted there is seen by that command alone and vanishes with it.
const std::string kUnshare = "/usr/bin/unshare";

bool can_mount_privately() {
  if (::geteuid() != 0 || !fs::exists(kUnshare)) return false;
  int status = 0;
  th::testing::run_command(
      kUnshare + " -m /bin/sh -c 'mount -t tmpfs -o size=4k tmpfs /mnt' >/dev/null 2>&1", status);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// argv running `script` (with $1 = `mount_point`) in a private mount namespace, then the seed.
std::vector<std::string> in_namespace(const std::string& script, const std::string& mount_point) {
  return {kUnshare, "-m", "/bin/sh", "-c", script + " && exec \"$0\" \"$@\"", kSeed, mount_point};
}

TEST_F(SeedExitTest, AFullDiskIsAnErrorNamingTheFile) {
  if (!can_mount_privately()) GTEST_SKIP() << "needs root and unshare to mount a small file system";
  const std::string mnt = dir.file("mnt");
  fs::create_directory(mnt);
  // A 64 KiB file system, filled before the program starts.
  auto r = run({"--steps", "5", "--model", mnt + "/model.pt", "--checkpoint_dir", mnt + "/ckpt"},
               in_namespace("mount -t tmpfs -o size=64k tmpfs \"$1\" && "
                            "{ cat /dev/zero > \"$1/fill\" 2>/dev/null; true; } && shift",
                            mnt));
  // The event file beside the checkpoints could not be written either: closed at exit, it says
  // how many events it dropped.
  const std::string line = one_error_line(r, 1, /*trailing=*/1);
  EXPECT_THAT(line, HasSubstr(mnt + "/"));
  EXPECT_THAT(line, HasSubstr("No space left on device"));
  EXPECT_THAT(r.err.back(), AllOf(HasSubstr("ERROR:trainhooks:Closed " + mnt + "/ckpt/events.out"),
                                  HasSubstr("events dropped.")));
}

TEST_F(SeedExitTest, AReadOnlyCheckpointDirIsAnErrorNamingIt) {
  if (!can_mount_privately()) GTEST_SKIP() << "needs root and unshare to mount read-only";
  const std::string ckpt = dir.file("ckpt");
  ASSERT_EQ(
      run({"--steps", "5", "--model", dir.file("first.pt"), "--checkpoint_dir", ckpt}).exit_code(),
      0);
  // The same directory, read-only for the second run: it restores, then cannot save.
  auto r = run(
      {"--steps", "5", "--model", dir.file("model.pt"), "--checkpoint_dir", ckpt},
      in_namespace("mount --bind \"$1\" \"$1\" && mount -o remount,bind,ro \"$1\" && shift", ckpt));
  const std::string line = one_error_line(r, 1);
  EXPECT_THAT(line, HasSubstr(ckpt));
  EXPECT_THAT(line, HasSubstr("Read-only file system"));
}

// Starts a long run and waits until it has trained past its first checkpoint (step 0).
std::unique_ptr<th::testing::ChildProcess> start_long_run(const std::vector<std::string>& args,
                                                          const std::string& err) {
  std::vector<std::string> argv = {kSeed, "--steps", "100000000", "--save_steps", "100000000"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto child = std::make_unique<th::testing::ChildProcess>(argv, err);
  int losses = 0;
  child->wait_for_line([&](const std::string&) { return ++losses == 300; }, 60);
  return child;
}

TEST_F(SeedExitTest, ASignalStopsAfterSavingWithTheSignalsExitStatus) {
  const std::string ckpt = dir.file("ckpt");
  const std::string err = dir.file("stderr.txt");
  auto child = start_long_run({"--model", dir.file("model.pt"), "--checkpoint_dir", ckpt}, err);
  child->send(SIGTERM);
  auto status = child->wait(60);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(th::testing::describe_status(*status), "exited with 143")
      << th::testing::read_text(err);
  const std::regex stopped("Stopped by SIGTERM at step ([0-9]+); the checkpoint is in " + ckpt +
                           "\\. Run the same command again to continue\\.");
  std::smatch m;
  ASSERT_FALSE(child->lines().empty());
  ASSERT_TRUE(std::regex_match(child->lines().back(), m, stopped)) << child->lines().back();
  const std::string step = m[1];
  EXPECT_TRUE(fs::exists(ckpt + "/model.ckpt-" + step));
  // The same command continues from there.
  auto again = run({"--steps", "5", "--model", dir.file("model.pt"), "--checkpoint_dir", ckpt});
  ASSERT_EQ(again.exit_code(), 0) << again.describe();
  EXPECT_EQ(again.out.front(), "Starting at global step " + step);
}

TEST_F(SeedExitTest, ThePreemptedExitCodeIsAnOption) {
  const std::string err = dir.file("stderr.txt");
  auto child =
      start_long_run({"--model", dir.file("model.pt"), "--preempted_exit_code", "75"}, err);
  child->send(SIGINT);
  auto status = child->wait(60);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(th::testing::describe_status(*status), "exited with 75") << th::testing::read_text(err);
  ASSERT_FALSE(child->lines().empty());
  EXPECT_THAT(child->lines().back(),
              ::testing::MatchesRegex("Stopped by SIGINT at step [0-9]+\\."));
}

// The case: a final save that fails after SIGTERM once ended with status 0.
TEST_F(SeedExitTest, AFinalSaveThatFailsAfterSigtermExitsWithOneAndTheStepsLost) {
  const std::string ckpt = dir.file("ckpt");
  const std::string err = dir.file("stderr.txt");
  auto child = start_long_run({"--model", dir.file("model.pt"), "--checkpoint_dir", ckpt}, err);
  ASSERT_TRUE(fs::exists(ckpt + "/model.ckpt-0"));
  // As root, permissions do not stop writes; a regular file where the directory was does.
  fs::rename(ckpt, ckpt + ".moved");
  std::ofstream(ckpt) << "not a directory\n";
  child->send(SIGTERM);
  auto status = child->wait(60);
  ASSERT_TRUE(status.has_value());
  Result r{*status, child->lines(), lines_of(th::testing::read_text(err))};
  const std::string line = one_error_line(r, 1);
  const std::regex expected(
      std::string(kPrefix) + "Parent directory of " + ckpt +
      "/model\\.ckpt-([0-9]+) doesn't exist, can't save; steps "
      "1\\.\\.([0-9]+) since the last checkpoint \\(step 0\\) were not saved");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(line, m, expected)) << line;
  EXPECT_EQ(m[1], m[2]);  // lost: every step after 0, up to the one it could not save
  // The other hooks' end() still ran: MyHook saved the model.
  EXPECT_TRUE(fs::exists(dir.file("model.pt")));
}

}  // namespace seed_linear_regression_exit_test
