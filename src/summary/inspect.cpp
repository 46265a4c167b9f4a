#include "trainhooks/summary/inspect.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "trainhooks/summary/graph_def.h"

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

// What the tables and CSV rows need of an event kept for a purge: not image, histogram or
// text payloads.
void strip_payload(Event& e) {
  for (EventValue& v : e.values) {
    v.histogram.reset();
    if (v.image) v.image->encoded.clear();
    v.text.clear();
  }
}

// The last column of an HParams summary's row.
std::string hparams_summary(const HParamsValue& h) {
  switch (h.kind) {
    case HParamsValue::Kind::kExperiment:
      return fmt::format("{} hparam{}, {} metric{}", h.values.size(),
                         h.values.size() == 1 ? "" : "s", h.metrics.size(),
                         h.metrics.size() == 1 ? "" : "s");
    case HParamsValue::Kind::kSessionStart:
      return fmt::format("{} value{}", h.values.size(), h.values.size() == 1 ? "" : "s");
    case HParamsValue::Kind::kSessionEnd:
      return hparams_status_name(h.status);
  }
  return "-";
}

std::string metric_name(const HParamsMetric& m) {
  return m.group.empty() ? m.tag : m.group + "/" + m.tag;
}

std::string layout_summary(const LayoutValue& layout) {
  return fmt::format("{} categor{}, {} chart{}", layout.categories.size(),
                     layout.categories.size() == 1 ? "y" : "ies", layout.charts,
                     layout.charts == 1 ? "" : "s");
}

}  // namespace

int64_t inspect_run(const fs::path& logdir, const fs::path& dir, const InspectOptions& options,
                    RunStats& out, std::ostream* csv) {
  out = RunStats{.name = run_name(logdir, dir), .directory = dir};
  std::map<std::string, TagStats> tags;
  int64_t rows = 0;
  const std::string csv_run = csv_field(out.name);
  auto visit = [&](const Event& event) {
    for (const EventValue& v : event.values) {
      if (!options.tag.empty() && v.tag != options.tag) continue;
      TagStats& t = tags[v.tag];
      if (t.count == 0) {
        t.tag = v.tag;
        t.kind = v.kind;
        t.min_step = t.max_step = event.step;
      }
      ++t.count;
      t.min_step = std::min(t.min_step, event.step);
      t.max_step = std::max(t.max_step, event.step);
      if (!v.plugin_name.empty()) t.plugin_name = v.plugin_name;
      if (v.kind == ValueKind::kScalar) t.last_value = v.scalar;
      if (v.layout) t.last_layout = v.layout;
      if (v.hparams) {
        t.last_hparams = v.hparams;
        auto& first = v.hparams->kind == HParamsValue::Kind::kExperiment ? out.hparams_experiment
                      : v.hparams->kind == HParamsValue::Kind::kSessionStart ? out.hparams_start
                                                                             : out.hparams_end;
        if (!first) first = v.hparams;
      }
      t.last_wall_time = event.wall_time;
      if (csv && v.kind == ValueKind::kScalar) {
        *csv << csv_run << ',' << csv_field(v.tag) << ',' << event.step << ','
             << fmt::format("{}", event.wall_time) << ',' << format_value(v.scalar) << '\n';
        ++rows;
      }
    }
  };
  const bool purge = options.read.purge_orphaned_data;
  RestartFilter filter;
  std::optional<EventReader> reader;
  // Runs on success and on error, so that what was read before an error is reported.
  auto finish = [&] {
    if (reader) {
      out.corrupt_records = reader->corrupt_records();
      out.partial_records = reader->partial_records();
    }
    if (purge) {
      out.purges = filter.purges();
      for (const Event& e : filter.events()) visit(e);
    }
    for (auto& [tag, stats] : tags) out.tags.push_back(std::move(stats));
  };
  try {
    reader.emplace(dir, options.read);
    out.files = reader->files();
    while (auto event = reader->next()) {
      ++out.events;
      if (event->session_log && event->session_log->status == SessionStatus::kStart) {
        ++out.session_starts;
      }
      if (event->graph_def || event->meta_graph_def) ++out.graphs;
      if (event->graph_def) {
        out.graph_nodes = out.graph_edges = -1;
        try {
          const GraphDef graph = parse_graph_def(event->graph_def_data);
          out.graph_nodes = static_cast<int64_t>(graph.nodes.size());
          out.graph_edges = 0;
          for (const NodeDef& n : graph.nodes)
            out.graph_edges += static_cast<int64_t>(n.inputs.size());
        } catch (const DataLossError&) {
          // Counted as a graph; its size is unknown.
        }
        event->graph_def_data.clear();
      }
      if (purge) {
        strip_payload(*event);
        filter.add(std::move(*event));
      } else {
        visit(*event);
      }
    }
  } catch (const EventFileError&) {
    finish();
    throw;
  }
  finish();
  return rows;
}

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
  for (const fs::path& dir : find_run_directories(logdir)) {
    inspect_run(logdir, dir, options, runs.emplace_back());
  }
  return runs;
}

