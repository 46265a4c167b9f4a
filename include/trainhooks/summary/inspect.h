// Inspection of a log directory, as `tensorboard --inspect` does: which runs it holds and, per
// tag, the kind of data, how many values, the step range and the last value.
//
// A run is a directory holding event files: the log directory itself (named ".") and every
// subdirectory below it (named by its path relative to the log directory). `trainhooks events`
// prints these; the functions are public so tools and tests can use them directly. With
// options.read.purge_orphaned_data the values a restart orphaned are left out, as TensorBoard
// leaves them out (restart_filter.h), and each run lists the purges.
//
//   auto runs = trainhooks::summary::inspect_logdir("runs", {.tag = "loss"});
//   trainhooks::summary::print_runs(std::cout, runs);
//
// Errors: EventFileError for a missing directory, a file that is not an event file or a corrupt
// record (naming file and offset).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "trainhooks/summary/event_reader.h"
#include "trainhooks/summary/restart_filter.h"

namespace trainhooks::summary {

struct TagStats {
  std::string tag{};
  ValueKind kind = ValueKind::kNone;
  std::string plugin_name{};
  int64_t count = 0;
  int64_t min_step = 0, max_step = 0;
  std::optional<double> last_value{};          // scalars: the value of the last event read
  std::optional<LayoutValue> last_layout{};    // custom_scalars layouts: the last one
  std::optional<HParamsValue> last_hparams{};  // HParams summaries: the last one
  double last_wall_time = 0;
};

struct RunStats {
  std::string name{};  // "." for the log directory itself
  std::filesystem::path directory{};
  std::vector<std::filesystem::path> files{};
  int64_t events = 0;  // records read, whatever a purge discarded
  int64_t session_starts = 0;
  int64_t graphs = 0;  // graph_def and meta_graph_def events
  // The last graph_def event's GraphDef: its nodes and inputs (-1: no graph event, or one that
  // does not parse).
  int64_t graph_nodes = -1, graph_edges = -1;
  // The first of each HParams summary, as TensorBoard keeps them (hparams.h).
  std::optional<HParamsValue> hparams_experiment{}, hparams_start{}, hparams_end{};
  int64_t corrupt_records = 0;                   // skipped (ReadOptions::skip_corrupt)
  std::vector<PartialRecord> partial_records{};  // files ending in a partial record
  std::vector<Purge> purges{};                   // ReadOptions::purge_orphaned_data
  std::vector<TagStats> tags{};                  // sorted by tag
};

struct InspectOptions {
  std::string tag{};  // only this tag when not empty
  ReadOptions read{};
};

// The directories under `logdir` (itself included) that hold event files, sorted by run name.
// A path to one event file is a single run named after the file.
std::vector<std::filesystem::path> find_run_directories(const std::filesystem::path& logdir);

// Every run, in order; throws at the first error.
std::vector<RunStats> inspect_logdir(const std::filesystem::path& logdir,
                                     const InspectOptions& options = {});

// One run (a directory from find_run_directories(logdir)) into `out`. With `csv`, also writes
// the run's scalar rows there (see write_scalars_csv; no header) and returns how many. When
// reading fails, `out` (and `csv`) hold what was read before the error, which is then rethrown.
int64_t inspect_run(const std::filesystem::path& logdir, const std::filesystem::path& run,
                    const InspectOptions& options, RunStats& out, std::ostream* csv = nullptr);

// One block per run: its files and event count (graphs and skipped corrupt records when there
// are any), a table of tags, the graph's size, the hyperparameters, metrics and end status when
// the run has HParams summaries, and a line per purge.
void print_runs(std::ostream& out, const std::vector<RunStats>& runs);
void print_run(std::ostream& out, const RunStats& run);

// `run,tag,step,wall_time,value` rows (with a header) for every scalar value in read order.
// Fields with commas or quotes are quoted; values print in the shortest exact form. Returns the
// number of rows.
int64_t write_scalars_csv(std::ostream& out, const std::filesystem::path& logdir,
                          const InspectOptions& options = {});

}  // namespace trainhooks::summary
