#include "trainhooks/board/logdir_index.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <shared_mutex>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "board/series.h"
#include "trainhooks/errors.h"
#include "trainhooks/summary/inspect.h"
#include "trainhooks/summary/restart_filter.h"

namespace trainhooks::board {
namespace {

namespace fs = std::filesystem;
using internal::Reservoir;
using internal::Sample;
using internal::ScalarColumn;
using summary::Event;
using summary::EventValue;
using summary::ValueKind;

// Tensors, audio and layouts are listed, not served: a few samples keep their step range.
constexpr int64_t kOtherPerTag = 10;
// A refresh applies what it decoded in batches, so that it holds the exclusive lock briefly and
// a first load does not hold a large log directory's events in memory twice.
constexpr size_t kBatchEvents = 4096;
constexpr size_t kBatchValues = 65536;
constexpr size_t kBatchBytes = size_t{64} << 20;  // of images, histograms and text

template <typename Data>
struct Tag {
  Data data;
  std::string plugin_name{};
};

template <typename Data>
using TagMap = std::unordered_map<std::string, Tag<Data>>;

// What the index holds of one run; guarded by Impl::mu.
struct RunData {
  std::string name;
  TagMap<ScalarColumn> scalars;
  TagMap<Reservoir<summary::HistogramValue>> histograms;
  TagMap<Reservoir<summary::ImageValue>> images;
  TagMap<Reservoir<std::string>> text;
  // Every other kind, by (tag, kind). A histogram or image the reader does not decode (a
  // TensorFlow 2 tensor) is a kTensor here, with its plugin_name.
  std::map<std::pair<std::string, ValueKind>, Tag<Reservoir<std::monostate>>> other;
  std::optional<RunGraph> graph;
  RunHParams hparams;
  summary::RestartDetector restart;
  int64_t files = 0;
  int64_t events = 0;
  int64_t corrupt_records = 0;
  int64_t purged_values = 0;
  double last_wall_time = 0;
};

// An event file being followed; touched by refresh() only.
struct FileState {
  std::optional<summary::EventReader> reader;
  // Bytes the reader has moved past, or fewer: a file that has not grown past this since is
  // not read, one that shrank below it is read again from the start.
  uint64_t consumed = 0;
  dev_t device = 0;
  ino_t inode = 0;
  int64_t corrupt = 0;     // of the reader's corrupt_records(), those already counted
  std::string last_error;  // warned about already: a lasting problem is logged once
};

struct RunSource {
  fs::path dir;
  // A directory deleted and made again between two refreshes holds a new run.
  dev_t device = 0;
  ino_t inode = 0;
  RunData* data = nullptr;
  std::map<std::string, FileState> files;  // by file name, the order they are read in
};

std::string run_name(const fs::path& logdir, const fs::path& dir) {
  const std::string rel = dir.lexically_relative(logdir).generic_string();
  return rel.empty() ? "." : rel;
}

template <typename Data>
const Tag<Data>& find_tag(const TagMap<Data>& tags, const RunData& run, const std::string& tag,
                          const char* kind) {
  const auto it = tags.find(tag);
  if (it == tags.end()) {
    throw NotFoundError(fmt::format("run '{}' has no {} tag '{}'", run.name, kind, tag));
  }
  return it->second;
}

// A sampled tag's points (histograms, images, text) in step order.
template <typename Point, typename Data>
std::vector<Point> sampled_points(const TagMap<Data>& tags, const RunData& run,
                                  const std::string& tag, const char* kind) {
  std::vector<Point> out;
  for (auto& s : find_tag(tags, run, tag, kind).data.in_step_order()) {
    out.push_back({s.step, s.wall_time, std::move(s.payload)});
  }
  return out;
}

// The first summary of each kind, as TensorBoard keeps them: a resumed run's later start info
// does not replace the first, and a written end status is final.
void keep_hparams(RunHParams& kept, const summary::HParamsValue& value) {
  using Kind = summary::HParamsValue::Kind;
  std::optional<summary::HParamsValue>& slot = value.kind == Kind::kExperiment ? kept.experiment
                                               : value.kind == Kind::kSessionStart
                                                   ? kept.session_start
                                                   : kept.session_end;
  if (!slot) slot = value;
}

}  // namespace

struct LogdirIndex::Impl {
  fs::path logdir;
  LogdirIndexOptions options;
  Env env;  // options.env, completed with the system's