void print_run(std::ostream& out, const RunStats& run) {
  std::string extra;
  if (run.graphs > 0) extra += fmt::format(", {} graph{}", run.graphs, run.graphs == 1 ? "" : "s");
  if (run.corrupt_records > 0) {
    extra += fmt::format(", {} corrupt record{} skipped", run.corrupt_records,
                         run.corrupt_records == 1 ? "" : "s");
  }
  out << fmt::format("run {} ({}, {} file{}, {} event{}{})\n", run.name, run.directory.string(),
                     run.files.size(), run.files.size() == 1 ? "" : "s", run.events,
                     run.events == 1 ? "" : "s", extra);
  if (run.tags.empty()) {
    out << "  no summary values\n";
  } else {
    std::vector<std::array<std::string, 5>> rows = {{"tag", "kind", "count", "steps", "last"}};
    for (const TagStats& t : run.tags) {
      std::string steps = t.min_step == t.max_step ? fmt::format("{}", t.min_step)
                                                   : fmt::format("{}..{}", t.min_step, t.max_step);
      std::string last = "-";
      if (t.last_value) {
        last = format_value(*t.last_value);
      } else if (t.last_layout) {
        last = layout_summary(*t.last_layout);
      } else if (t.last_hparams) {
        last = hparams_summary(*t.last_hparams);
      }
      rows.push_back({t.tag, value_kind_name(t.kind), fmt::format("{}", t.count), steps, last});
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
  if (run.graph_nodes >= 0) {
    out << fmt::format("  graph: {} node{}, {} edge{}\n", run.graph_nodes,
                       run.graph_nodes == 1 ? "" : "s", run.graph_edges,
                       run.graph_edges == 1 ? "" : "s");
  }
  if (run.hparams_start) {
    std::string values;
    for (const auto& [name, value] : run.hparams_start->values) {
      values += fmt::format("{}{}={}", values.empty() ? "" : ", ", name, value.to_string());
    }
    out << "  hparams: " << (values.empty() ? "none" : values);
    if (!run.hparams_start->group_name.empty()) {
      out << fmt::format(" (group {})", run.hparams_start->group_name);
    }
    out << "\n";
  }
  if (run.hparams_experiment && !run.hparams_experiment->metrics.empty()) {
    std::string metrics;
    for (const HParamsMetric& m : run.hparams_experiment->metrics) {
      metrics += (metrics.empty() ? "" : ", ") + metric_name(m);
    }
    out << "  hparams metrics: " << metrics << "\n";
  }
  if (run.hparams_end) {
    out << "  hparams status: " << hparams_status_name(run.hparams_end->status) << "\n";
  } else if (run.hparams_start) {
    out << "  hparams status: no session end (running, stopped by a signal, or killed)\n";
  }
  for (const Purge& p : run.purges) out << "  " << describe_purge(p) << "\n";
}

void print_runs(std::ostream& out, const std::vector<RunStats>& runs) {
  if (runs.empty()) {
    out << "No event files found.\n";
    return;
  }
  for (size_t r = 0; r < runs.size(); ++r) {
    if (r > 0) out << "\n";
    print_run(out, runs[r]);
  }
}

int64_t write_scalars_csv(std::ostream& out, const fs::path& logdir,
                          const InspectOptions& options) {
  out << "run,tag,step,wall_time,value\n";
  int64_t rows = 0;
  for (const fs::path& dir : find_run_directories(logdir)) {
    RunStats run;
    rows += inspect_run(logdir, dir, options, run, &out);
  }
  return rows;
}

}  // namespace trainhooks::summary
