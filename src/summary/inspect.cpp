#include "trainhooks/summary/inspect.h"

#include <algorithm>
#include <array>
#include <map>

#include <fmt/format.h>

namespace trainhooks::summary {
namespace {

namespace fs = std::filesystem;

bool has_event_files(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file(ec) && is_event_file_name(entry.path().filename().string())) {
      return true;
    }
  }
  return false;
}

std::string run_name(const fs::path& logdir, const fs::path& run) {
  if (fs::is_regular_file(run)) return run.filename().string();
  std::string rel = run.lexically_relative(logdir).string();
  return rel.empty() ? "." : rel;
}

// Floats (every simple_value and DT_FLOAT scalar) print in their own shortest form, so 0.1f
// shows as 0.1 rather than 0.10000000149011612.
std::string format_value(double v) {
  const auto f = static_cast<float>(v);
  if (static_cast<double>(f) == v) return fmt::format("{}", f);
  return fmt::format("{}", v);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

template <typename Visit>
void for_each_event(const fs::path& logdir, const InspectOptions& options, Visit&& visit) {
  for (const fs::path& dir : find_run_directories(logdir)) {
    EventReader reader(dir, options.read);
    const std::string name = run_name(logdir, dir);
    visit(name, dir, reader);
  }
}

}  // namespace

std::vector<fs::path> find_run_directories(const fs::path& logdir) {
  std::error_code ec;
  if (fs::is_regular_file(logdir, ec)) return {logdir};
  if (!fs::is_directory(logdir, ec)) {
    throw EventFileError(fmt::format("No such directory: {}", logdir.string()), logdir, 0);
  }
  std::vector<fs::path> runs;
  if (has_event_files(logdir)) runs.push_back(logdir);
  fs::recursive_directory_iterator it(logdir, fs::directory_options::skip_permission_denied, ec);
  if (ec) {
    throw EventFileError(fmt::format("Cannot list {}: {}", logdir.string(), ec.message()), logdir,
                         0);
  }
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_directory(ec) && has_event_files(it->path())) runs.push_back(it->path());
  }
  std::sort(runs.begin(), runs.end(), [&](const fs::path& a, const fs::path& b) {
    return run_name(logdir, a) < run_name(logdir, b);
  });
  return runs;
}

std::vector<RunStats> inspect_logdir(const fs::path& logdir, const InspectOptions& options) {
  std::vector<RunStats> runs;
  for_each_event(
      logdir, options, [&](const std::string& name, const fs::path& dir, EventReader& reader) {
        RunStats run{.name = name, .directory = dir, .files = reader.files()};
        std::map<std::string, TagStats> tags;
        while (auto event = reader.next()) {
          ++run.events;
          if (event->session_log && event->session_log->status == SessionStatus::kStart) {
            ++run.session_starts;
          }
          for (const EventValue& v : event->values) {
            if (!options.tag.empty() && v.tag != options.tag) continue;
            TagStats& t = tags[v.tag];
            if (t.count == 0) {
              t.tag = v.tag;
              t.kind = v.kind;
              t.min_step = t.max_step = event->step;
            }
            ++t.count;
            t.min_step = std::min(t.min_step, event->step);
            t.max_step = std::max(t.max_step, event->step);
            if (!v.plugin_name.empty()) t.plugin_name = v.plugin_name;
            if (v.kind == ValueKind::kScalar) t.last_value = v.scalar;
            t.last_wall_time = event->wall_time;
          }
        }
        for (auto& [tag, stats] : tags) run.tags.push_back(std::move(stats));
        runs.push_back(std::move(run));
      });
  return runs;
}

void print_runs(std::ostream& out, const std::vector<RunStats>& runs) {
  if (runs.empty()) {
    out << "No event files found.\n";
    return;
  }
  for (size_t r = 0; r < runs.size(); ++r) {
    const RunStats& run = runs[r];
    if (r > 0) out << "\n";
    out << fmt::format("run {} ({}, {} file{}, {} event{})\n", run.name, run.directory.string(),
                       run.files.size(), run.files.size() == 1 ? "" : "s", run.events,
                       run.events == 1 ? "" : "s");
    if (run.tags.empty()) {
      out << "  no summary values\n";
      continue;
    }
    std::vector<std::array<std::string, 5>> rows = {{"tag", "kind", "count", "steps", "last"}};
    for (const TagStats& t : run.tags) {
      std::string steps = t.min_step == t.max_step ? fmt::format("{}", t.min_step)
                                                   : fmt::format("{}..{}", t.min_step, t.max_step);
      rows.push_back({t.tag, value_kind_name(t.kind), fmt::format("{}", t.count), steps,
                      t.last_value ? format_value(*t.last_value) : "-"});
    }
    std::array<size_t, 5> width{};
    for (const auto& row : rows) {
      for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    for (const auto& row : rows) {
      out << fmt::format("  {:<{}}  {:<{}}  {:>{}}  {:<{}}  {}\n", row[0], width[0], row[1],
                         width[1], row[2], width[2], row[3], width[3], row[4]);
    }
  }
}

void write_scalars_csv(std::ostream& out, const fs::path& logdir, const InspectOptions& options) {
  out << "run,tag,step,wall_time,value\n";
  for_each_event(
      logdir, options, [&](const std::string& name, const fs::path&, EventReader& reader) {
        const std::string run = csv_field(name);
        while (auto event = reader.next()) {
          for (const EventValue& v : event->values) {
            if (v.kind != ValueKind::kScalar) continue;
            if (!options.tag.empty() && v.tag != options.tag) continue;
            out << run << ',' << csv_field(v.tag) << ',' << event->step << ','
                << fmt::format("{}", event->wall_time) << ',' << format_value(v.scalar) << '\n';
          }
        }
      });
}

}  // namespace trainhooks::summary
