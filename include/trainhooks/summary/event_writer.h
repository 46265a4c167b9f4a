// EventWriter: appends events to a TensorBoard event file from a background thread, as
// TensorFlow's FileWriter / EventFileWriter do.
//
// The constructor creates `logdir` and the file `events.out.tfevents.<10-digit wall seconds>.
// <hostname><filename_suffix>` and writes its first record, Event{wall_time, file_version:
// "brain.Event:2"}. Each add_* call stamps the event with the wall clock and queues it; a writer
// thread encodes, frames (TFRecord, masked CRC32C) and appends it. The queue holds max_queue
// events; a caller that finds it full blocks until the writer catches up. The file is flushed to
// the OS every flush_secs, on flush() and on close() (close also fsyncs); never per event.
// The first value of each tag in a file carries its plugin metadata.
//
// close() writes what is queued and stops the thread; later events are dropped with a warning
// (logged once per close). reopen() starts a new file after close(); it does nothing otherwise.
//
// A failed write (a full disk, an I/O error) never leaves a torn record inside the file: a write
// that stopped part-way is cut back to the last whole record (or, if the file cannot be cut,
// completed by the next attempt), so every record written once space returns is readable. The
// events not written are kept and retried on the next write, up to 4 MiB; beyond that they are
// dropped. A run of failures is logged when it starts, when it first drops events and when it
// ends (with the number dropped), never per event; close() while writes still fail drops what is
// left and logs the count at ERROR.
//
//   trainhooks::summary::EventWriter writer("runs/exp1", {.flush_secs = 30});
//   writer.add_scalar("loss", loss.item<float>(), step);
//   writer.add_histogram("fc/weight", fc->weight, step);
//   writer.close();
//
// EventWriter::for_logdir(dir) returns the process-wide writer of that directory, creating it
// with default options on first use (TF's FileWriterCache).
//
// Thread safety: every method may be called from any thread. Events from one thread are written
// in the order they were added.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "trainhooks/env.h"
#include "trainhooks/summary/event_file_io.h"
#include "trainhooks/summary/graph_def.h"
#include "trainhooks/summary/summary.h"

namespace trainhooks::summary {

struct EventWriterOptions {
  // Events queued before add_* blocks; at least 1.
  int max_queue = 10;
  // Seconds between flushes to the OS; positive.
  double flush_secs = 120;
  // Appended to the file name, e.g. ".v2" or ".eval".
  std::string filename_suffix{};
  // clock: wall time (seconds since the Unix epoch) for events and the file name. log: warnings
  // (dropped events, failed writes), from the calling or the writer thread. Null members: the
  // system's (stderr as `WARNING:trainhooks:<message>`).
  Env env{};
  // The calls made on the open file; null: the operating system's.
  std::shared_ptr<EventFileIo> file_io{};
};

class EventWriter {
 public:
  // Throws InvalidArgument for bad options and FileError (naming the path) when
  // the directory or the file cannot be created.
  explicit EventWriter(std::filesystem::path logdir, EventWriterOptions options = {});
  ~EventWriter();  // close()
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // The shared writer of `logdir` (compared after making it absolute and normal).
  static std::shared_ptr<EventWriter> for_logdir(const std::filesystem::path& logdir);
  // Closes and forgets every cached writer.
  static void clear_cache();

  // Cheap on the calling thread: no encoding or allocation beyond a tag longer than the
  // small-string buffer the first time a queue slot sees it.
  void add_scalar(std::string_view tag, float value, int64_t step);
  // These encode on the calling thread (the tensor is read before returning).
  void add_histogram(std::string_view tag, const at::Tensor& values, int64_t step);
  void add_image(std::string_view tag, const at::Tensor& images, int64_t step,
                 const ImageOptions& options = {});
  void add_text(std::string_view tag, std::string_view text, int64_t step);
  void add_session_log(SessionStatus status, std::string_view checkpoint_path, std::string_view msg,
                       int64_t step);
  // A graph event (Event.graph_def: the serialized GraphDef), which TensorBoard's Graphs
  // dashboard shows; it keeps the last one of a run. Serialized on the calling thread.
  void add_graph(const GraphDef& graph, int64_t step = 0);
  // All values of `summary` in one event.
  void add_summary(const Summary& summary, int64_t step);
  void add_summary(Summary&& summary, int64_t step);

  // Returns once every event added before the call is in the file (handed to the OS), or, while
  // writes fail, kept for the next attempt.
  void flush();
  void close();
  void reopen();

  bool closed() const;
  const std::filesystem::path& logdir() const;
  // The file being written, or the last one after close().
  std::filesystem::path file_path() const;
  // Events dropped because the writer was closed or because writes kept failing.
  int64_t dropped_events() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainhooks::summary
