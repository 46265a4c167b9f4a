// `trainhooks board` and `trainhooks report` as a user runs them: the built binary, its output
// lines and exit statuses. The served board runs as a child process that the test owns: bounded
// waits, killed on failure.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
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

#include "board/cli_test_util.h"
#include "board/raw_http_client.h"
#include "summary/summary_test_util.h"

namespace trainhooks {
namespace board_command_test {

namespace fs = std::filesystem;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

using board::testing::BoardProcess;
using board::testing::RawConnection;
using board::testing::read_text_file;
using trainhooks::summary::testing::TempDir;
using Result = board::testing::CliResult;

Result run_cli(const std::vector<std::string>& args, const fs::path& scratch) {
  return board::testing::run_cli(args, scratch);
}

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

  // The directory missing is named, not the temporary file that would have been written in it.
  const fs::path no_dir = dir_.path() / "no" / "such";
  r = run_cli({"report", logdir_.string(), "-o", (no_dir / "r.html").string()}, dir_.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "trainhooks report: cannot write report to '" + (no_dir / "r.html").string() +
                       "': directory '" + no_dir.string() + "' does not exist\n");
}

TEST_F(BoardCommandTest, ReportNeverReplacesADirectory) {
  const Result r = run_cli({"report", logdir_.string(), "-o", dir_.path().string()}, dir_.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "trainhooks report: cannot write report to '" + dir_.path().string() +
                       "': it is a directory\n");
}

TEST_F(BoardCommandTest, ReportIntoAFullDeviceFailsAndSaysSo) {
  const Result r = run_cli({"report", logdir_.string(), "-o", "/dev/full"}, dir_.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "trainhooks report: cannot write report to '/dev/full': No space left on device\n");
  struct stat st {};
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST_F(BoardCommandTest, ReportIntoStdoutLeavesStdoutToIt) {
  // The report is what stdout carries, and the line that says so goes to stderr.
  const Result r = run_cli({"report", logdir_.string(), "-o", "/dev/stdout"}, dir_.path());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::StartsWith("<!doctype html>"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("window.TRAINHOOKS_REPORT = "));
  EXPECT_EQ(r.err, "trainhooks report: wrote /dev/stdout (2 runs, 3 tags)\n");
}

TEST_F(BoardCommandTest, ReportIntoAFifoNoOneReadsSaysSo) {
  const fs::path fifo = dir_.path() / "report.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const Result r = run_cli({"report", logdir_.string(), "-o", fifo.string()}, dir_.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "trainhooks report: cannot write report to '" + fifo.string() +
                       "': it is a FIFO that no process is reading\n");
}

TEST_F(BoardCommandTest, ReportIntoAFifoWritesIntoIt) {
  const fs::path fifo = dir_.path() / "report.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  std::thread drain([&] {
    // Until the writer has been and gone; bounded by the command's own timeout.
    char buf[65536];
    bool seen_writer = false;
    for (int waited = 0; waited < 60'000;) {
      const ssize_t n = ::read(reader, buf, sizeof(buf));
      if (n > 0) {
        received.append(buf, static_cast<size_t>(n));
        seen_writer = true;
      } else if (n == 0 && seen_writer) {
        break;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        waited += 5;
      }
    }
  });
  const Result r = run_cli({"report", logdir_.string(), "-o", fifo.string()}, dir_.path());
  drain.join();
  ::close(reader);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "trainhooks report: wrote " + fifo.string() + " (2 runs, 3 tags)\n");
  EXPECT_THAT(received, ::testing::StartsWith("<!doctype html>"));
  EXPECT_THAT(received, ::testing::EndsWith("</html>\n"));
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST_F(BoardCommandTest, ReportThroughASymlinkWritesItsTarget) {
  const fs::path target = dir_.path() / "site" / "report.html";
  fs::create_directories(target.parent_path());
  { std::ofstream(target) << "old"; }
  const fs::path link = dir_.path() / "latest.html";
  fs::create_symlink(fs::path("site") / "report.html", link);
  Result r = run_cli({"report", logdir_.string(), "-o", link.string()}, dir_.path());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "trainhooks report: wrote " + link.string() + " (2 runs, 3 tags)\n");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(fs::read_symlink(link), fs::path("site") / "report.html");
  EXPECT_THAT(read_text_file(target), ::testing::StartsWith("<!doctype html>"));
  // Crash-safe as a file named directly: nothing else is left in the target's directory.
  EXPECT_EQ(std::distance(fs::directory_iterator(target.parent_path()), fs::directory_iterator()),
            1);
}

