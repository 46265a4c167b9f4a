// `trainhooks board` and `trainhooks report` as a user runs them: the built binary, its output
// lines and exit statuses. The served board runs as a child process that the test owns: bounded
// waits, killed on failure.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainhooks/board/board_server.h"
#include "trainhooks/summary/event_writer.h"

#include "summary/summary_test_util.h"

extern char** environ;

namespace trainhooks {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

using trainhooks::summary::testing::TempDir;

struct Result {
  std::string out;
  std::string err;
  int status = -1;
};

// Runs the tool to completion (at most 60 s), stdout and stderr apart.
Result run_cli(const std::vector<std::string>& args, const fs::path& scratch) {
  std::string command = std::string("timeout 60 ") + TRAINHOOKS_CLI;
  for (const std::string& a : args) command += " '" + a + "'";
  const fs::path err = scratch / "stderr.txt";
  command += " 2>'" + err.string() + "'";
  Result r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), pipe)) r.out.append(buf, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err);
  r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  fs::remove(err);
  return r;
}

// `trainhooks board ...` in the background, its stdout on a pipe.
class BoardProcess {
 public:
  explicit BoardProcess(const std::vector<std::string>& args) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    std::vector<std::string> argv_strings{TRAINHOOKS_CLI, "board"};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, TRAINHOOKS_CLI, &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    out_ = fds[0];
  }
  ~BoardProcess() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
  }

  // The first line of stdout, waiting at most `timeout`.
  std::optional<std::string> first_line(std::chrono::seconds timeout) {
    const auto deadline = SteadyClock::now() + timeout;
    std::string text;
    while (text.find('\n') == std::string::npos) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[256];
      const ssize_t n = ::read(out_, buf, sizeof(buf));
      if (n <= 0) return std::nullopt;  // exited
      text.append(buf, static_cast<size_t>(n));
    }
    return text.substr(0, text.find('\n'));
  }

  // The exit status after `signal`, or nullopt if it did not exit within `timeout`.
  std::optional<int> stop_with(int signal, std::chrono::seconds timeout) {
    ::kill(pid_, signal);
    const auto deadline = SteadyClock::now() + timeout;
    while (SteadyClock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return status_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }

  bool started() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::optional<int> status_;
};

class BoardCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      summary::EventWriter w(logdir_ / "train");
      for (int step = 1; step <= 5; ++step) w.add_scalar("loss", 1.0f / step, step);
      w.add_text("note", "hi", 1);
    }
    summary::EventWriter w(logdir_ / "eval");
    w.add_scalar("loss", 0.5f, 5);
  }

  TempDir dir_;
  fs::path logdir_ = dir_.path() / "logs";
};

TEST_F(BoardCommandTest, ReportWritesTheFileAndSaysSo) {
  const fs::path out = dir_.path() / "report.html";
  const Result r =
      run_cli({"report", logdir_.string(), "-o", out.string(), "--title", "Exp"}, dir_.path());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "trainhooks report: wrote " + out.string() + " (2 runs, 3 tags)\n");
  EXPECT_EQ(r.err, "");
  std::ifstream in(out);
  const std::string html{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_THAT(html, ::testing::HasSubstr("window.TRAINHOOKS_REPORT = {\"title\": \"Exp\""));
}

TEST_F(BoardCommandTest, ReportErrorsAreOneLineAndExitStatus1) {
  const fs::path missing = dir_.path() / "nope";
  Result r =
      run_cli({"report", missing.string(), "-o", (dir_.path() / "r.html").string()}, dir_.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "trainhooks report: log directory '" + missing.string() + "' does not exist\n");
  EXPECT_FALSE(fs::exists(dir_.path() / "r.html"));

  r = run_cli({"report", logdir_.string(), "-o", (dir_.path() / "no" / "r.html").string()},
              dir_.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, ::testing::StartsWith("trainhooks report: "));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
}

TEST_F(BoardCommandTest, UsageErrorsExitWithStatus2) {
  EXPECT_EQ(run_cli({"report", logdir_.string()}, dir_.path()).status, 2) << "no -o";
  EXPECT_EQ(run_cli({"report", logdir_.string(), "-o", "x.html", "--max-points", "1"}, dir_.path())
                .status,
            2);
  EXPECT_EQ(run_cli({"board"}, dir_.path()).status, 2) << "no LOGDIR";
  EXPECT_EQ(run_cli({"board", logdir_.string(), "--port", "70000"}, dir_.path()).status, 2);
  EXPECT_EQ(run_cli({"board", logdir_.string(), "--reload-interval", "0"}, dir_.path()).status, 2);
}

TEST_F(BoardCommandTest, BoardServesUntilSigtermThenExits0) {
  for (const int signal : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(signal);
    BoardProcess board({logdir_.string(), "--port", "0", "--reload-interval", "0.2"});
    ASSERT_TRUE(board.started());
    const std::optional<std::string> line = board.first_line(std::chrono::seconds(20));
    ASSERT_TRUE(line) << "no line printed";
    std::smatch m;
    const std::regex expected("trainhooks board: serving " + logdir_.string() +
                              R"( at http://127\.0\.0\.1:(\d+)/ \(Ctrl-C to stop\))");
    ASSERT_TRUE(std::regex_match(*line, m, expected)) << *line;
    httplib::Client client("127.0.0.1", std::stoi(m[1]));
    client.set_connection_timeout(5);
    client.set_read_timeout(10);
    // It listens before it has read the log directory: the runs appear once the background
    // read has run.
    size_t runs = 0;
    for (const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
         runs < 2 && SteadyClock::now() < deadline;) {
      const auto res = client.Get("/api/runs");
      ASSERT_TRUE(res);
      ASSERT_EQ(res->status, 200);
      runs = json::parse(res->body)["runs"].size();
      if (runs < 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(runs, 2u);
    EXPECT_EQ(board.stop_with(signal, std::chrono::seconds(10)), 0);
  }
}

TEST_F(BoardCommandTest, BoardErrorsAreOneLineAndExitStatus1) {
  const fs::path missing = dir_.path() / "nope";
  Result r = run_cli({"board", missing.string(), "--port", "0"}, dir_.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "trainhooks board: log directory '" + missing.string() + "' does not exist\n");

  board::BoardServer taken(logdir_, {.port = 0});
  taken.start();
  r = run_cli({"board", logdir_.string(), "--port", std::to_string(taken.port())}, dir_.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, ::testing::MatchesRegex("trainhooks board: cannot listen on 127\\.0\\.0\\.1:" +
                                             std::to_string(taken.port()) + ": .*in use\n"));
}

}  // namespace
}  // namespace trainhooks
