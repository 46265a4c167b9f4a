#include "trainhooks/hooks/metrics_logger_hook.h"

#include <ATen/core/Tensor.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>

#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/hook_services.h"
#include "util/atomic_file.h"
#include "util/json_writer.h"

namespace trainhooks {

namespace {

constexpr const char* kMetricsLogger = "MetricsLoggerHook";

[[noreturn]] void throw_file_error(const std::string& what, const std::string& path, int err) {
  const std::string message =
      fmt::format("{}: cannot {} {}: {}", kMetricsLogger, what, path, std::strerror(err));
  if (err == ENOENT) throw NotFoundError(message);
  if (err == ENOSPC || err == EDQUOT) throw ResourceExhaustedError(message);
  if (err == EACCES || err == EPERM || err == EROFS || err == EISDIR)
    throw FailedPreconditionError(message);
  throw FileError(message);
}

// RFC 4180: a field with a comma, a quote or a line break is quoted, its quotes doubled.
std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string json_string(std::string_view s) {
  std::string out;
  internal::append_json_string(out, s);
  return out;
}

// The step at the start of a row this hook wrote (`200,...` or `{"step":200,...`); nullopt for
// anything else (a torn line).
std::optional<int64_t> row_step(std::string_view line, MetricsFormat format) {
  if (format == MetricsFormat::kJsonl) {
    constexpr std::string_view kPrefix = "{\"step\":";
    if (line.substr(0, kPrefix.size()) != kPrefix || line.back() != '}') return std::nullopt;
    line.remove_prefix(kPrefix.size());
  }
  int64_t step = 0;
  const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), step);
  if (ec != std::errc() || end == line.data() + line.size() || *end != ',') return std::nullopt;
  return step;
}

void append_value(std::string& line, double v, MetricsFormat format) {
  if (format == MetricsFormat::kJsonl && !std::isfinite(v)) {
    line += "null";  // JSON has no NaN or infinity
  } else {
    fmt::format_to(std::back_inserter(line), "{}", v);
  }
}

}  // namespace

MetricsLoggerHook::MetricsLoggerHook(MetricsLoggerHookOptions options)
    : options_(std::move(options)) {
  if (options_.path.empty()) throw InvalidArgument("MetricsLoggerHook: path must name a file");
  if (options_.every_n_steps <= 0) {
    throw InvalidArgument(fmt::format("{}: every_n_steps must be positive, got {}", kMetricsLogger,
                                      options_.every_n_steps));
  }
  if (options_.format != MetricsFormat::kCsv && options_.format != MetricsFormat::kJsonl) {
    throw InvalidArgument(fmt::format("{}: format must be kCsv or kJsonl, got {}", kMetricsLogger,
                                      static_cast<int>(options_.format)));
  }
  if (options_.nodes.empty() && options_.metrics.empty()) {
    throw InvalidArgument("MetricsLoggerHook: nodes or metrics must name at least one value");
  }
  for (const auto& ref : options_.nodes) {
    if (ref.is_name() && ref.name().empty())
      throw InvalidArgument("MetricsLoggerHook: nodes must not hold an empty name");
  }
  for (const auto& m : options_.metrics) {
    if (m.empty()) throw InvalidArgument("MetricsLoggerHook: metrics must not hold an empty name");
  }
}

MetricsLoggerHook::~MetricsLoggerHook() { close_file(); }

void MetricsLoggerHook::close_file() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void MetricsLoggerHook::begin() {
  nodes_.clear();
  columns_ = {"step", "wall_time"};
  for (const auto& ref : options_.nodes) {
    nodes_.push_back(graph().resolve(ref));
    columns_.push_back(graph().name(nodes_.back()));
  }
  for (const auto& m : options_.metrics) columns_.push_back(m);
  std::set<std::string_view> seen;
  for (const auto& c : columns_) {
    if (!seen.insert(c).second)
      throw InvalidArgument(fmt::format("{}: the column '{}' appears twice", kMetricsLogger, c));
  }
  metrics_ = &services().metrics();
  logging_ = false;
  close_file();
}

