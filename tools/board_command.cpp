#include "board_command.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "trainhooks/board/board_api.h"
#include "trainhooks/board/board_server.h"
#include "trainhooks/board/report.h"
#include "trainhooks/errors.h"
#include "trainhooks/summary/event_reader.h"

namespace trainhooks {
namespace {

// Runs `body`; an exception becomes `trainhooks <command>: <message>` on stderr and status 1.
void run(const char* command, const std::function<void()>& body) {
  try {
    body();
    std::cout.flush();
    return;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::string message = e.what();
    message.resize(std::min(message.size(), message.find('\n')));
    std::cerr << "trainhooks " << command << ": " << message << std::endl;
  } catch (...) {
    std::cout.flush();
    std::cerr << "trainhooks " << command << ": unexpected error" << std::endl;
  }
  throw CLI::RuntimeError(1);  // CLI11 exits with this status and prints nothing more
}

// The log directory's absence said plainly, before anything tries to read it. An event file
// given instead is answered with the command that shows it.
void check_logdir(const char* command, const std::string& logdir) {
  std::error_code ec;
  const auto status = std::filesystem::status(logdir, ec);
  if (!std::filesystem::exists(status)) {
    throw NotFoundError(fmt::format("log directory '{}' does not exist", logdir));
  }
  if (std::filesystem::is_directory(status)) return;
  const std::filesystem::path path(logdir);
  if (summary::is_event_file_name(path.filename().string())) {
    const std::string parent = path.parent_path().empty() ? "." : path.parent_path().string();
    throw InvalidArgument(fmt::format(
        "'{}' is an event file; {} reads a log directory, every run in it: give its directory "
        "(trainhooks {} {})",
        logdir, command, command, parent));
  }
  throw InvalidArgument(fmt::format("log directory '{}' is not a directory", logdir));
}

// --reload-interval: a number of seconds in (0, 86400].
std::string check_reload_interval(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(value > 0 && value <= 86400)) {
    return fmt::format("must be a number of seconds above 0 and at most 86400, got '{}'", text);
  }
  return "";
}

std::string check_allowed_host(const std::string& name) {
  try {
    board::check_allowed_host(name);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

struct BoardArgs {
  std::string logdir;
  board::BoardServerOptions server;
};

void run_board(const BoardArgs& args) {
  check_logdir("board", args.logdir);
  // SIGINT and SIGTERM are blocked before any thread starts, so every thread inherits the mask
  // and the signal waits for sigwait() below; the server then stops as on any other stop().
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &signals, &previous);
  struct RestoreMask {
    sigset_t mask;
    ~RestoreMask() { pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{previous};

  // The index follows every event file with an open descriptor: a log directory of thousands of
  // files needs more than the usual soft limit of 1024.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  if (!board::is_loopback_host(args.server.host)) {
    std::cerr << fmt::format(
                     "trainhooks board: warning: --host {} makes the board reachable from the "
                     "network: anyone who can reach its port can read these runs (there is no "
                     "authentication)",
                     args.server.host)
              << std::endl;
  }
  // Listen at once; a large log directory then fills in while the page is open.
  board::BoardServerOptions options = args.server;
  options.load_before_listening = false;
  board::BoardServer server(args.logdir, options);
  server.start();
  const std::string& host = args.server.host;
  const std::string shown_host = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  std::cout << fmt::format("trainhooks board: serving {} at http://{}:{}/ (Ctrl-C to stop)",
                           args.logdir, shown_host, server.port())
            << std::endl;
  int signal = 0;
  sigwait(&signals, &signal);
  server.stop();
}

struct ReportArgs {
  std::string logdir;
  std::string output;
  board::ReportOptions options;
};

void run_report(const ReportArgs& args) {
  check_logdir("report", args.logdir);
  const board::ReportStats stats = board::write_report(args.logdir, args.output, args.options);
  // Written into a device or a pipe (-o /dev/stdout), the report may be what stdout carries.
  std::ostream& out = stats.written_directly ? std::cerr : std::cout;
  out << fmt::format("trainhooks report: wrote {} ({} run{}, {} tag{})", args.output, stats.runs,
                     stats.runs == 1 ? "" : "s", stats.tags, stats.tags == 1 ? "" : "s")
      << std::endl;
}

}  // namespace

void add_board_commands(CLI::App& app) {
  auto board_args = std::make_shared<BoardArgs>();
  CLI::App* board =
      app.add_subcommand("board", "Serve a live dashboard of a log directory's event files");
  board->add_option("LOGDIR", board_args->logdir, "Log directory")->required();
  board->add_option("--port", board_args->server.port, "Port to listen on (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  board
      ->add_option("--host", board_args->server.host,
                   "Address to listen on (other than loopback: reachable from the network)")
      ->capture_default_str();
  board
      ->add_option("--allow-host", board_args->server.allowed_hosts,
                   "A host name that requests may be addressed to besides localhost, 127.0.0.1 "
                   "and [::1] (repeatable)")
      ->check(CLI::Validator(check_allowed_host, "NAME"))
      ->allow_extra_args(false);  // one name per --allow-host, which may be repeated
  board
      ->add_option("--reload-interval", board_args->server.reload_interval_secs,
                   "Seconds between re-reads of the log directory, at most 86400")
      ->check(CLI::Validator(check_reload_interval, "SECONDS"))
      ->capture_default_str();
  board->callback([board_args] { run("board", [&] { run_board(*board_args); }); });

  auto report_args = std::make_shared<ReportArgs>();
  CLI::App* report = app.add_subcommand(
      "report", "Write a log directory's dashboard as one self-contained HTML file");
  report->add_option("LOGDIR", report_args->logdir, "Log directory")->required();
  report->add_option("-o,--output", report_args->output, "HTML file to write")->required();
  report->add_option("--title", report_args->options.title,
                     "Title shown (default: the log directory's name)");
  report
      ->add_option("--max-points", report_args->options.max_points,
                   "Points kept per scalar series (downsampled keeping each stretch's extremes)")
      ->check(CLI::Range(int64_t{2}, board::BoardApi::kMaxMaxPoints))
      ->capture_default_str();
  report->callback([report_args] { run("report", [&] { run_report(*report_args); }); });
}

}  // namespace trainhooks