  mutable std::shared_mutex mu;
  std::map<std::string, std::unique_ptr<RunData>> runs;  // guarded by mu

  std::mutex refresh_mu;  // one refresh at a time; guards what follows
  std::map<std::string, RunSource> sources;
  std::string list_error;
  struct Pending {
    RunData* run;
    Event event;
  };
  std::vector<Pending> batch;
  size_t batch_values = 0;
  size_t batch_bytes = 0;
  std::vector<ScalarColumn*> unsorted;  // by the batch being applied

  const RunData& find_run(const std::string& name) const {
    const auto it = runs.find(name);
    if (it == runs.end()) throw NotFoundError(fmt::format("unknown run '{}'", name));
    return *it->second;
  }

  void warn_once(std::string& last, const std::string& message) {
    if (last == message) return;
    last = message;
    env.warning(message);
  }

  void list_runs(RefreshStats& stats);
  void read_run(RunSource& source, RefreshStats& stats);
  bool read_file(RunSource& source, const std::string& name, FileState& file, RefreshStats& stats);
  void add(RunData* run, Event event);
  void flush(const std::function<void()>& also = {});
  void apply(RunData& run, Event& event);
  void add_value(RunData& run, int64_t step, double wall_time, EventValue& value);
  void purge(RunData& run, const summary::PurgeDecision& decision, const Event& by);
  static RunInfo info(const RunData& run);
};

void LogdirIndex::Impl::list_runs(RefreshStats& stats) {
  std::vector<fs::path> dirs;
  try {
    dirs = summary::find_run_directories(logdir);
    list_error.clear();
  } catch (const std::exception& e) {
    warn_once(list_error, e.what());
  }
  // A run whose directory is gone is removed; one whose files are gone keeps its values.
  std::vector<std::unique_ptr<RunData>> removed;
  for (auto it = sources.begin(); it != sources.end();) {
    struct stat st {};
    const bool gone = ::stat(it->second.dir.c_str(), &st) == 0
                          ? !S_ISDIR(st.st_mode) || st.st_ino != it->second.inode ||
                                st.st_dev != it->second.device
                          : errno == ENOENT || errno == ENOTDIR;
    if (!gone) {
      ++it;
      continue;
    }
    {
      std::unique_lock lock(mu);
      const auto run = runs.find(it->first);
      removed.push_back(std::move(run->second));
      runs.erase(run);
    }
    it = sources.erase(it);
  }
  removed.clear();  // freed outside the lock
  for (const fs::path& dir : dirs) {
    std::string name = run_name(logdir, dir);
    struct stat st {};
    if (sources.contains(name) || ::stat(dir.c_str(), &st) != 0) continue;
    auto data = std::make_unique<RunData>();
    data->name = name;
    RunSource& source = sources[name];
    source.dir = dir;
    source.device = st.st_dev;
    source.inode = st.st_ino;
    source.data = data.get();
    std::unique_lock lock(mu);
    runs.emplace(std::move(name), std::move(data));
    ++stats.new_runs;
  }
}

void LogdirIndex::Impl::read_run(RunSource& source, RefreshStats& stats) {
  std::unordered_set<std::string> listed;
  std::error_code ec;
  for (fs::directory_iterator it(source.dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    std::string name = it->path().filename().string();
    if (it->is_regular_file(type_ec) && summary::is_event_file_name(name)) {
      listed.insert(std::move(name));
    }
  }
  if (!ec) {
    // A file deleted stops being followed; its values stay.
    std::erase_if(source.files, [&](const auto& entry) { return !listed.contains(entry.first); });
    for (const std::string& name : listed) {
      if (source.files.try_emplace(name).second) ++stats.new_files;
    }
  }
  int64_t corrupt = 0;
  for (auto it = source.files.begin(); it != source.files.end();) {
    const int64_t before = it->second.corrupt;
    if (!read_file(source, it->first, it->second, stats)) {
      it = source.files.erase(it);
      continue;
    }
    corrupt += it->second.corrupt - before;
    ++it;
  }
  RunData* run = source.data;
  const auto files = std::ssize(source.files);
  flush([&] {
    run->corrupt_records += corrupt;
    run->files = files;
  });
}

bool LogdirIndex::Impl::read_file(RunSource& source, const std::string& name, FileState& file,
                                  RefreshStats& stats) {
  const fs::path path = source.dir / name;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int error = errno;
    // A file deleted after it was read just stops being followed.
    if (!file.reader || error != ENOENT) {
      warn_once(file.last_error,
                fmt::format("Cannot read {}: {}", path.string(), std::strerror(error)));
    }
    return error != ENOENT;
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (file.reader &&
      (size < file.consumed || st.st_ino != file.inode || st.st_dev != file.device)) {
    env.info(fmt::format("{} was truncated or replaced; reading it again from the start",
                         path.string()));
    file.reader.reset();
  }
  if (!file.reader) {
    try {
      file.reader.emplace(path, summary::ReadOptions{.skip_corrupt = true, .env = env});
    } catch (const std::exception& e) {
      warn_once(file.last_error, e.what());
      return true;
    }
    file.consumed = 0;
    file.corrupt = 0;
    file.device = st.st_dev;
    file.inode = st.st_ino;
  } else if (size == file.consumed) {
    return true;  // nothing appended
  }
  try {
    while (auto event = file.reader->next()) {
      ++stats.records;
      add(source.data, std::move(*event));
    }
  } catch (const std::exception& e) {
    // The file cannot be opened, or its first record is no event: tried again next time.
    warn_once(file.last_error, e.what());
    file.corrupt = file.reader->corrupt_records();
    return true;
  }
  file.last_error.clear();
  file.corrupt = file.reader->corrupt_records();
  // The reader stopped at its partial record, or at an end that was at least `size`.
  file.consumed = size;
  for (const summary::PartialRecord& p : file.reader->partial_records()) {
    if (p.file == path) file.consumed = std::min(file.consumed, p.offset);
  }
  return true;
}

void LogdirIndex::Impl::add(RunData* run, Event event) {
  batch_values += event.values.size();
  batch_bytes += event.graph_def_data.size();
  for (const EventValue& v : event.values) {
    batch_bytes += v.text.size();
    if (v.image) batch_bytes += v.image->encoded.size();
    if (v.histogram) batch_bytes += v.histogram->buckets.size() * 2 * sizeof(double);
  }
  batch.push_back({run, std::move(event)});
  if (batch.size() >= kBatchEvents || batch_values >= kBatchValues || batch_bytes >= kBatchBytes) {
    flush();
  }
}

void LogdirIndex::Impl::flush(const std::function<void()>& also) {
  {
    std::unique_lock lock(mu);
    for (Pending& p : batch) apply(*p.run, p.event);
    for (ScalarColumn* column : unsorted) column->sort();
    if (also) also();
  }
  unsorted.clear();
  batch.clear();  // what is left of the events is freed outside the lock
  batch_values = 0;
  batch_bytes = 0;
}

void LogdirIndex::Impl::apply(RunData& run, Event& event) {
  ++run.events;
  run.last_wall_time = std::max(run.last_wall_time, event.wall_time);
  const summary::PurgeDecision decision = run.restart.add(event);
  if (decision.purge) purge(run, decision, event);
  if (event.graph_def) {
    run.graph = RunGraph{event.step, event.wall_time, std::move(event.graph_def_data)};
  }
  for (EventValue& value : event.values) add_value(run, event.step, event.wall_time, value);
}

void LogdirIndex::Impl::add_value(RunData& run, int64_t step, double wall_time, EventValue& v) {
  auto plugin = [&](auto& tag) {
    if (tag.plugin_name.empty()) tag.plugin_name = v.plugin_name;
  };
  auto sample = [&](auto& tags, int64_t max_size, auto payload) {
    auto it = tags.find(v.tag);
    if (it == tags.end()) {
      using Data = decltype(it->second.data);
      it = tags.emplace(std::move(v.tag), Tag<Data>{Data(max_size)}).first;
    }
    plugin(it->second);
    it->second.data.add({step, wall_time, std::move(payload)});
  };
  switch (v.kind) {
    case ValueKind::kScalar: {
      auto it = run.scalars.find(v.tag);
      if (it == run.scalars.end())
        it = run.scalars.emplace(std::move(v.tag), Tag<ScalarColumn>{}).first;
      plugin(it->second);
      if (it->second.data.add(step, wall_time, static_cast<float>(v.scalar))) {
        unsorted.push_back(&it->second.data);
      }
      return;
    }
    case ValueKind::kHistogram:
      if (!v.histogram) break;
      sample(run.histograms, options.max_histograms_per_tag, std::move(*v.histogram));
      return;
    case ValueKind::kImage:
      if (!v.image) break;
      sample(run.images, options.max_images_per_tag, std::move(*v.image));
      return;
    case ValueKind::kText:
      sample(run.text, options.max_text_per_tag, std::move(v.text));
      return;
    case ValueKind::kHParams:
      if (v.hparams) keep_hparams(run.hparams, *v.hparams);
      break;  // and listed as the other kinds are
    case ValueKind::kNone:
      return;  // a value without data
    default:
      break;
  }
  const ValueKind kind =
      v.kind == ValueKind::kHistogram || v.kind == ValueKind::kImage ? ValueKind::kTensor : v.kind;
  auto [it, inserted] = run.other.try_emplace(
      {std::move(v.tag), kind},
      Tag<Reservoir<std::monostate>>{Reservoir<std::monostate>(kOtherPerTag)});
  plugin(it->second);
  it->second.data.add({step, wall_time, {}});
}

void LogdirIndex::Impl::purge(RunData& run, const summary::PurgeDecision& d, const Event& by) {
  summary::Purge p{.restart = !d.by_tags, .step = d.step, .previous_step = d.previous_step};
  auto purge_all = [&](auto& tags) {
    for (auto& [tag, t] : tags) p.values += t.data.purge(d.step);
  };
  if (!d.by_tags) {
    purge_all(run.scalars);
    purge_all(run.histograms);
    purge_all(run.images);
    purge_all(run.text);
    purge_all(run.other);
  } else {
    std::set<std::string> tags;
    for (const EventValue& v : by.values) tags.insert(v.tag);
    auto purge_tag = [&](auto& map, const std::string& tag) {
      if (auto it = map.find(tag); it != map.end()) p.values += it->second.data.purge(d.step);
    };
    for (const std::string& tag : tags) {
      purge_tag(run.scalars, tag);
      purge_tag(run.histograms, tag);
      purge_tag(run.images, tag);
      purge_tag(run.text, tag);
      for (auto it = run.other.lower_bound({tag, ValueKind::kNone});
           it != run.other.end() && it->first.first == tag; ++it) {
        p.values += it->second.data.purge(d.step);
      }
    }
    p.tags.assign(tags.begin(), tags.end());
  }
  if (p.values == 0) return;
  run.purged_values += p.values;
  env.info(fmt::format("run '{}': {}", run.name, summary::describe_purge(p)));
}

RunInfo LogdirIndex::Impl::info(const RunData& run) {
  RunInfo out{.name = run.name,
              .files = run.files,
              .events = run.events,
              .corrupt_records = run.corrupt_records,
              .purged_values = run.purged_values,
              .last_wall_time = run.last_wall_time,
              .graph = run.graph.has_value(),
              .hparams = run.hparams.session_start.has_value()};
  auto list = [&](const auto& tags, ValueKind kind) {
    for (const auto& [tag, t] : tags) {
      TagInfo info = t.data.info();
      info.tag = tag;
      info.kind = kind;
      info.plugin_name = t.plugin_name;
      out.tags.push_back(std::move(info));
    }
  };
  list(run.scalars, ValueKind::kScalar);
  list(run.histograms, ValueKind::kHistogram);
  list(run.images, ValueKind::kImage);
  list(run.text, ValueKind::kText);
  for (const auto& [key, t] : run.other) {
    TagInfo info = t.data.info();
    info.tag = key.first;
    info.kind = key.second;
    info.plugin_name = t.plugin_name;
    out.tags.push_back(std::move(info));
  }
  std::sort(out.tags.begin(), out.tags.end(), [](const TagInfo& a, const TagInfo& b) {
    return std::tie(a.tag, a.kind) < std::tie(b.tag, b.kind);
  });
  return out;
}

LogdirIndex::LogdirIndex(std::filesystem::path logdir, LogdirIndexOptions options)
    : impl_(std::make_unique<Impl>()) {
  std::error_code ec;
  if (!fs::is_directory(logdir, ec)) {
    throw InvalidArgument(fmt::format("{} is not a directory", logdir.string()));
  }
  auto check = [](const char* name, int64_t value) {
    if (value < 0) throw InvalidArgument(fmt::format("Invalid {}: {}", name, value));
  };
  check("max_histograms_per_tag", options.max_histograms_per_tag);
  check("max_images_per_tag", options.max_images_per_tag);
  check("max_text_per_tag", options.max_text_per_tag);
  logdir = logdir.lexically_normal();
  if (!logdir.has_filename() && logdir.has_parent_path() && logdir != logdir.root_path()) {
    logdir = logdir.parent_path();  // "runs/" names its runs as "runs" does
  }
  impl_->logdir = std::move(logdir);
  impl_->env = options.env.or_else(Env::system());
  impl_->options = std::move(options);
}

LogdirIndex::~LogdirIndex() = default;

RefreshStats LogdirIndex::refresh() {
  Impl& s = *impl_;
  std::lock_guard refresh_lock(s.refresh_mu);
  RefreshStats stats;
  s.list_runs(stats);
  for (auto& [name, source] : s.sources) s.read_run(source, stats);
  return stats;
}

const std::filesystem::path& LogdirIndex::logdir() const { return impl_->logdir; }

std::vector<RunInfo> LogdirIndex::runs() const {
  std::shared_lock lock(impl_->mu);
  std::vector<RunInfo> out;
  out.reserve(impl_->runs.size());
  for (const auto& [name, run] : impl_->runs) out.push_back(Impl::info(*run));
  return out;
}

std::optional<RunInfo> LogdirIndex::run(const std::string& name) const {
  std::shared_lock lock(impl_->mu);
  const auto it = impl_->runs.find(name);
  if (it == impl_->runs.end()) return std::nullopt;
  return Impl::info(*it->second);
}

ScalarSeries LogdirIndex::scalars(const std::string& run, const std::string& tag) const {
  std::shared_lock lock(impl_->mu);
  const RunData& r = impl_->find_run(run);
  const ScalarColumn& c = find_tag(r.scalars, r, tag, "scalar").data;
  return {.steps = c.steps, .wall_times = c.wall_times, .values = c.values};
}

std::vector<HistogramPoint> LogdirIndex::histograms(const std::string& run,
                                                    const std::string& tag) const {
  std::shared_lock lock(impl_->mu);
  const RunData& r = impl_->find_run(run);
  return sampled_points<HistogramPoint>(r.histograms, r, tag, "histogram");
}

std::vector<ImagePoint> LogdirIndex::images(const std::string& run, const std::string& tag) const {
  std::shared_lock lock(impl_->mu);
  const RunData& r = impl_->find_run(run);
  return sampled_points<ImagePoint>(r.images, r, tag, "image");
}

std::vector<TextPoint> LogdirIndex::text(const std::string& run, const std::string& tag) const {
  std::shared_lock lock(impl_->mu);
  const RunData& r = impl_->find_run(run);
  return sampled_points<TextPoint>(r.text, r, tag, "text");
}

std::optional<RunGraph> LogdirIndex::graph(const std::string& run) const {
  std::shared_lock lock(impl_->mu);
  return impl_->find_run(run).graph;
}

RunHParams LogdirIndex::hparams(const std::string& run) const {
  std::shared_lock lock(impl_->mu);
  return impl_->find_run(run).hparams;
}

}  // namespace trainhooks::board
