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

namespace trainhooks::summary {
namespace {

// An event waiting for the writer thread. Slots are reused, so `tag` keeps its capacity.
struct PendingEvent {
  enum class Kind : uint8_t { kScalar, kSummary, kSessionLog };
  Kind kind = Kind::kScalar;
  float value = 0;
  int64_t step = 0;
  double wall_time = 0;
  std::string tag;                   // kScalar
  std::vector<EncodedValue> values;  // kSummary
  std::string payload;               // kSessionLog: a serialized SessionLog
};

// Bytes buffered by the writer thread before a write(2) between flushes.
constexpr size_t kWriteChunk = 64 * 1024;

std::string hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

// Writes all of `data`; false with errno set on failure.
bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
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
  std::string buffer;
  std::unordered_set<std::string> tags_with_metadata;
  std::vector<uint8_t> with_metadata;
  bool warned_write = false;

  double now() const { return options.env.clock->wall_seconds(); }

  void warn(const std::string& message) const { options.env.warning(message); }

  void open_file();
  void run();
  void encode(PendingEvent& event);
  bool first_use(const std::string& tag) { return tags_with_metadata.insert(tag).second; }
  void write_buffer();
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
  warned_write = false;
  buffer.clear();
  append_file_version_event(buffer, wall_time);
  write_buffer();
}

void EventWriter::Impl::write_buffer() {
  if (buffer.empty()) return;
  if (!write_all(fd, buffer.data(), buffer.size()) && !warned_write) {
    warned_write = true;
    std::lock_guard lock(path_mu);
    warn(fmt::format("Failed to write events to {}: {}", path.string(), std::strerror(errno)));
  }
  buffer.clear();
}

void EventWriter::Impl::encode(PendingEvent& e) {
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
      // Durable at close; per-flush fsync would cost a disk round trip every flush_secs.
      ::fsync(fd);
      ::close(fd);
      fd = -1;
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
