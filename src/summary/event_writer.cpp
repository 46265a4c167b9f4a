#include "trainhooks/summary/event_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_set>

#include <fmt/format.h>

#include "trainhooks/errors.h"

#include "summary/batch_queue.h"
#include "summary/encoded_value.h"
#include "summary/event_encoding.h"
#include "summary/record_io.h"

namespace trainhooks::summary {
namespace {

// An event waiting for the writer thread. Slots are reused, so `tag` keeps its capacity.
struct PendingEvent {
  enum class Kind : uint8_t { kScalar, kSummary, kSessionLog, kGraph };
  Kind kind = Kind::kScalar;
  float value = 0;
  int64_t step = 0;
  double wall_time = 0;
  std::string tag;                   // kScalar
  std::vector<EncodedValue> values;  // kSummary
  std::string payload;               // kSessionLog: a serialized SessionLog; kGraph: GraphDef
};

// Bytes buffered by the writer thread before a write(2) between flushes.
constexpr size_t kWriteChunk = 64 * 1024;
// While writes fail (a full disk), events are kept for the next attempt up to this many bytes;
// beyond it they are dropped and counted.
constexpr size_t kMaxRetainedBytes = 4 * 1024 * 1024;

std::string hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

std::string cache_key(const std::filesystem::path& logdir) {
  std::filesystem::path p = std::filesystem::absolute(logdir).lexically_normal();
  if (!p.has_filename() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  return p.string();
}

}  // namespace

struct EventWriter::Impl {
  Impl(std::filesystem::path dir, EventWriterOptions opts)
      : logdir(std::move(dir)),
        options(std::move(opts)),
        queue(static_cast<size_t>(options.max_queue)) {}

  const std::filesystem::path logdir;
  const EventWriterOptions options;
  BatchQueue<PendingEvent> queue;

  std::mutex lifecycle_mu;  // serialises close() and reopen()
  std::thread thread;
  std::atomic<bool> closed{false};
  std::atomic<bool> warned_drop{false};
  std::atomic<int64_t> dropped{0};

  mutable std::mutex path_mu;
  std::filesystem::path path;

  // Writer-thread state (also touched by open_file while the thread is not running).
  int fd = -1;
  // Framed records not yet in the file. When a write stopped inside a record and the file could
  // not be cut back, the first `torn_tail` bytes are the rest of that record.
  std::string buffer;
  int64_t buffered_records = 0;  // records with bytes in `buffer`
  size_t torn_tail = 0;
  uint64_t file_end = 0;   // bytes in the file
  uint64_t whole_end = 0;  // end of the last whole record in the file
  std::unordered_set<std::string> tags_with_metadata;
  std::vector<uint8_t> with_metadata;
  // A run of failed writes: logged when it starts, when it first drops events and when it ends.
  bool failing = false;
  bool warned_failing_drop = false;
  int64_t dropped_while_failing = 0;
  std::string write_error;

  double now() const { return options.env.clock->wall_seconds(); }

  void warn(const std::string& message) const { options.env.warning(message); }

  void open_file();
  void run();
  void encode(PendingEvent& event);
  bool first_use(const std::string& tag) { return tags_with_metadata.insert(tag).second; }
  void write_buffer();
  void recovered();
  void drop_retained(bool closing);
  void close_file();
  std::string current_path() const {
    std::lock_guard lock(path_mu);
    return path.string();
  }
  void drop(int64_t step);

