#include "checkpoint/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace trainhooks::testing {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void fail(const std::string& what, int err) {
  throw std::runtime_error(what + ": " + std::strerror(err));
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::string& stderr_path) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) fail("pipe2", errno);
  out_fd_ = fds[0];

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  if (!stderr_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults, empty;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGINT);
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int err = ::posix_spawn(&pid_, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (err != 0) {
    ::close(out_fd_);
    fail("posix_spawn " + argv[0], err);
  }
  ::fcntl(out_fd_, F_SETFL, ::fcntl(out_fd_, F_GETFL) | O_NONBLOCK);
}

ChildProcess::~ChildProcess() {
  kill_and_reap();
  if (out_fd_ >= 0) ::close(out_fd_);
}

bool ChildProcess::pump(int timeout_ms) {
  if (out_fd_ < 0) return false;
  pollfd p{out_fd_, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return true;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(out_fd_, buffer, sizeof buffer);
    if (n > 0) {
      partial_.append(buffer, static_cast<size_t>(n));
      for (size_t nl; (nl = partial_.find('\n')) != std::string::npos;) {
        lines_.push_back(partial_.substr(0, nl));
        partial_.erase(0, nl + 1);
      }
      continue;
    }
    if (n == 0) {  // every writer closed it: the child (and anything it started) is gone
      ::close(out_fd_);
      out_fd_ = -1;
      return false;
    }
    if (errno == EINTR) continue;
    return true;  // EAGAIN: drained
  }
}

std::optional<std::string> ChildProcess::wait_for_line(
    const std::function<bool(const std::string&)>& pred, double timeout_secs) {
  const double deadline = now_seconds() + timeout_secs;
  for (;;) {
    for (; scanned_ < lines_.size(); ++scanned_) {
      if (pred(lines_[scanned_])) return lines_[scanned_++];
    }
    const double left = deadline - now_seconds();
    if (left <= 0) return std::nullopt;
    if (!pump(static_cast<int>(left * 1000) + 1) && scanned_ == lines_.size()) return std::nullopt;
  }
}

void ChildProcess::send(int sig) {
  if (!status_) ::kill(pid_, sig);
}

bool ChildProcess::reap(bool block) {
  if (status_) return true;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) status_ = status;
  return status_.has_value();
}

std::optional<int> ChildProcess::wait(double timeout_secs) {
  const double deadline = now_seconds() + timeout_secs;
  while (!reap(false)) {
    const double left = deadline - now_seconds();
    if (left <= 0) return std::nullopt;
    // Keep reading: a child blocked on a full pipe would never end.
    if (!pump(static_cast<int>(std::min(left, 0.02) * 1000) + 1)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  pump(0);  // what it wrote before it ended
  return status_;
}

int ChildProcess::kill_and_reap() {
  if (!status_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    reap(true);
  }
  return status_.value_or(-1);
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           ::strsignal(WTERMSIG(status)) + ")";
  }
  return "status " + std::to_string(status);
}

std::string checkpoint_trainer_path() { return TRAINHOOKS_CHECKPOINT_TRAINER; }

std::vector<std::string> trainer_argv(const std::vector<std::string>& args) {
  std::vector<std::string> argv{checkpoint_trainer_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

bool TrainerRun::exited_cleanly() const {
  return status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0;
}

TrainerRun run_trainer(const std::vector<std::string>& args, const std::string& log_path,
                       double timeout_secs) {
  ChildProcess child(trainer_argv(args), log_path);
  TrainerRun run;
  run.status = child.wait(timeout_secs);
  child.kill_and_reap();
  run.lines = child.lines();
  return run;
}

std::vector<int64_t> printed_steps(const std::vector<std::string>& lines) {
  std::vector<int64_t> steps;
  for (const auto& line : lines) {
    if (line.rfind("step ", 0) == 0) steps.push_back(std::stoll(line.substr(5)));
  }
  return steps;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

}  // namespace trainhooks::testing
