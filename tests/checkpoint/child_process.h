// A child process owned by a test: started with posix_spawn, its stdout read line by line
// through a pipe, every wait bounded, killed (SIGKILL) and reaped at destruction.
//
//   th::testing::ChildProcess child({binary, "--dir", dir}, dir + "/stderr.txt");
//   ASSERT_TRUE(child.wait_for_line([](const std::string& l) { return l == "step 3"; }, 30));
//   child.send(SIGTERM);
//   std::optional<int> status = child.wait(60);   // a waitpid status, nullopt on timeout
//
// SIGTERM and SIGINT start with their default dispositions in the child, whatever the test
// process inherited (a shell's background job ignores SIGINT).
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace trainhooks::testing {

class ChildProcess {
 public:
  // stderr goes to `stderr_path` (appended), or is inherited when empty. Throws
  // std::runtime_error when the process cannot be started.
  ChildProcess(const std::vector<std::string>& argv, const std::string& stderr_path = "");
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running() const { return !status_; }

  // Reads stdout until a complete line satisfies `pred` (returned) or `timeout_secs` pass or
  // stdout ends (nullopt).
  std::optional<std::string> wait_for_line(const std::function<bool(const std::string&)>& pred,
                                           double timeout_secs);
  // Every complete stdout line read so far.
  const std::vector<std::string>& lines() const { return lines_; }

  // kill(pid, sig) while the child has not been reaped.
  void send(int sig);
  // Waits up to `timeout_secs` for the child to end, reading its stdout meanwhile; the waitpid
  // status, or nullopt when it is still running.
  std::optional<int> wait(double timeout_secs);
  // SIGKILL (if still running) and reap; the status.
  int kill_and_reap();

 private:
  // Reads what stdout has, waiting at most `timeout_ms`; false at its end.
  bool pump(int timeout_ms);
  bool reap(bool block);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string partial_;
  std::vector<std::string> lines_;
  size_t scanned_ = 0;  // lines_ already offered to wait_for_line
  std::optional<int> status_;
};

// "exited with 3", "killed by signal 9", ... for assertion messages.
std::string describe_status(int status);

// ---- checkpoint_trainer (tests/tools/checkpoint_trainer.cpp) ----------------------------------

// Its path in the build tree.
std::string checkpoint_trainer_path();

// {checkpoint_trainer, args...}.
std::vector<std::string> trainer_argv(const std::vector<std::string>& args);

struct TrainerRun {
  std::optional<int> status;  // nullopt: it was still running after the timeout (then killed)
  std::vector<std::string> lines;
  bool exited_cleanly() const;  // exit code 0
};

// Runs checkpoint_trainer to its end, its log appended to `log_path`.
TrainerRun run_trainer(const std::vector<std::string>& args, const std::string& log_path,
                       double timeout_secs = 120);

// N of every `step N` line, in order.
std::vector<int64_t> printed_steps(const std::vector<std::string>& lines);

// A whole file ("" when it cannot be read).
std::string read_text(const std::string& path);

}  // namespace trainhooks::testing