TEST_F(BoardCommandTest, ReportThroughADanglingSymlinkCreatesItsTarget) {
  fs::create_directories(dir_.path() / "site");
  const fs::path dangling = dir_.path() / "new.html";
  fs::create_symlink(fs::path("site") / "new-report.html", dangling);
  const Result r = run_cli({"report", logdir_.string(), "-o", dangling.string()}, dir_.path());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(dangling));
  EXPECT_THAT(read_text_file(dir_.path() / "site" / "new-report.html"),
              ::testing::StartsWith("<!doctype html>"));
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
    BoardProcess board({logdir_.string(), "--port", "0", "--reload-interval", "0.2"}, dir_.path());
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

// What the board is for: 200 idle connections and 16 clients sending a header line at a time
// hold no request up and no stop. The server would keep each idle connection 15 s and each slow
// request 10 s: a request answered within the client's 3 s, and an exit within 2 s of SIGTERM,
// are those connections given way, and ended.
TEST_F(BoardCommandTest, BoardAnswersAndStopsWhateverIdleAndSlowClientsDo) {
  BoardProcess board({logdir_.string(), "--port", "0"}, dir_.path());
  ASSERT_TRUE(board.started());
  const std::optional<std::string> line = board.first_line(std::chrono::seconds(20));
  ASSERT_TRUE(line) << "no line printed";
  const int port = std::stoi(line->substr(line->rfind(':') + 1));

  std::vector<RawConnection> idle;
  for (int i = 0; i < 200; ++i) {
    idle.emplace_back(port);
    ASSERT_TRUE(idle.back().connected());
  }
  std::vector<RawConnection> slow;
  for (int i = 0; i < 16; ++i) {
    slow.emplace_back(port);
    ASSERT_TRUE(slow.back().send("GET /api/runs HTTP/1.1\r\nHost: localhost\r\n"));
  }
  std::atomic<bool> done = false;
  std::thread trickle([&] {
    for (int n = 0; !done; ++n) {
      for (RawConnection& c : slow) c.send("X-Slow-" + std::to_string(n) + ": 1\r\n");
      for (int i = 0; i < 25 && !done; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(3);
  client.set_read_timeout(3);
  size_t runs = 0;
  for (const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
       runs < 2 && SteadyClock::now() < deadline;) {
    const auto res = client.Get("/api/runs");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    ASSERT_EQ(res->status, 200);
    runs = json::parse(res->body)["runs"].size();
  }
  EXPECT_EQ(runs, 2u);
  EXPECT_EQ(board.stop_with(SIGTERM, std::chrono::seconds(2)), 0);
  done = true;
  trickle.join();
}

TEST_F(BoardCommandTest, BoardAnswersTheHostsItIsToldTo) {
  BoardProcess board(
      {logdir_.string(), "--port", "0", "--allow-host", "board.lan", "--allow-host", "gpu-box"},
      dir_.path());
  const std::optional<std::string> line = board.first_line(std::chrono::seconds(20));
  ASSERT_TRUE(line) << "no line printed";
  httplib::Client client("127.0.0.1", std::stoi(line->substr(line->rfind(':') + 1)));
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  for (const char* host : {"board.lan:6006", "gpu-box", "localhost:6006"}) {
    SCOPED_TRACE(host);
    const auto res = client.Get("/api/runs", {{"Host", host}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
  }
  const auto res = client.Get("/api/runs", {{"Host", "127.0.0.1.evil.example"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  EXPECT_EQ(json::parse(res->body)["error"],
            "host '127.0.0.1.evil.example' refused: a board listening on 127.0.0.1 answers "
            "requests to localhost, 127.0.0.1, [::1], board.lan, gpu-box only (allow others with "
            "--allow-host)");
  EXPECT_EQ(board.stop_with(SIGTERM, std::chrono::seconds(10)), 0);
}

TEST_F(BoardCommandTest, BoardWarnsWhenItWouldBeReachableFromTheNetwork) {
  // Said before it listens; the port is taken so that it never does (tests stay on loopback).
  board::BoardServer taken(logdir_, {.port = 0});
  taken.start();
  const Result r = run_cli(
      {"board", logdir_.string(), "--host", "0.0.0.0", "--port", std::to_string(taken.port())},
      dir_.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, ::testing::StartsWith(
                         "trainhooks board: warning: --host 0.0.0.0 makes the board reachable "
                         "from the network: anyone who can reach its port can read these runs "
                         "(there is no authentication)\ntrainhooks board: cannot listen on "
                         "0.0.0.0:"));
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

}  // namespace board_command_test
}  // namespace trainhooks
