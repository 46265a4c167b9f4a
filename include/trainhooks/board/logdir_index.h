// LogdirIndex: what `trainhooks board` knows of a log directory, kept current by reading only
// what was appended since the last refresh.
//
// A run is a directory under the log directory (itself included, named ".") that holds event
// files, as inspect.h finds them. refresh() lists the directories again, opens event files that
// are new, and reads the records appended to the files it already follows; it never reads a
// file from its start twice. It survives the files changing under it:
//   - a record still being written (a partial record at a file's end) is picked up by a later
//     refresh once complete;
//   - a corrupt record is skipped with a warning through options.env (counted in RunInfo);
//   - a file that shrinks below what was read (rewritten or truncated), or is replaced by another
//     file of its name, is read again from the start, after dropping nothing (its earlier
//     values stay: TensorBoard does the same);
//   - a file or run directory that disappears stops being followed; its values stay until the
//     run directory itself is gone, then the run is removed (a directory deleted and made again
//     between two refreshes is a new run);
//   - a file that cannot be read (permissions, not an event file) is warned about once and
//     tried again by later refreshes.
// A run's files are read in name order at its first refresh; later ones as they appear. Each
// followed file keeps a file descriptor open.
// TensorBoard's restart semantics hold (restart_filter.h): a SessionLog START at step s, other
// than a run's first, discards the run's values with step >= s read before it, over all its
// tags; in files without a version, a step lower than the previous one discards the earlier
// values of its own tags with step >= it. Each purge is logged (INFO), as describe_purge().
//
// Scalars are kept in full (20 bytes a point). Histograms, images and text are kept as
// TensorBoard keeps them: a reservoir of the latest-biased sample per tag (options), so memory
// stays bounded by the number of scalar points plus a fixed amount per tag. Other kinds
// (tensors, audio, custom_scalars layouts) are listed with their step range, not served.
// A run's graph is the GraphDef of its latest graph event, as TensorBoard shows the last one;
// its HParams plugin summaries (hparams.h) are kept as TensorBoard keeps them, the first of each
// of the three a run's files hold. Neither is touched by restart purges.
//
//   trainhooks::board::LogdirIndex index("runs");
//   index.refresh();                                    // then again every few seconds
//   for (const auto& run : index.runs()) ...
//   auto loss = index.scalars("train", "loss");         // steps, wall_times, values
//
// Thread safety: refresh() and the readers may be called from different threads (refreshes
// from several threads take turns). A refresh reads and decodes without holding the readers
// off; it applies what it read in batches of a few thousand records, each under an exclusive
// lock, so readers see a state between two batches, never a half-applied one (a long first
// load becomes visible in steps).
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainhooks/env.h"
#include "trainhooks/summary/event_reader.h"

namespace trainhooks::board {

struct LogdirIndexOptions {
  // Kept per tag, as TensorBoard's default sampling (--samples_per_plugin) keeps them; 0 keeps
  // every value, as there. Negative: InvalidArgument.
  int64_t max_histograms_per_tag = 500;
  int64_t max_images_per_tag = 10;
  int64_t max_text_per_tag = 100;
  // Warnings (corrupt records, files that vanished) go to env.log.
  Env env{};
};

struct TagInfo {
  std::string tag{};
  // How the index holds the tag. A histogram or image that the reader does not decode (a
  // TensorFlow 2 tensor summary) is a kTensor, its plugin_name telling what it was. A tag with
  // values of two kinds is listed once per kind.
  summary::ValueKind kind = summary::ValueKind::kNone;
  std::string plugin_name{};
  int64_t count = 0;                   // values kept (after restart purges and sampling)
  int64_t min_step = 0, max_step = 0;  // 0 when a purge left none
  double last_wall_time = 0;           // of the kept value with the highest step
};

struct RunInfo {
  std::string name{};  // "." for the log directory itself, else the relative path ('/'-separated)
  std::vector<TagInfo> tags{};  // sorted by tag
  int64_t files = 0;            // event files followed
  int64_t events = 0;           // records read
  int64_t corrupt_records = 0;  // skipped
  int64_t purged_values = 0;    // discarded by restarts
  double last_wall_time = 0;    // the latest of the events read
  bool graph = false;           // a graph event was read (graph())
  bool hparams = false;         // an HParams session start info was read (hparams())
};

// The latest graph event of a run.
struct RunGraph {
  int64_t step = 0;
  double wall_time = 0;
  std::string graph_def{};  // serialized: summary::parse_graph_def()
};

// The HParams plugin summaries of a run, the first of each kind read.
struct RunHParams {
  std::optional<summary::HParamsValue> experiment{};
  std::optional<summary::HParamsValue> session_start{};
  std::optional<summary::HParamsValue> session_end{};
};

struct ScalarSeries {
  std::vector<int64_t> steps{};
  std::vector<double> wall_times{};
  std::vector<float> values{};  // TensorBoard's scalars are float32
};

struct HistogramPoint {
  int64_t step = 0;
  double wall_time = 0;
  summary::HistogramValue histogram{};
};

struct ImagePoint {
  int64_t step = 0;
  double wall_time = 0;
  summary::ImageValue image{};
};

struct TextPoint {
  int64_t step = 0;
  double wall_time = 0;
  std::string text{};
};

struct RefreshStats {
  int64_t records = 0;    // records read by this refresh
  int64_t new_runs = 0;   // runs that appeared
  int64_t new_files = 0;  // event files that appeared
};

class LogdirIndex {
 public:
  // Reads nothing yet: call refresh(). Throws InvalidArgument when `logdir` is not a
  // directory.
  explicit LogdirIndex(std::filesystem::path logdir, LogdirIndexOptions options = {});
  ~LogdirIndex();
  LogdirIndex(const LogdirIndex&) = delete;
  LogdirIndex& operator=(const LogdirIndex&) = delete;

  // Reads what is new since the last refresh. Never throws for what the files hold.
  RefreshStats refresh();

  // The log directory as given, lexically normal and without a trailing '/'.
  const std::filesystem::path& logdir() const;
  // Every run, sorted by name.
  std::vector<RunInfo> runs() const;
  // nullopt for an unknown run.
  std::optional<RunInfo> run(const std::string& name) const;

  // The values of one tag, in step order (points with equal steps keep their read order).
  // Throws NotFoundError ("unknown run 'x'", "run 'x' has no scalar tag 'y'") when the run or a
  // tag of that kind does not exist.
  ScalarSeries scalars(const std::string& run, const std::string& tag) const;
  std::vector<HistogramPoint> histograms(const std::string& run, const std::string& tag) const;
  std::vector<ImagePoint> images(const std::string& run, const std::string& tag) const;
  std::vector<TextPoint> text(const std::string& run, const std::string& tag) const;
  // NotFoundError for an unknown run; nullopt when it has no graph event.
  std::optional<RunGraph> graph(const std::string& run) const;
  // NotFoundError for an unknown run; empty members for the summaries it does not have.
  RunHParams hparams(const std::string& run) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainhooks::board
