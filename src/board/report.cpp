#include "trainhooks/board/report.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "board/assets.h"
#include "board/escape_html.h"
#include "board/url_encode.h"
#include "trainhooks/board/board_api.h"
#include "trainhooks/errors.h"
#include "util/atomic_file.h"
#include "util/json_writer.h"

namespace trainhooks::board {
namespace {

using summary::ValueKind;

std::string_view asset(std::string_view path) {
  const Asset* a = find_asset(path);
  if (a == nullptr) throw InternalError(fmt::format("the board page has no file {}", path));
  return a->data;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
}

size_t occurrences(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Text to put inside <script> or <style>: "</" becomes "<\/" (the same string to JavaScript,
// JSON and CSS), so no "</script>" in the data can end the element early.
std::string inline_text(std::string_view text) {
  std::string out(text);
  replace_all(out, "</", "<\\/");
  return out;
}

// Replaces the page's reference `tag` by `replacement`. The page references its files with
// exactly these tags (src/board/web/index.html); a page without one would load nothing.
void replace_tag(std::string& html, std::string_view tag, const std::string& replacement) {
  const size_t at = html.find(tag);
  if (at == std::string::npos) {
    throw InternalError(fmt::format("the board page does not reference its files with {}", tag));
  }
  html.replace(at, tag.size(), replacement);
}

std::string base64(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  const auto byte = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += kAlphabet[v >> 6 & 63];
    out += kAlphabet[v & 63];
  }
  if (const size_t rest = bytes.size() - i; rest > 0) {
    const uint32_t v = byte(i) << 16 | (rest == 2 ? byte(i + 1) << 8 : 0);
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += rest == 2 ? kAlphabet[v >> 6 & 63] : '=';
    out += '=';
  }
  return out;
}

std::string data_url(std::string_view javascript) {
  return "data:text/javascript;base64," + base64(javascript);
}

std::string default_title(const std::filesystem::path& logdir) {
  std::error_code ec;
  std::filesystem::path p =
      std::filesystem::weakly_canonical(std::filesystem::absolute(logdir), ec);
  if (ec) p = logdir.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  const std::string name = p.filename().string();
  return name.empty() ? p.string() : name;
}

std::string iso_time_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(now));
}

// window.TRAINHOOKS_REPORT's JSON: the response to every request the page makes at first load,
// under the URL it requests, built by the API itself.
struct ReportData {
  std::string json;
  int64_t runs = 0;
  int64_t tags = 0;
};

ReportData report_data(const LogdirIndex& index, const ReportOptions& options,
                       const std::string& title) {
  const BoardApi api(index);
  ReportData data;
  std::string responses;
  std::string images;
  const auto add = [](std::string& out, const std::string& url, std::string_view value_json) {
    if (!out.empty()) out += ",\n";
    trainhooks::internal::append_json_string(out, url);
    out += ": ";
    out += value_json;
  };

  const ApiResponse runs = api.handle("/api/runs", {});
  if (runs.status != 200) throw InternalError("the board's API failed to list the runs");
  add(responses, "/api/runs", runs.body);

  // The graph and hyperparameter views' answers, as the page asks for them.
  const ApiResponse hparams = api.handle("/api/hparams", {});
  if (hparams.status == 200) add(responses, "/api/hparams", hparams.body);

  const std::string max_points = std::to_string(options.max_points);
  for (const RunInfo& run : index.runs()) {
    ++data.runs;
    if (run.graph) {
      const ApiResponse graph = api.handle("/api/graph", {{"run", run.name}});
      // A graph event that holds no GraphDef is left out; the page says the report has none.
      if (graph.status == 200) {
        add(responses, internal::api_url("/api/graph", {{"run", run.name}}), graph.body);
      }
    }
    for (const TagInfo& tag : run.tags) {
      const char* endpoint = nullptr;
      switch (tag.kind) {
        case ValueKind::kScalar:
          endpoint = "/api/scalars";
          break;
        case ValueKind::kHistogram:
          endpoint = "/api/histograms";
          break;
        case ValueKind::kImage:
          endpoint = "/api/images";
          break;
        case ValueKind::kText:
          endpoint = "/api/text";
          break;
        default:
          continue;  // kinds the page does not show
      }
      ++data.tags;
      std::map<std::string, std::string> query{{"run", run.name}, {"tag", tag.tag}};
      const std::string url = internal::api_url(endpoint, {{"run", run.name}, {"tag", tag.tag}});
      // The page asks for the canonical URL; the report answers it with its own density.
      if (tag.kind == ValueKind::kScalar) query["max_points"] = max_points;
      const ApiResponse r = api.handle(endpoint, query);
      // The API refuses no series the index lists; should it, the series is left out.
      if (r.status != 200) continue;
      add(responses, url, r.body);
      if (tag.kind != ValueKind::kImage) continue;
      const int64_t count = static_cast<int64_t>(index.images(run.name, tag.tag).size());
      for (int64_t i = 0; i < count; ++i) {
        query["index"] = std::to_string(i);
        const ApiResponse image = api.handle("/api/image", query);
        if (image.status != 200) continue;
        std::string data_url = "data:" + image.content_type + ";base64," + base64(image.body);
        std::string quoted;
        trainhooks::internal::append_json_string(quoted, data_url);
        add(images,
            internal::api_url("/api/image",
                              {{"run", run.name}, {"tag", tag.tag}, {"index", std::to_string(i)}}),
            quoted);
      }
    }
  }

  std::string& out = data.json;
  out += "{\"title\": ";
  trainhooks::internal::append_json_string(out, title);
  out += ",\n\"generated\": ";
  trainhooks::internal::append_json_string(out, iso_time_now());
  out += ",\n\"responses\": {\n";
  out += responses;
  out += "},\n\"images\": {\n";
  out += images;
  out += "}}";
  return data;
}

ReportData render(const LogdirIndex& index, const ReportOptions& options, std::string& html) {
  if (options.max_points < 2 || options.max_points > BoardApi::kMaxMaxPoints) {
    throw InvalidArgument(fmt::format("ReportOptions: max_points must be between 2 and {}, got {}",
                                      BoardApi::kMaxMaxPoints, options.max_points));
  }
  const std::string title = options.title.empty() ? default_title(index.logdir()) : options.title;
  ReportData data = report_data(index, options, title);
  // JSON has "<" only inside strings, where "<\/" and "\u003c" read as "</" and "<". "<!--" is
  // escaped too: inside a script it would start HTML's escaped-comment parsing.
  std::string script = inline_text(data.json);
  replace_all(script, "<!--", "\\u003c!--");

  html = std::string(asset("/"));
  // The libraries' and the entry module's: a script the page loads besides would be missing from
  // the report.
  const size_t sources = occurrences(html, "<script src=");
  if (sources != kVendoredScripts.size() || occurrences(html, "<script type=\"module\"") != 1) {
    throw InternalError(fmt::format("the board page loads {} scripts, the report inlines {}",
                                    sources, kVendoredScripts.size()));
  }
  // The window's title too (before the scripts go in, which might hold the word).
  const size_t open = html.find("<title>");
  const size_t close = open == std::string::npos ? open : html.find("</title>", open);
  if (close != std::string::npos) {
    const size_t from = open + std::string_view("<title>").size();
    html.replace(from, close - from, internal::escape_html(title));
  }
  replace_tag(html, R"(<link rel="stylesheet" href="uPlot.min.css">)",
              "<style>\n" + inline_text(asset("/uPlot.min.css")) + "\n</style>");
  replace_tag(html, R"(<link rel="stylesheet" href="board.css">)",
              "<style>\n" + inline_text(asset("/board.css")) + "\n</style>");
  // Scripts go in as data: URLs, byte for byte: no text of theirs is parsed as HTML, so nothing in
  // a library (a "<!--", a "</script>" in a string) can change where its script ends.
  for (const VendoredScript& library : kVendoredScripts) {
    // Its licence in every copy, as the licences ask, and the report is one.
    std::string licence(asset(library.licence));
    // A comment's text may not hold "--" (as in "-->").
    for (size_t at = licence.find("--"); at != std::string::npos; at = licence.find("--", at)) {
      licence.replace(at, 2, "- -");
    }
    replace_tag(html, fmt::format(R"(<script src="{}"></script>)", library.path.substr(1)),
                fmt::format("<!-- {}'s licence:\n{}\n-->\n<script src=\"{}\"></script>",
                            library.name, licence, data_url(asset(library.path))));
  }
  // The modules: an import map that resolves each "board/<file>" to its text. A module cannot be
  // inlined as such (inline modules cannot import one another), and a file:// page may not load
  // modules from files; data: URLs it may.
  std::string imports;
  for (const std::string_view path : kPageModules) {
    if (!imports.empty()) imports += ",\n";
    trainhooks::internal::append_json_string(imports, "board" + std::string(path));
    imports += ": ";
    trainhooks::internal::append_json_string(imports, data_url(asset(path)));
  }
  replace_tag(html, R"(<script type="importmap">{"imports": {"board/": "./"}}</script>)",
              "<script type=\"importmap\">\n{\"imports\": {\n" + imports + "}}\n</script>");
  // The data before the entry module, which reads it (modules run after classic scripts).
  replace_tag(html, R"(<script type="module" src="board.js"></script>)",
              "<script>\nwindow.TRAINHOOKS_REPORT = " + script +
                  ";\n</script>\n<script type=\"module\">import \"board/board.js\";</script>");
  return data;
}

// A report of nothing is an error: the log directory is not what the user meant, or its files
// are not event files.
void check_has_events(const LogdirIndex& index) {
  const std::vector<RunInfo> runs = index.runs();
  const std::string dir = index.logdir().string();
  if (runs.empty()) {
    throw NotFoundError(fmt::format(
        "no event files in '{}' (a run is a directory holding events.out.tfevents.* files)", dir));
  }
  int64_t files = 0;
  for (const RunInfo& run : runs) {
    if (run.events > 0) return;
    files += run.files;
  }
  throw DataLossError(
      fmt::format("no events in '{}': none of its {} event file{} holds a readable "
                  "record",
                  dir, files, files == 1 ? "" : "s"));
}

[[noreturn]] void output_error(const std::filesystem::path& output, std::string_view what,
                               int err) {
  const std::string message = fmt::format("cannot write report to '{}': {}", output.string(), what);
  if (err == ENOENT) throw NotFoundError(message);
  if (err == ENOSPC || err == EDQUOT) throw ResourceExhaustedError(message);
  if (err == EIO) throw FileError(message);
  throw FailedPreconditionError(message);
}

// Writes all of `bytes` to a device or FIFO, with SIGPIPE held off: a reader that went away is
// an error to report (EPIPE), not the end of the process.
void write_directly(const std::filesystem::path& output, bool fifo, std::string_view bytes) {
  // A FIFO opened for writing waits for a reader; non-blocking, the open fails at once instead.
  const int fd = ::open(output.c_str(), O_WRONLY | O_CLOEXEC | (fifo ? O_NONBLOCK : 0));
  if (fd < 0) {
    const int err = errno;
    if (fifo && err == ENXIO) output_error(output, "it is a FIFO that no process is reading", err);
    output_error(output, std::strerror(err), err);
  }
  if (fifo) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  sigset_t pipe_signal, previous;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  sigset_t pending;
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, &previous);
  int err = 0;
  for (size_t at = 0; at < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + at, bytes.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    at += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && err == 0 && errno != EINTR) err = errno;
  if (err == EPIPE && !was_pending) {
    // Consume the SIGPIPE this write raised, before the mask that let it through comes back.
    const timespec zero{};
    sigtimedwait(&pipe_signal, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (err != 0) output_error(output, std::strerror(err), err);
}

// Writes the report where `output` says (report.h); true when written directly into a device or
// FIFO rather than put in place.
bool write_output(const std::filesystem::path& output, std::string_view html) {
  namespace fs = std::filesystem;
  fs::path target = output;
  struct stat st {};
  if (::stat(output.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) output_error(output, "it is a directory", EISDIR);
    // Opened through any links, as /dev/stdout is (its links are not paths to follow by hand).
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
      write_directly(output, S_ISFIFO(st.st_mode), html);
      return true;
    }
    if (!S_ISREG(st.st_mode)) {
      output_error(output,
                   S_ISBLK(st.st_mode) ? "it is a block device, which a report never replaces"
                                       : "it is a socket or another special file, which a report "
                                         "never replaces",
                   EINVAL);
    }
    // A symbolic link is written through: the file it names is replaced, the link stays.
    std::error_code ec;
    target = fs::canonical(output, ec);
    if (ec) output_error(output, ec.message(), ec.value());
  } else if (errno != ENOENT) {
    output_error(output, std::strerror(errno), errno);
  } else {
    // Nothing there, or a link to nothing yet: the file it names is created.
    for (int links = 0;; ++links) {
      struct stat link {};
      if (::lstat(target.c_str(), &link) != 0 || !S_ISLNK(link.st_mode)) break;
      if (links == 40) output_error(output, std::strerror(ELOOP), ELOOP);
      std::error_code ec;
      const fs::path next = fs::read_symlink(target, ec);
      if (ec) output_error(output, ec.message(), ec.value());
      target = next.is_absolute() ? next : target.parent_path() / next;
    }
    // Named here: the temporary file beside the target would be named otherwise.
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    struct stat dir_st {};
    if (::stat(dir.c_str(), &dir_st) != 0) {
      const int err = errno;
      output_error(output,
                   err == ENOENT
                       ? fmt::format("directory '{}' does not exist", dir.string())
                       : fmt::format("directory '{}': {}", dir.string(), std::strerror(err)),
                   err);
    }
    if (!S_ISDIR(dir_st.st_mode)) {
      output_error(output, fmt::format("'{}' is not a directory", dir.string()), ENOTDIR);
    }
  }
  try {
    trainhooks::internal::write_file_atomically(target.string(), html);
  } catch (const Error& e) {
    const std::string message =
        fmt::format("cannot write report to '{}': {}", output.string(), e.what());
    switch (e.code()) {
      case Code::kNotFound:
        throw NotFoundError(message);
      case Code::kResourceExhausted:
        throw ResourceExhaustedError(message);
      case Code::kFailedPrecondition:
        throw FailedPreconditionError(message);
      default:
        throw FileError(message);
    }
  }
  return false;
}

}  // namespace

std::string render_report(const LogdirIndex& index, const ReportOptions& options) {
  std::string html;
  render(index, options, html);
  return html;
}

ReportStats write_report(const std::filesystem::path& logdir, const std::filesystem::path& output,
                         const ReportOptions& options) {
  LogdirIndex index(logdir);
  index.refresh();
  check_has_events(index);
  std::string html;
  const ReportData data = render(index, options, html);
  const bool directly = write_output(output, html);
  return {.runs = data.runs,
          .tags = data.tags,
          .bytes = static_cast<int64_t>(html.size()),
          .written_directly = directly};
}

}  // namespace trainhooks::board