void MetricsLoggerHook::after_create_session(Session& session, Coordinator&) {
  close_file();
  const int64_t restored = session.global_step();
  const bool csv = options_.format == MetricsFormat::kCsv;
  std::string header;
  if (csv) {
    for (size_t i = 0; i < columns_.size(); ++i) header += (i ? "," : "") + csv_field(columns_[i]);
    header += '\n';
  }

  // What a previous run left: rows up to the restored step are kept, the rest (logged after the
  // checkpoint this session restored, or torn by a kill) dropped.
  std::string content;
  struct stat st;
  const bool exists = ::stat(options_.path.c_str(), &st) == 0;
  if (!exists && errno != ENOENT) throw_file_error("read", options_.path, errno);
  if (exists) {
    std::ifstream in(options_.path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    if (!in) throw_file_error("read", options_.path, errno ? errno : EIO);
    content = std::move(ss).str();
  }
  std::string kept;
  size_t pos = 0;
  if (csv && !content.empty()) {
    const size_t eol = content.find('\n');
    const std::string_view first(content.data(),
                                 eol == std::string::npos ? content.size() : eol + 1);
    if (first != header) {
      throw FailedPreconditionError(fmt::format(
          "{}: {} has the columns '{}', this hook writes '{}': use another path", kMetricsLogger,
          options_.path, first.substr(0, first.find('\n')), header.substr(0, header.size() - 1)));
    }
    pos = first.size();
  }
  kept = header;
  dropped_rows_ = 0;
  while (pos < content.size()) {
    const size_t eol = content.find('\n', pos);
    if (eol == std::string::npos) {  // a torn last line
      ++dropped_rows_;
      break;
    }
    const std::string_view line(content.data() + pos, eol - pos);
    const auto step = row_step(line, options_.format);
    if (step && *step <= restored) {
      kept.append(line).push_back('\n');
    } else {
      ++dropped_rows_;
    }
    pos = eol + 1;
  }
  if (!exists || kept != content) {
    // Crash-safe: a kill now leaves the old rows or the new ones, never a half-written file.
    internal::write_file_atomically(options_.path, kept);
  }
  if (dropped_rows_ > 0) {
    env().info(fmt::format("{}: dropped {} row{} of {} after step {}, which this run logs again.",
                           kMetricsLogger, dropped_rows_, dropped_rows_ == 1 ? "" : "s",
                           options_.path, restored));
  }
  // Publishes from before this session are not this run's (board versions belong to a process).
  seen_.clear();
  for (const auto& name : options_.metrics) {
    const auto m = metrics_->latest(name);
    seen_.emplace_back(m ? m->version : 0, m ? m->step : -1);
  }
  fd_ = ::open(options_.path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) throw_file_error("open", options_.path, errno);
}

SessionRunArgs MetricsLoggerHook::before_run(SessionRunContext&) {
  // The step this run produces, as SummarySaverHook counts.
  logging_ = (graph().global_step_value() + 1) % options_.every_n_steps == 0;
  if (!logging_ || nodes_.empty()) return {};
  return {.fetches = nodes_};
}

void MetricsLoggerHook::after_run(SessionRunContext&, const SessionRunValues& values) {
  if (!logging_) return;
  logging_ = false;
  write_row(graph().global_step_value(), values);
}

void MetricsLoggerHook::write_row(int64_t step, const SessionRunValues& values) {
  const bool csv = options_.format == MetricsFormat::kCsv;
  line_.clear();
  const double wall = env().clock->wall_seconds();
  if (csv) {
    fmt::format_to(std::back_inserter(line_), "{},{}", step, wall);
  } else {
    fmt::format_to(std::back_inserter(line_), "{{\"step\":{},\"wall_time\":{}", step, wall);
  }
  size_t column = 2;
  for (const Node node : nodes_) {
    const at::Tensor& t = values.results[node];
    if (t.numel() != 1) {
      throw InvalidArgument(fmt::format("{}: node '{}' must be a scalar, got shape [{}]",
                                        kMetricsLogger, graph().name(node),
                                        fmt::join(t.sizes(), ", ")));
    }
    line_ += csv ? "," : "," + json_string(columns_[column]) + ":";
    append_value(line_, t.item<double>(), options_.format);
    ++column;
  }
  for (size_t i = 0; i < options_.metrics.size(); ++i) {
    line_ += csv ? "," : "," + json_string(columns_[column]) + ":";
    const auto m = metrics_->latest(options_.metrics[i]);
    if (m && (m->version != seen_[i].first || m->step != seen_[i].second)) {
      seen_[i] = {m->version, m->step};
      append_value(line_, m->value, options_.format);
    } else if (!csv) {
      line_ += "null";
    }
    ++column;
  }
  line_ += csv ? "\n" : "}\n";
  // One write: rows from a kill are whole or torn at the end, and a torn one is dropped later.
  const char* p = line_.data();
  size_t left = line_.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_file_error("write", options_.path, errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void MetricsLoggerHook::end(Session&) { close_file(); }

}  // namespace trainhooks
