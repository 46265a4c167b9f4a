#include "trainhooks/board/board_api.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "board/api_histogram.h"
#include "board/api_views.h"
#include "board/downsample.h"
#include "board/url_encode.h"
#include "trainhooks/errors.h"
#include "trainhooks/summary/graph_def.h"
#include "util/json_writer.h"

namespace trainhooks::board {
namespace {

using trainhooks::internal::append_json_array;
using trainhooks::internal::append_json_number;
using trainhooks::internal::append_json_string;
using trainhooks::internal::JsonArray;
using trainhooks::internal::JsonObject;
using Query = std::map<std::string, std::string>;
using summary::ValueKind;

// A request the API refuses; handle() turns it into {"error": message}.
struct ApiError {
  int status;
  std::string message;
};

ApiResponse json(std::string body) { return {200, "application/json", std::move(body)}; }

ApiResponse error_response(int status, std::string_view message) {
  std::string body = "{\"error\": ";
  append_json_string(body, message);
  body += '}';
  return {status, "application/json", std::move(body)};
}

const std::string& required(const Query& query, const char* name) {
  const auto it = query.find(name);
  if (it == query.end()) throw ApiError{400, fmt::format("missing parameter '{}'", name)};
  return it->second;
}

std::optional<int64_t> integer(const Query& query, const char* name) {
  const auto it = query.find(name);
  if (it == query.end()) return std::nullopt;
  const std::string& text = it->second;
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    throw ApiError{400, fmt::format("parameter '{}' must be an integer, got '{}'", name, text)};
  }
  return value;
}

// Whether one of the '/'-separated components of `name` is "..".
bool has_parent_component(std::string_view name) {
  for (size_t begin = 0; begin <= name.size();) {
    const size_t end = std::min(name.find('/', begin), name.size());
    if (name.substr(begin, end - begin) == "..") return true;
    begin = end + 1;
  }
  return false;
}

// Run names come from the index (directories under the log directory) and are only ever looked
// up there, never joined to a path; these are refused anyway, so that no request can even name
// a place outside the log directory. A ".." inside a component ("a..b") names nothing above it,
// and is a directory name like any other.
void check_run_name(const std::string& run) {
  const char* why = nullptr;
  if (has_parent_component(run)) {
    why = "has a '..' component";
  } else if (run.find('\0') != std::string::npos) {
    why = "contains a NUL";
  } else if (run.find('\\') != std::string::npos) {
    why = "contains a backslash";
  } else if (run.starts_with('/')) {
    why = "starts with '/'";
  }
  if (why == nullptr) return;
  throw ApiError{400, fmt::format("invalid run name '{}': {}", run, why)};
}

// The run and tag of a series request, checked: 400 for a missing or invalid parameter, 404 for
// a run or a tag of that kind that the index does not have.
struct Series {
  std::string run;
  std::string tag;
};

Series series_request(const LogdirIndex& index, const Query& query, ValueKind kind) {
  Series s{required(query, "run"), {}};
  check_run_name(s.run);
  s.tag = required(query, "tag");
  const std::optional<RunInfo> run = index.run(s.run);
  if (!run) throw ApiError{404, fmt::format("unknown run '{}'", s.run)};
  const bool found = std::any_of(run->tags.begin(), run->tags.end(), [&](const TagInfo& t) {
    return t.kind == kind && t.tag == s.tag;
  });
  if (!found) {
    throw ApiError{404, fmt::format("run '{}' has no {} tag '{}'", s.run,
                                    summary::value_kind_name(kind), s.tag)};
  }
  return s;
}

// "key": [value(0),value(1),...]: one column of a series, numbers only.
template <typename Value>
void add_column(JsonObject& o, const char* key, size_t n, Value value) {
  JsonArray a(o.key(key), ",");
  for (size_t k = 0; k < n; ++k) append_json_number(a.next(), value(k));
}

void add_head(JsonObject& o, const Series& s) { o.text("run", s.run).text("tag", s.tag); }

void append_tag_info(std::string& out, const TagInfo& t) {
  JsonObject(out)
      .text("tag", t.tag)
      .number("count", t.count)
      .number("min_step", t.min_step)
      .number("max_step", t.max_step)
      .number("last_wall_time", t.last_wall_time);
}

ApiResponse runs_response(const LogdirIndex& index) {
  std::vector<RunInfo> runs = index.runs();
  std::stable_sort(runs.begin(), runs.end(),
                   [](const RunInfo& a, const RunInfo& b) { return a.name < b.name; });
  static constexpr std::pair<ValueKind, const char*> kGroups[] = {
      {ValueKind::kScalar, "scalars"},
      {ValueKind::kHistogram, "histograms"},
      {ValueKind::kImage, "images"},
      {ValueKind::kText, "text"}};
  std::string out;
  {
    JsonObject top(out);
    JsonArray list(top.key("runs"));
    for (RunInfo& run : runs) {
      std::stable_sort(run.tags.begin(), run.tags.end(),
                       [](const TagInfo& a, const TagInfo& b) { return a.tag < b.tag; });
      JsonObject o(list.next());
      o.text("name", run.name)
          .number("last_wall_time", run.last_wall_time)
          .number("events", run.events)
          .number("corrupt_records", run.corrupt_records)
          .number("purged_values", run.purged_values)
          .flag("graph", run.graph)
          .flag("hparams", run.hparams);
      JsonObject groups(o.key("tags"));
      for (const auto& [kind, name] : kGroups) {
        JsonArray tags(groups.key(name));
        for (const TagInfo& t : run.tags) {
          if (t.kind == kind) append_tag_info(tags.next(), t);
        }
      }
    }
  }
  return json(std::move(out));
}

// A scalar series as a file to download (`format=csv` or `format=json`): every point in the range
// unless max_points says otherwise, in TensorBoard's download formats.
enum class Download { kNone, kCsv, kJson };

Download download_format(const Query& query) {
  const auto it = query.find("format");
  if (it == query.end()) return Download::kNone;
  if (it->second == "csv") return Download::kCsv;
  if (it->second == "json") return Download::kJson;
  throw ApiError{400,
                 fmt::format("parameter 'format' must be 'csv' or 'json', got '{}'", it->second)};
}

// A number as Python prints a float in TensorBoard's CSV ("nan", "inf", "-inf"); finite values
// in their shortest exact form, as in the JSON answers.
template <typename T>
void append_csv_number(std::string& out, T value) {
  if (std::isnan(value)) {
    out += "nan";
  } else if (std::isinf(value)) {
    out += value > 0 ? "inf" : "-inf";
  } else {
    append_json_number(out, value);
  }
}

// TensorBoard's scalar downloads: CSV "Wall time,Step,Value" with CRLF line ends (Python's csv
// module), JSON [[wall_time, step, value], ...].
std::string download_body(Download format, const ScalarSeries& series,
                          const std::vector<size_t>& kept) {
  std::string out;
  out.reserve(32 + kept.size() * 40);
  if (format == Download::kCsv) {
    out += "Wall time,Step,Value\r\n";
    for (const size_t k : kept) {
      append_csv_number(out, series.wall_times[k]);
      out += ',';
      append_json_number(out, series.steps[k]);
      out += ',';
      append_csv_number(out, series.values[k]);
      out += "\r\n";
    }
    return out;
  }
  {
    JsonArray rows(out, ",");
    for (const size_t k : kept) {
      JsonArray row(rows.next());
      append_json_number(row.next(), series.wall_times[k]);
      append_json_number(row.next(), series.steps[k]);
      append_json_number(row.next(), series.values[k]);
    }
  }
  return out;
}

ApiResponse scalars_response(const LogdirIndex& index, const Query& query) {
  const Series s = series_request(index, query, ValueKind::kScalar);
  const Download download = download_format(query);
  // A download has every point unless asked for fewer; the page's chart a display's worth.
  const int64_t max_points = integer(query, "max_points")
                                 .value_or(download == Download::kNone ? BoardApi::kDefaultMaxPoints
                                                                       : BoardApi::kMaxMaxPoints);
  if (max_points < 2 || max_points > BoardApi::kMaxMaxPoints) {
    throw ApiError{400, fmt::format("max_points must be between 2 and {}, got {}",
                                    BoardApi::kMaxMaxPoints, max_points)};
  }
  const std::optional<int64_t> start = integer(query, "start_step");
  const std::optional<int64_t> end = integer(query, "end_step");
  if (start && end && *start > *end) {
    throw ApiError{400, fmt::format("start_step {} is after end_step {}", *start, *end)};
  }
  const ScalarSeries series = index.scalars(s.run, s.tag);
  const auto& steps = series.steps;
  const size_t lo =
      start ? std::lower_bound(steps.begin(), steps.end(), *start) - steps.begin() : 0;
  const size_t hi =
      end ? std::upper_bound(steps.begin(), steps.end(), *end) - steps.begin() : steps.size();
  const size_t in_range = hi > lo ? hi - lo : 0;
  const bool downsampled = in_range > static_cast<size_t>(max_points);
  std::vector<size_t> kept;
  if (download != Download::kNone && !query.contains("max_points")) {
    kept.resize(in_range);
    std::iota(kept.begin(), kept.end(), lo);
  } else {
    kept = internal::downsample_indices(series.values, lo, std::max(lo, hi), max_points);
  }
  if (download != Download::kNone) {
    const bool csv = download == Download::kCsv;
    return {200, csv ? "text/csv; charset=utf-8" : "application/json",
            download_body(download, series, kept),
            internal::content_disposition(
                fmt::format("run-{}-tag-{}.{}", s.run, s.tag, csv ? "csv" : "json"))};
  }

  std::string out;
  // Digits of a step, a wall time and a float, with separators; a reallocation or two at most.
  out.reserve(256 + s.run.size() + s.tag.size() + kept.size() * 48);
  {
    JsonObject o(out);
    add_head(o, s);
    o.number("total", steps.size()).number("in_range", in_range).flag("downsampled", downsampled);
    add_column(o, "steps", kept.size(), [&](size_t k) { return series.steps[kept[k]]; });
    add_column(o, "wall_times", kept.size(), [&](size_t k) { return series.wall_times[kept[k]]; });
    add_column(o, "values", kept.size(), [&](size_t k) { return series.values[kept[k]]; });
  }
  return json(std::move(out));
}

ApiResponse histograms_response(const LogdirIndex& index, const Query& query) {
  const Series s = series_request(index, query, ValueKind::kHistogram);
  const std::vector<HistogramPoint> points = index.histograms(s.run, s.tag);
  std::string out;
  {
    JsonObject o(out);
    add_head(o, s);
    o.numbers("basis_points", internal::kHistogramBasisPoints);
    add_column(o, "steps", points.size(), [&](size_t k) { return points[k].step; });
    add_column(o, "wall_times", points.size(), [&](size_t k) { return points[k].wall_time; });
    {
      JsonArray bands(o.key("bands"), ",");
      for (const HistogramPoint& p : points) {
        append_json_array(bands.next(), internal::compress_histogram(p.histogram));
      }
    }
    std::string& last = o.key("last");
    if (points.empty()) {
      last += "null";
    } else {
      const HistogramPoint& p = points.back();
      JsonObject(last)
          .number("step", p.step)
          .number("min", p.histogram.min)
          .number("max", p.histogram.max)
          .numbers("bucket_limits", p.histogram.bucket_limits)
          .numbers("buckets", p.histogram.buckets);
    }
  }
  return json(std::move(out));
}

ApiResponse images_response(const LogdirIndex& index, const Query& query) {
  const Series s = series_request(index, query, ValueKind::kImage);
  const std::vector<ImagePoint> points = index.images(s.run, s.tag);
  std::string out;
  {
    JsonObject o(out);
    add_head(o, s);
    JsonArray list(o.key("images"));
    for (size_t k = 0; k < points.size(); ++k) {
      const ImagePoint& p = points[k];
      JsonObject(list.next())
          .number("index", k)
          .number("step", p.step)
          .number("wall_time", p.wall_time)
          .number("width", p.image.width)
          .number("height", p.image.height);
    }
  }
  return json(std::move(out));
}

ApiResponse image_response(const LogdirIndex& index, const Query& query) {
  const Series s = series_request(index, query, ValueKind::kImage);
  const std::optional<int64_t> i = integer(query, "index");
  if (!i) throw ApiError{400, "missing parameter 'index'"};
  std::vector<ImagePoint> points = index.images(s.run, s.tag);
  if (*i < 0 || *i >= static_cast<int64_t>(points.size())) {
    throw ApiError{404, fmt::format("run '{}' tag '{}' has no image at index {} ({} kept)", s.run,
                                    s.tag, *i, points.size())};
  }
  std::string bytes = std::move(points[static_cast<size_t>(*i)].image.encoded);
  static constexpr std::string_view kPngMagic("\x89PNG\r\n\x1a\n", 8);
  const char* type = bytes.starts_with(kPngMagic) ? "image/png" : "application/octet-stream";
  return {200, type, std::move(bytes)};
}

ApiResponse text_response(const LogdirIndex& index, const Query& query) {
  const Series s = series_request(index, query, ValueKind::kText);
  const std::vector<TextPoint> points = index.text(s.run, s.tag);
  std::string out;
  {
    JsonObject o(out);
    add_head(o, s);
    JsonArray list(o.key("text"));
    for (const TextPoint& p : points) {
      JsonObject(list.next())
          .number("step", p.step)
          .number("wall_time", p.wall_time)
          .text("text", p.text);
    }
  }
  return json(std::move(out));
}

// The run's latest graph event: 400 for a missing or invalid run, 404 for a run the index does
// not have or one without a graph, 422 for a graph event that holds no GraphDef.
ApiResponse graph_response(const LogdirIndex& index, const Query& query) {
  const std::string& run = required(query, "run");
  check_run_name(run);
  if (!index.run(run)) throw ApiError{404, fmt::format("unknown run '{}'", run)};
  const std::optional<RunGraph> graph = index.graph(run);
  if (!graph) throw ApiError{404, fmt::format("run '{}' has no graph", run)};
  summary::GraphDef def;
  try {
    def = summary::parse_graph_def(graph->graph_def);
  } catch (const DataLossError& e) {
    throw ApiError{
        422, fmt::format("run '{}' has a graph event that is not a GraphDef: {}", run, e.what())};
  }
  return json(internal::graph_json(run, *graph, def));
}

}  // namespace

BoardApi::BoardApi(const LogdirIndex& index) : index_(index) {}

ApiResponse BoardApi::handle(std::string_view path, const Query& query) const {
  try {
    if (path == "/api/runs") return runs_response(index_);
    if (path == "/api/scalars") return scalars_response(index_, query);
    if (path == "/api/histograms") return histograms_response(index_, query);
    if (path == "/api/images") return images_response(index_, query);
    if (path == "/api/image") return image_response(index_, query);
    if (path == "/api/text") return text_response(index_, query);
    if (path == "/api/graph") return graph_response(index_, query);
    if (path == "/api/hparams") return json(internal::hparams_json(index_));
    return error_response(404, fmt::format("unknown endpoint '{}'", path));
  } catch (const ApiError& e) {
    return error_response(e.status, e.message);
  } catch (const NotFoundError& e) {
    // A run or tag that went away between the check and the read (the index refreshed).
    return error_response(404, e.what());
  } catch (const std::exception&) {
    // The index never throws for what the files hold; anything else is a bug, and its text may
    // name paths, which responses do not.
    return error_response(500, fmt::format("internal error answering {}", path.substr(0, 32)));
  }
}

}  // namespace trainhooks::board