  template <typename Fill>
  void enqueue(int64_t step, Fill&& fill) {
    const double wall_time = now();
    const bool queued = queue.push([&](PendingEvent& e) {
      e.wall_time = wall_time;
      e.step = step;
      fill(e);
    });
    if (!queued) drop(step);
  }
};

void EventWriter::Impl::open_file() {
  std::error_code ec;
  std::filesystem::create_directories(logdir, ec);
  if (ec) {
    throw FileError(
        fmt::format("Cannot create log directory {}: {}", logdir.string(), ec.message()));
  }
  const double wall_time = now();
  const std::string base =
      fmt::format("events.out.tfevents.{:010d}.{}{}", static_cast<int64_t>(wall_time), hostname(),
                  options.filename_suffix);
  // Two files opened in the same second would share a name; never truncate an earlier one.
  std::filesystem::path candidate = logdir / base;
  for (int n = 1;; ++n) {
    fd = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) break;
    if (errno != EEXIST) {
      throw FileError(
          fmt::format("Cannot create event file {}: {}", candidate.string(), std::strerror(errno)));
    }
    candidate = logdir / fmt::format("{}.{}", base, n);
  }
  {
    std::lock_guard lock(path_mu);
    path = candidate;
  }
  tags_with_metadata.clear();
  buffer.clear();
  buffered_records = 0;
  torn_tail = 0;
  file_end = whole_end = 0;
  failing = warned_failing_drop = false;
  dropped_while_failing = 0;
  append_file_version_event(buffer, wall_time);
  ++buffered_records;
  write_buffer();
}

void EventWriter::Impl::write_buffer() {
  if (buffer.empty()) return;
  size_t done = 0;
  int error = 0;
  while (done < buffer.size()) {
    const ssize_t n = options.file_io->write(fd, buffer.data() + done, buffer.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      error = n < 0 ? errno : EIO;
      break;
    }
  }
  if (done == buffer.size()) {
    file_end += done;
    whole_end = file_end;
    buffered_records = 0;
    buffer.clear();
    torn_tail = 0;
    if (failing) recovered();
    return;
  }
  // Record ends in `buffer`: the last at or before `done` (and how many records end by then), and
  // the first after it.
  size_t last_boundary = 0, next_boundary = 0;
  int64_t completed = 0;
  for (size_t b = torn_tail > 0 ? torn_tail : framed_size(buffer.data());;) {
    if (b > done) {
      next_boundary = b;
      break;
    }
    last_boundary = b;
    ++completed;
    if (b >= buffer.size()) break;
    b += framed_size(buffer.data() + b);
  }
  const uint64_t start = file_end;
  file_end += done;
  if (completed > 0) whole_end = start + last_boundary;
  buffered_records -= completed;
  // A write stopped inside a record (a full disk): cut the file back to the last whole record,
  // so that the records written once space returns follow it. A record whose head was written by
  // an earlier attempt (the file could not be cut then) is completed instead.
  const bool torn_here = file_end > whole_end && (completed > 0 || torn_tail == 0);
  if (torn_here && options.file_io->truncate(fd, whole_end) == 0) {
    file_end = whole_end;
    buffer.erase(0, last_boundary);
    torn_tail = 0;
  } else {
    buffer.erase(0, done);
    torn_tail = file_end > whole_end ? next_boundary - done : 0;
  }
  if (!failing) {
    failing = true;
    warned_failing_drop = false;
    dropped_while_failing = 0;
    write_error = std::strerror(error);
    warn(fmt::format("Cannot write events to {}: {}; keeping them in memory to retry.",
                     current_path(), write_error));
  }
  if (buffer.size() > kMaxRetainedBytes) drop_retained(false);
}

void EventWriter::Impl::recovered() {
  failing = false;
  const std::string message =
      fmt::format("Writing events to {} again; {} events were dropped while writes failed.",
                  current_path(), dropped_while_failing);
  if (dropped_while_failing > 0) {
    warn(message);
  } else {
    options.env.info(message);
  }
}

void EventWriter::Impl::drop_retained(bool closing) {
  // The rest of a record already partly in the file is kept unless the file is being closed.
  const size_t keep = closing ? 0 : torn_tail;
  const int64_t records = buffered_records - (keep > 0 ? 1 : 0);
  if (records <= 0) return;
  buffer.resize(keep);
  buffered_records -= records;
  if (closing) torn_tail = 0;
  dropped.fetch_add(records, std::memory_order_relaxed);
  dropped_while_failing += records;
  if (!closing && !warned_failing_drop) {
    warned_failing_drop = true;
    warn(
        fmt::format("Dropped {} events for {}: writes keep failing ({}); later drops are counted "
                    "until a write succeeds.",
                    records, current_path(), write_error));
  }
}

void EventWriter::Impl::close_file() {
  write_buffer();
  if (failing) {
    drop_retained(true);
    options.env.error(fmt::format("Closed {} while writes were failing ({}): {} events dropped.",
                                  current_path(), write_error, dropped_while_failing));
  }
  // Durable at close; per-flush fsync would cost a disk round trip every flush_secs.
  if (options.file_io->sync(fd) != 0 && !failing) {
    warn(fmt::format("Cannot sync {}: {}", current_path(), std::strerror(errno)));
  }
  ::close(fd);
  fd = -1;
}

void EventWriter::Impl::encode(PendingEvent& e) {
  ++buffered_records;  // each event is one record
  switch (e.kind) {
    case PendingEvent::Kind::kScalar:
      append_scalar_event(buffer, e.wall_time, e.step, e.tag, e.value, first_use(e.tag));
      break;
    case PendingEvent::Kind::kSummary:
      with_metadata.resize(e.values.size());
      for (size_t i = 0; i < e.values.size(); ++i) with_metadata[i] = first_use(e.values[i].tag);
      append_summary_event(buffer, e.wall_time, e.step, e.values, with_metadata);
      e.values.clear();  // releases encoded images; the slot keeps only the vector's capacity
      break;
    case PendingEvent::Kind::kSessionLog:
      append_session_log_event(buffer, e.wall_time, e.step, e.payload);
      break;
    case PendingEvent::Kind::kGraph:
      append_graph_event(buffer, e.wall_time, e.step, e.payload);
      e.payload.clear();  // a graph may be large; the slot keeps no copy
      e.payload.shrink_to_fit();
      break;
  }
}

void EventWriter::Impl::run() {
  using namespace std::chrono;
  const auto period = duration_cast<steady_clock::duration>(duration<double>(options.flush_secs));
  auto next_flush = steady_clock::now() + period;
  for (;;) {
    auto batch = queue.take(next_flush);
    for (PendingEvent& e : batch.items) encode(e);
    const bool due = steady_clock::now() >= next_flush;
    if (batch.flush_ticket != 0 || batch.closed || due || buffer.size() >= kWriteChunk) {
      write_buffer();
    }
    if (batch.flush_ticket != 0 || due) next_flush = steady_clock::now() + period;
    if (batch.closed) {
      close_file();
      queue.finished();
      return;
    }
    if (batch.flush_ticket != 0) queue.flushed(batch.flush_ticket);
  }
}

void EventWriter::Impl::drop(int64_t step) {
  dropped.fetch_add(1, std::memory_order_relaxed);
  if (!warned_drop.exchange(true)) {
    warn(fmt::format(
        "EventWriter for {} is closed; dropping the event at step {} and any further ones "
        "until reopen().",
        logdir.string(), step));
  }
}

EventWriter::EventWriter(std::filesystem::path logdir, EventWriterOptions options) {
  if (options.max_queue < 1) {
    throw InvalidArgument(
        fmt::format("Invalid max_queue: {} (must be at least 1)", options.max_queue));
  }
  if (!(options.flush_secs > 0)) {
    throw InvalidArgument(
        fmt::format("Invalid flush_secs: {} (must be positive)", options.flush_secs));
  }
  if (logdir.empty()) throw InvalidArgument("Invalid logdir: empty path");
  options.env = options.env.or_else(Env::system());
  if (!options.file_io) options.file_io = std::make_shared<EventFileIo>();
  impl_ = std::make_unique<Impl>(std::move(logdir), std::move(options));
  impl_->open_file();
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

EventWriter::~EventWriter() { close(); }

void EventWriter::add_scalar(std::string_view tag, float value, int64_t step) {
  impl_->enqueue(step, [&](PendingEvent& e) {
    e.kind = PendingEvent::Kind::kScalar;
    e.value = value;
    e.tag.assign(tag);
  });
}

void EventWriter::add_histogram(std::string_view tag, const at::Tensor& values, int64_t step) {
  Summary s;
  s.add_histogram(tag, values);
  add_summary(std::move(s), step);
}

void EventWriter::add_image(std::string_view tag, const at::Tensor& images, int64_t step,
                            const ImageOptions& options) {
  Summary s;
  s.add_image(tag, images, options);
  add_summary(std::move(s), step);
}

void EventWriter::add_text(std::string_view tag, std::string_view text, int64_t step) {
  Summary s;
  s.add_text(tag, text);
  add_summary(std::move(s), step);
}

void EventWriter::add_session_log(SessionStatus status, std::string_view checkpoint_path,
                                  std::string_view msg, int64_t step) {
  std::string log = serialize_session_log(status, checkpoint_path, msg);
  impl_->enqueue(step, [&](PendingEvent& e) {
    e.kind = PendingEvent::Kind::kSessionLog;
    e.payload = std::move(log);
  });
}

void EventWriter::add_graph(const GraphDef& graph, int64_t step) {
  std::string bytes = serialize_graph_def(graph);
  impl_->enqueue(step, [&](PendingEvent& e) {
    e.kind = PendingEvent::Kind::kGraph;
    e.payload = std::move(bytes);
  });
}

void EventWriter::add_summary(const Summary& summary, int64_t step) {
  impl_->enqueue(step, [&](PendingEvent& e) {
    e.kind = PendingEvent::Kind::kSummary;
    e.values = summary.values_;
  });
}

void EventWriter::add_summary(Summary&& summary, int64_t step) {
  impl_->enqueue(step, [&](PendingEvent& e) {
    e.kind = PendingEvent::Kind::kSummary;
    e.values = std::move(summary.values_);
  });
}

void EventWriter::flush() { impl_->queue.flush(); }

void EventWriter::close() {
  std::lock_guard lock(impl_->lifecycle_mu);
  if (impl_->closed) return;
  impl_->queue.close();
  impl_->thread.join();
  impl_->closed = true;
}

void EventWriter::reopen() {
  std::lock_guard lock(impl_->lifecycle_mu);
  if (!impl_->closed) return;
  impl_->open_file();
  impl_->queue.reopen();
  impl_->warned_drop = false;
  impl_->closed = false;
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

bool EventWriter::closed() const { return impl_->closed; }

const std::filesystem::path& EventWriter::logdir() const { return impl_->logdir; }

std::filesystem::path EventWriter::file_path() const {
  std::lock_guard lock(impl_->path_mu);
  return impl_->path;
}

int64_t EventWriter::dropped_events() const { return impl_->dropped; }

namespace {
std::mutex cache_mu;
// Destroyed at exit, which closes (and so flushes) every cached writer.
std::map<std::string, std::shared_ptr<EventWriter>>& cache() {
  static std::map<std::string, std::shared_ptr<EventWriter>> writers;
  return writers;
}
}  // namespace

std::shared_ptr<EventWriter> EventWriter::for_logdir(const std::filesystem::path& logdir) {
  const std::string key = cache_key(logdir);
  std::lock_guard lock(cache_mu);
  auto& writer = cache()[key];
  if (!writer) writer = std::make_shared<EventWriter>(key);
  return writer;
}

void EventWriter::clear_cache() {
  std::map<std::string, std::shared_ptr<EventWriter>> writers;
  {
    std::lock_guard lock(cache_mu);
    writers.swap(cache());
  }
  for (auto& [key, writer] : writers) writer->close();
}

}  // namespace trainhooks::summary
