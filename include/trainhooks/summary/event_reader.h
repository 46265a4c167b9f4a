// EventReader: reads the events of a TensorBoard event file, or of every event file in a
// directory, whoever wrote them (TensorFlow 1 and 2, PyTorch, tensorboardX, trainhooks).
//
// Every record's length and data CRCs are verified. A corrupt record throws EventFileError
// naming the file and the byte offset, or, with ReadOptions::skip_corrupt, is logged as a
// warning through ReadOptions::env and skipped. A file whose first record is not a valid Event
// record is not an event file: EventFileError ("<file> is not an event file: ..."), also with
// skip_corrupt unless a valid record follows. A record cut short by the end of a file (a writer
// still writing, or killed mid-write) ends that file quietly and is listed by partial_records();
// calling next() again later picks up records appended meanwhile. A directory's event files are
// those whose names contain "tfevents" (as TensorBoard decides), read in name order;
// subdirectories are not entered.
//
// next() returns every event as it is in the files. TensorBoard also drops the values that a
// restart orphaned (see restart_filter.h); read_events() does so with
// ReadOptions::purge_orphaned_data.
//
// Values are decoded into plain structs. Scalars are recognised in both forms: TF1-style
// simple_value and TF2-style rank-0 numeric tensors (tensor_content or *_val). Plugin metadata
// appears on a tag's first value only, so the reader remembers each tag's plugin. A
// custom_scalars layout (a serialized Layout proto in a string tensor) is a kLayout value, not
// text. An HParams plugin summary (hparams.h) is a kHParams value, decoded from its own metadata.
// A graph event keeps its serialized GraphDef (graph_def.h: parse_graph_def); a meta graph event
// is flagged, its contents not kept.
//
//   trainhooks::summary::EventReader reader("runs/exp1");
//   while (auto event = reader.next())
//     for (const auto& v : event->values)
//       if (v.kind == ValueKind::kScalar) std::cout << v.tag << " " << v.scalar << "\n";
//
// Thread safety: one reader per thread.
#pragma once

#include "trainhooks/errors.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainhooks/env.h"
#include "trainhooks/summary/hparams.h"
#include "trainhooks/summary/value_kind.h"

namespace trainhooks::summary {

// A file that cannot be read, or a record that fails its checks. what() names both.
class EventFileError : public DataLossError {
 public:
  EventFileError(const std::string& message, std::filesystem::path file, uint64_t offset)
      : DataLossError(message), file_(std::move(file)), offset_(offset) {}
  const std::filesystem::path& file() const { return file_; }
  // Byte offset of the bad record (0 when the file itself could not be read).
  uint64_t offset() const { return offset_; }

 private:
  std::filesystem::path file_;
  uint64_t offset_;
};

struct HistogramValue {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limits{};  // bucket i covers [limits[i-1], limits[i])
  std::vector<double> buckets{};        // counts
};

struct ImageValue {
  int height = 0, width = 0;
  int colorspace = 0;     // 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA
  std::string encoded{};  // PNG (or whatever the writer stored)
};

// A custom_scalars plugin layout: the dashboard's categories and their charts.
struct LayoutValue {
  std::vector<std::string> categories{};  // titles, in order
  int64_t charts = 0;                     // over all categories
};

struct EventValue {
  std::string tag{};
  ValueKind kind = ValueKind::kNone;
  // From this value's metadata or the tag's first value in the files read so far.
  std::string plugin_name{};
  double scalar = 0;                          // kScalar
  std::optional<HistogramValue> histogram{};  // kHistogram stored as HistogramProto
  std::optional<ImageValue> image{};          // kImage stored as Summary.Image
  std::string text{};                         // kText; several strings joined by '\n'
  std::optional<LayoutValue> layout{};        // kLayout
  std::optional<HParamsValue> hparams{};      // kHParams
};

struct SessionLogValue {
  SessionStatus status = SessionStatus::kUnspecified;
  std::string checkpoint_path{};
  std::string msg{};
};

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version{};  // "brain.Event:2" on a file's first record
  std::optional<SessionLogValue> session_log{};
  bool graph_def = false;            // a graph event
  std::string graph_def_data{};      // its serialized GraphDef
  bool meta_graph_def = false;       // a meta graph event
  std::vector<EventValue> values{};  // of a summary event
  uint64_t offset = 0;               // of the record in its file
};

struct ReadOptions {
  // false: a corrupt record throws EventFileError. true: it is reported and skipped.
  bool skip_corrupt = false;
  // Each skipped record is reported as a warning to env.log (null: stderr,
  // `WARNING:trainhooks:<message>`).
  Env env{};
  // read_events() and inspect.h only (next() streams the files as they are): leave out the
  // values a restart orphaned, as TensorBoard does (RestartFilter).
  bool purge_orphaned_data = false;
};

// The end of a file that holds the start of a record but not all of it.
struct PartialRecord {
  std::filesystem::path file{};
  uint64_t offset = 0;  // where the partial record starts
  uint64_t bytes = 0;   // how many of its bytes the file holds
};

class EventReader {
 public:
  // `path` is an event file or a directory of them. Throws EventFileError if it does not exist.
  explicit EventReader(const std::filesystem::path& path, ReadOptions options = {});
  ~EventReader();
  EventReader(EventReader&&) noexcept;
  EventReader& operator=(EventReader&&) noexcept;

  // The next event, or nullopt at the end of the last file.
  std::optional<Event> next();

  // The files read, in order (listed when the reader was built).
  const std::vector<std::filesystem::path>& files() const;
  // The file the last event came from.
  const std::filesystem::path& current_file() const;
  // Corrupt records skipped so far (skip_corrupt only).
  int64_t corrupt_records() const;
  // The files read so far that end in a partial record (the normal state of a file being
  // written), as they were when next() last reached their end.
  const std::vector<PartialRecord>& partial_records() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Every event of a file or directory; with options.purge_orphaned_data, those TensorBoard shows.
std::vector<Event> read_events(const std::filesystem::path& path, const ReadOptions& options = {});

// True when a file name is that of an event file (contains "tfevents").
bool is_event_file_name(const std::string& filename);

}  // namespace trainhooks::summary
