// The report: one HTML file with the page's files inlined and the API's answers to every request
// the page makes at first load, under the exact URLs it makes them with.
#include "trainhooks/board/report.h"

#include "summary/summary_test_util.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "board/assets.h"
#include "board/board_test_logdir.h"
#include "trainhooks/board/board_api.h"
#include "trainhooks/errors.h"
#include "trainhooks/summary/event_writer.h"

namespace trainhooks::board {
namespace report_test {

namespace fs = std::filesystem;
using nlohmann::json;
using summary::EventWriter;

using trainhooks::summary::testing::TempDir;

std::string base64_decode(std::string_view in) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (const char c : in) {
    if (c == '=') break;
    bits = bits << 6 | static_cast<uint32_t>(kAlphabet.find(c));
    if ((count += 6) >= 8) {
      count -= 8;
      out += static_cast<char>(bits >> count & 0xff);
    }
  }
  return out;
}

constexpr std::string_view kDataStart = "window.TRAINHOOKS_REPORT = ";
constexpr std::string_view kDataEnd = ";\n</script>";

// The text of window.TRAINHOOKS_REPORT as it stands in the HTML.
std::string data_text(const std::string& html) {
  const size_t begin = html.find(kDataStart);
  if (begin == std::string::npos) return {};
  const size_t from = begin + kDataStart.size();
  return html.substr(from, html.find(kDataEnd, from) - from);
}

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      EventWriter w(dir_.path() / "train");
      for (int step = 1; step <= 20000; ++step) {
        w.add_scalar("loss", step == 12345 ? 50.0f : 1.0f / static_cast<float>(step), step);
      }
      w.add_histogram("weights", at::arange(100, at::kFloat), 10);
      w.add_image("input", at::full({2, 1, 3, 3}, 200, at::kByte), 10, {.max_outputs = 2});
      w.add_text("note", "closing </script><script>alert(1)</script> <!-- <script>", 10);
    }
    {
      EventWriter w(dir_.path() / "exp 1" / "eval");
      w.add_scalar("a b/c", 1, 1);
      w.add_scalar("</script>", 2, 1);
    }
    index_.refresh();
  }

  TempDir dir_;
  LogdirIndex index_{dir_.path()};
};

std::set<std::string> addresses_in(std::string_view text) {
  std::set<std::string> addresses;
  const std::regex address(R"(https?://[^\s"'`)<>]*)");
  for (auto it = std::cregex_iterator(text.data(), text.data() + text.size(), address);
       it != std::cregex_iterator(); ++it) {
    addresses.insert(it->str());
  }
  return addresses;
}

constexpr std::string_view kJavaScriptData = "data:text/javascript;base64,";

TEST_F(ReportTest, InlinesThePageSoThatNothingIsFetched) {
  const std::string html = render_report(index_);
  EXPECT_TRUE(html.starts_with(std::string(find_asset("/")->data.substr(0, 15))));
  // No reference to another file is left: no links, no script files, no URLs.
  for (const char* reference :
       {"rel=\"stylesheet\"", "src=\"/", "href=\"/", "src=\"http", "href=\"http", "url(http",
        "@import", R"(src="uPlot.iife.min.js")", R"(src="board.js")", R"("board/": "./")",
        R"(href="board.css")", R"(href="uPlot.min.css")"}) {
    EXPECT_EQ(html.find(reference), std::string::npos) << reference;
  }
  // The only addresses are the libraries' homes (the credits' links, which the page points there
  // in a report, as no licence file sits beside it) and those in their licences. None is loaded.
  std::set<std::string> allowed = {
      "https://github.com/leeoniya/uPlot", "https://github.com/markdown-it/markdown-it",
      "https://github.com/cure53/DOMPurify", "https://github.com/dagrejs/dagre"};
  for (const VendoredScript& library : kVendoredScripts) {
    allowed.merge(addresses_in(find_asset(library.licence)->data));
  }
  EXPECT_THAT(addresses_in(html), ::testing::IsSubsetOf(allowed));
  for (const char* path : {"/board.css", "/uPlot.min.css"}) {
    EXPECT_NE(html.find(find_asset(path)->data), std::string::npos) << path;
  }
  // The libraries' scripts, in the page's order, each as a data: URL of its bytes after its
  // licence (MIT and the others ask for it in every copy).
  // (Found by hand: std::regex recurses per character, and a source is some 100 KB long.)
  std::vector<std::string> sources;
  constexpr std::string_view kOpen = "<script src=\"";
  for (size_t at = html.find(kOpen); at != std::string::npos; at = html.find(kOpen, at + 1)) {
    const size_t from = at + kOpen.size();
    sources.push_back(html.substr(from, html.find('"', from) - from));
  }
  ASSERT_EQ(sources.size(), kVendoredScripts.size());
  size_t previous = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    const VendoredScript& library = kVendoredScripts[i];
    SCOPED_TRACE(library.path);
    ASSERT_TRUE(sources[i].starts_with(kJavaScriptData));
    EXPECT_EQ(base64_decode(sources[i].substr(kJavaScriptData.size())),
              find_asset(library.path)->data);
    const size_t licence = html.find(fmt::format("<!-- {}'s licence:", library.name));
    const size_t at = html.find(sources[i]);
    EXPECT_LT(previous, licence);
    EXPECT_LT(licence, at);
    previous = at;
  }
  EXPECT_NE(html.find("Copyright (c) 2022 Leon Sorokin"), std::string::npos) << "uPlot's licence";
  // The modules: an import map resolving each "board/<file>" to its bytes, then the data, then
  // the entry module.
  const size_t map_begin = html.find("<script type=\"importmap\">");
  ASSERT_NE(map_begin, std::string::npos);
  EXPECT_GT(map_begin, previous);
  const size_t map_text = html.find('{', map_begin);
  const json map = json::parse(html.substr(map_text, html.find("</script>", map_text) - map_text));
  ASSERT_EQ(map["imports"].size(), kPageModules.size());
  for (const std::string_view path : kPageModules) {
    SCOPED_TRACE(path);
    const std::string url = map["imports"].value("board" + std::string(path), "");
    ASSERT_TRUE(url.starts_with(kJavaScriptData)) << url.substr(0, 40);
    EXPECT_EQ(base64_decode(url.substr(kJavaScriptData.size())), find_asset(path)->data);
  }
  const size_t data = html.find(kDataStart);
  const size_t entry = html.find("<script type=\"module\">import \"board/board.js\";</script>");
  EXPECT_LT(map_begin, data);
  EXPECT_LT(data, entry);
  EXPECT_NE(entry, std::string::npos);
}

