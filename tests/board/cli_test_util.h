// The `trainhooks` binary as a user runs it, for the board's command-line tests: run to
// completion with stdout and stderr apart, or `trainhooks board` in the background as a child
// process that the test owns (bounded waits, killed on failure).
//
//   const CliResult r = run_cli({"report", "runs", "-o", "r.html"}, scratch_dir);
//   BoardProcess board({"runs", "--port", "0"}, scratch_dir);
//   const auto line = board.first_line(std::chrono::seconds(20));   // "... serving ..."
//   board.stop_with(SIGTERM, std::chrono::seconds(10));             // its exit status
//
// Header-only: the board's test program is built from tests/board/*_test.cpp.
#pragma once

#include <fcntl.h>
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
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace trainhooks::board::testing {

struct CliResult {
  std::string out;
  std::string err;
  int status = -1;
};

inline std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs the tool to completion (at most 60 s), stdout and stderr apart; `scratch` holds stderr
// meanwhile.
inline CliResult run_cli(const std::vector<std::string>& args,
                         const std::filesystem::path& scratch) {
  std::string command = std::string("timeout 60 ") + TRAINHOOKS_CLI;
  for (const std::string& a : args) command += " '" + a + "'";
  const std::filesystem::path err = scratch / "stderr.txt";
  command += " 2>'" + err.string() + "'";
  CliResult r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), pipe)) r.out.append(buf, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_text_file(err);
  std::filesystem::remove(err);
  return r;
}

// `trainhooks board ...` in the background, its stdout on a pipe and its stderr in a file of
// `scratch`.
class BoardProcess {
 public:
  using Clock = std::chrono::steady_clock;

  BoardProcess(const std::vector<std::string>& args, const std::filesystem::path& scratch)
      : err_path_(scratch / "board-stderr.txt") {
    int fds[2];
    if (::pipe(fds) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
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
  BoardProcess(const BoardProcess&) = delete;
  BoardProcess& operator=(const BoardProcess&) = delete;

  // The first line of stdout, waiting at most `timeout`.
  std::optional<std::string> first_line(std::chrono::seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    std::string text;
    while (text.find('\n') == std::string::npos) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
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
  std::optional<int> stop_with(int signal, std::chrono::milliseconds timeout) {
    ::kill(pid_, signal);
    return exit_status(timeout);
  }

  // The exit status once it exits by itself, or nullopt if it did not within `timeout`.
  std::optional<int> exit_status(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return status_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }

  // What it wrote to stderr so far.
  std::string err() const { return read_text_file(err_path_); }

  bool started() const { return pid_ > 0; }

 private:
  std::filesystem::path err_path_;
  pid_t pid_ = -1;
  int out_ = -1;
  std::optional<int> status_;
};

}  // namespace trainhooks::board::testing
