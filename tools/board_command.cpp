#include "board_command.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
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

// The log directory's absence said plainly, before anything tries to read it.
void check_logdir(const std::string& logdir) {
  std::error_code ec;
  const auto status = std::filesystem::status(logdir, ec);
  if (!std::filesystem::exists(status)) {
    throw NotFoundError(fmt::format("log directory '{}' does not exist", logdir));
  }
  if (!std::filesystem::is_directory(status)) {
    throw InvalidArgument(fmt::format("log directory '{}' is not a directory", logdir));
  }
}

struct BoardArgs {
  std::string logdir;
  board::BoardServerOptions server;
};

void run_board(const BoardArgs& args) {
  check_logdir(args.logdir);
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
  check_logdir(args.logdir);
  const board::ReportStats stats = board::write_report(args.logdir, args.output, args.options);
  std::cout << fmt::format("trainhooks report: wrote {} ({} run{}, {} tag{})", args.output,
                           stats.runs, stats.runs == 1 ? "" : "s", stats.tags,
                           stats.tags == 1 ? "" : "s")
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
  board->add_option("--host", board_args->server.host, "Address to listen on")
      ->capture_default_str();
  board
      ->add_option("--reload-interval", board_args->server.reload_interval_secs,
                   "Seconds between re-reads of the log directory")
      ->check(CLI::PositiveNumber)
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