TEST_F(ReportTest, HoldsTheResponseToEveryRequestThePageMakesAtFirstLoad) {
  const std::string html = render_report(index_, {.title = "My <run>"});
  const json data = json::parse(data_text(html));
  EXPECT_EQ(data["title"], "My <run>");
  EXPECT_TRUE(std::regex_match(data["generated"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")))
      << data["generated"];
  EXPECT_NE(html.find("<title>My &lt;run&gt;</title>"), std::string::npos);

  const json& responses = data["responses"];
  std::set<std::string> keys;
  for (const auto& [key, value] : responses.items()) keys.insert(key);
  EXPECT_EQ(keys, (std::set<std::string>{
                      "/api/runs",
                      "/api/hparams",
                      "/api/scalars?run=exp%201%2Feval&tag=a%20b%2Fc",
                      "/api/scalars?run=exp%201%2Feval&tag=%3C%2Fscript%3E",
                      "/api/scalars?run=train&tag=loss",
                      "/api/histograms?run=train&tag=weights",
                      "/api/images?run=train&tag=input%2Fimage%2F0",
                      "/api/images?run=train&tag=input%2Fimage%2F1",
                      "/api/text?run=train&tag=note",
                  }));
  // Each as the API answers it.
  const BoardApi api(index_);
  EXPECT_EQ(responses["/api/runs"], json::parse(api.handle("/api/runs", {}).body));
  EXPECT_EQ(
      responses["/api/histograms?run=train&tag=weights"],
      json::parse(api.handle("/api/histograms", {{"run", "train"}, {"tag", "weights"}}).body));
  EXPECT_EQ(responses["/api/text?run=train&tag=note"]["text"][0]["text"],
            "closing </script><script>alert(1)</script> <!-- <script>");
  EXPECT_EQ(responses["/api/scalars?run=exp%201%2Feval&tag=a%20b%2Fc"]["values"], json({1}));

  const json& images = data["images"];
  ASSERT_EQ(images.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const std::string tag = "input/image/" + std::to_string(i);
    const std::string url =
        "/api/image?run=train&tag=input%2Fimage%2F" + std::to_string(i) + "&index=0";
    ASSERT_TRUE(images.contains(url)) << url;
    const std::string data_url = images[url];
    ASSERT_TRUE(data_url.starts_with("data:image/png;base64,")) << data_url.substr(0, 40);
    const ApiResponse png =
        api.handle("/api/image", {{"run", "train"}, {"tag", tag}, {"index", "0"}});
    EXPECT_EQ(base64_decode(data_url.substr(22)), png.body);
  }
}

TEST(ReportViewsTest, HoldsTheGraphOfEachRunWithOneAndTheHyperparameters) {
  TempDir dir;
  testing::write_view_runs(dir.path());
  LogdirIndex index(dir.path());
  index.refresh();
  const json responses = json::parse(data_text(render_report(index, {})))["responses"];
  const BoardApi api(index);
  EXPECT_EQ(responses["/api/graph?run=hp%2Fadam"],
            json::parse(api.handle("/api/graph", {{"run", "hp/adam"}}).body));
  EXPECT_EQ(responses["/api/hparams"], json::parse(api.handle("/api/hparams", {}).body));
  EXPECT_EQ(responses["/api/hparams"]["sessions"].size(), std::size(testing::kViewRuns));
  for (const auto& [key, value] : responses.items()) {
    if (key.starts_with("/api/graph")) {
      EXPECT_EQ(key, "/api/graph?run=hp%2Fadam");
    }
  }
}

TEST_F(ReportTest, NothingInTheDataCanEndItsScriptEarly) {
  const std::string html = render_report(index_);
  const std::string text = data_text(html);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.find("</"), std::string::npos);
  EXPECT_EQ(text.find("<!--"), std::string::npos);
  std::string lower = html;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  // Only the closing tags the report wrote: those of the page's scripts and the data's.
  const std::string page(find_asset("/")->data);
  size_t in_page = 0, in_report = 0;
  for (size_t at = page.find("</script"); at != std::string::npos;
       at = page.find("</script", at + 1))
    ++in_page;
  for (size_t at = lower.find("</script"); at != std::string::npos;
       at = lower.find("</script", at + 1))
    ++in_report;
  EXPECT_EQ(in_report, in_page + 1) << "the page's scripts and the data's";
}

TEST_F(ReportTest, ScalarsAreDownsampledToMaxPointsKeepingPeaks) {
  for (const int64_t max_points : {int64_t{5000}, int64_t{100}}) {
    const json data = json::parse(data_text(render_report(index_, {.max_points = max_points})));
    const json& loss = data["responses"]["/api/scalars?run=train&tag=loss"];
    EXPECT_EQ(loss["total"], 20000);
    EXPECT_EQ(loss["downsampled"], true);
    EXPECT_LE(loss["steps"].size(), static_cast<size_t>(max_points));
    // max_points / 4 buckets of two to four (a falling curve's extremes are its bucket's ends).
    EXPECT_GE(loss["steps"].size(), static_cast<size_t>(max_points) / 2);
    EXPECT_THAT(loss["steps"], ::testing::Contains(12345));
  }
  EXPECT_THROW(render_report(index_, {.max_points = 1}), InvalidArgument);
  EXPECT_THROW(render_report(index_, {.max_points = 100001}), InvalidArgument);
}

TEST_F(ReportTest, TheDefaultTitleIsTheLogDirectorysName) {
  const json data = json::parse(data_text(render_report(index_)));
  EXPECT_EQ(data["title"], dir_.path().filename().string());
}

TEST_F(ReportTest, WriteReportReplacesTheFileWhole) {
  const fs::path out = dir_.path() / "report.html";
  {
    std::ofstream old(out);
    old << "old";
  }
  const ReportStats stats = write_report(dir_.path(), out, {.title = "t"});
  EXPECT_EQ(stats.runs, 2);
  EXPECT_EQ(stats.tags, 7);
  std::ifstream in(out, std::ios::binary);
  const std::string html{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_EQ(stats.bytes, static_cast<int64_t>(html.size()));
  EXPECT_EQ(json::parse(data_text(html))["title"], "t");
  // No temporary file is left beside it.
  for (const auto& entry : fs::directory_iterator(dir_.path())) {
    EXPECT_TRUE(entry.is_directory() || entry.path() == out) << entry.path();
  }
  EXPECT_THROW(write_report(dir_.path() / "missing", dir_.path() / "r.html"), InvalidArgument);
  EXPECT_ANY_THROW(write_report(dir_.path(), dir_.path() / "no" / "such" / "dir.html"));
}

}  // namespace report_test
}  // namespace trainhooks::board
