#include "trainhooks/board/report.h"

#include <chrono>
#include <ctime>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "board/assets.h"
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

std::string escape_html(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
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

  const std::string max_points = std::to_string(options.max_points);
  for (const RunInfo& run : index.runs()) {
    ++data.runs;
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
  // The window's title too (before the scripts go in, which might hold the word).
  const size_t open = html.find("<title>");
  const size_t close = open == std::string::npos ? open : html.find("</title>", open);
  if (close != std::string::npos) {
    const size_t from = open + std::string_view("<title>").size();
    html.replace(from, close - from, escape_html(title));
  }
  replace_tag(html, R"(<link rel="stylesheet" href="uPlot.min.css">)",
              "<style>\n" + inline_text(asset("/uPlot.min.css")) + "\n</style>");
  replace_tag(html, R"(<link rel="stylesheet" href="board.css">)",
              "<style>\n" + inline_text(asset("/board.css")) + "\n</style>");
  // MIT asks for the licence in every copy, and the report is one.
  std::string licence(asset("/LICENSE.uPlot.txt"));
  replace_all(licence, "*/", "* /");
  replace_tag(html, R"(<script src="uPlot.iife.min.js"></script>)",
              "<script>\n/* uPlot's licence:\n" + inline_text(licence) + "\n*/\n" +
                  inline_text(asset("/uPlot.iife.min.js")) + "\n</script>");
  replace_tag(html, R"(<script src="board.js"></script>)",
              "<script>\nwindow.TRAINHOOKS_REPORT = " + script + ";\n</script>\n<script>\n" +
                  inline_text(asset("/board.js")) + "\n</script>");
  return data;
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
  std::string html;
  const ReportData data = render(index, options, html);
  trainhooks::internal::write_file_atomically(output.string(), html);
  return {.runs = data.runs, .tags = data.tags, .bytes = static_cast<int64_t>(html.size())};
}

}  // namespace trainhooks::board
