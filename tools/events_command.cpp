#include "events_command.h"

#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "trainhooks/errors.h"
#include "trainhooks/summary/inspect.h"

namespace trainhooks {
namespace {

namespace ths = summary;

struct EventsArgs {
  std::string logdir;
  bool csv = false;
  std::string tag;
  bool skip_corrupt = false;
  bool no_purge = false;
};

constexpr const char* kCsvHeader = "run,tag,step,wall_time,value\n";
// A TFRecord's length and its CRC.
constexpr uintmax_t kRecordHeaderBytes = 12;

// Notes on stderr: what was read is complete but something about the files is worth knowing.
void print_notes(const std::vector<ths::RunStats>& runs, bool csv) {
  for (const ths::RunStats& run : runs) {
    for (const ths::PartialRecord& p : run.partial_records) {
      std::cerr << fmt::format(
          "trainhooks events: note: {} ends in a partial record at byte offset {} ({} byte{}): "
          "a writer is still writing it or stopped mid-record; the events before it were read\n",
          p.file.string(), p.offset, p.bytes, p.bytes == 1 ? "" : "s");
    }
    // The table shows these in its run blocks; CSV has no room for them.
    if (!csv) continue;
    if (run.corrupt_records > 0) {
      std::cerr << fmt::format("trainhooks events: note: run {}: {} corrupt record{} skipped\n",
                               run.name, run.corrupt_records, run.corrupt_records == 1 ? "" : "s");
    }
    for (const ths::Purge& p : run.purges) {
      std::cerr << "trainhooks events: note: run " << run.name << ": " << ths::describe_purge(p)
                << "\n";
    }
  }
}

// One event file named on the command line must hold at least one record: an empty or short
// file is not one (in a log directory, such a file is one a writer has just created, and no
// error).
void check_event_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return;  // the reader reports it
  if (size == 0) throw DataLossError(fmt::format("{} is empty: not an event file", path));
  if (size < kRecordHeaderBytes) {
    throw DataLossError(
        fmt::format("{} is not an event file: {} byte{}, shorter than a record's {}-byte header",
                    path, size, size == 1 ? "" : "s", kRecordHeaderBytes));
  }
}

void check_some_record_read(const std::string& path, const std::vector<ths::RunStats>& runs) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return;
  for (const ths::RunStats& run : runs) {
    if (run.events > 0) return;
  }
  throw DataLossError(fmt::format(
      "{} holds no complete record: it is not an event file, or its writer has not finished "
      "the first record",
      path));
}

void run_events(const EventsArgs& args) {
  check_event_file(args.logdir);
  ths::InspectOptions options{.tag = args.tag};
  options.read.skip_corrupt = args.skip_corrupt;
  options.read.purge_orphaned_data = !args.no_purge;
  std::vector<ths::RunStats> runs;
  if (args.csv) {
    // The header goes out with the first row, so that a --tag matching nothing prints nothing.
    bool header = false;
    int64_t rows = 0;
    auto emit = [&](const std::ostringstream& rows_of_run) {
      if (rows_of_run.view().empty()) return;
      if (!header) std::cout << kCsvHeader;
      header = true;
      std::cout << rows_of_run.view();
    };
    for (const auto& dir : ths::find_run_directories(args.logdir)) {
      std::ostringstream buffer;
      try {
        rows += ths::inspect_run(args.logdir, dir, options, runs.emplace_back(), &buffer);
      } catch (...) {
        emit(buffer);
        throw;
      }
      emit(buffer);
    }
    check_some_record_read(args.logdir, runs);
    if (rows == 0 && !args.tag.empty()) {
      throw NotFoundError(
          fmt::format("No scalar values with tag '{}' in {}", args.tag, args.logdir));
    }
    if (!header) std::cout << kCsvHeader;
  } else {
    for (const auto& dir : ths::find_run_directories(args.logdir)) {
      try {
        ths::inspect_run(args.logdir, dir, options, runs.emplace_back());
      } catch (...) {
        // Everything read before the error is shown before it (a run that failed at its first
        // record has nothing to show).
        if (runs.back().events == 0) runs.pop_back();
        if (!runs.empty()) ths::print_runs(std::cout, runs);
        std::cout.flush();
        throw;
      }
    }
    check_some_record_read(args.logdir, runs);
    bool matched = false;
    for (const auto& run : runs) matched = matched || !run.tags.empty();
    if (!matched && !args.tag.empty()) {
      throw NotFoundError(fmt::format("No values with tag '{}' in {}", args.tag, args.logdir));
    }
    ths::print_runs(std::cout, runs);
  }
  std::cout.flush();
  print_notes(runs, args.csv);
}

}  // namespace

void add_events_command(CLI::App& app) {
  auto args = std::make_shared<EventsArgs>();
  CLI::App* cmd = app.add_subcommand("events", "Summarise the event files of a log directory");
  cmd->add_option("LOGDIR", args->logdir, "Log directory (or one event file)")->required();
  cmd->add_flag("--csv", args->csv, "Print run,tag,step,wall_time,value rows for scalars");
  cmd->add_option("--tag", args->tag, "Only this tag (an error if no value has it)");
  cmd->add_flag("--skip-corrupt", args->skip_corrupt,
                "Read past corrupt records (each reported, the count shown) instead of stopping");
  cmd->add_flag("--no-purge", args->no_purge,
                "Keep the values a restart orphaned (TensorBoard discards them)");
  cmd->callback([args] {
    try {
      run_events(*args);
    } catch (const std::exception& e) {
      std::cout.flush();
      std::cerr << "trainhooks events: " << e.what() << std::endl;
      throw CLI::RuntimeError(1);  // CLI11 exits with this status and prints nothing more
    } catch (...) {
      std::cout.flush();
      std::cerr << "trainhooks events: unexpected error" << std::endl;
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace trainhooks
