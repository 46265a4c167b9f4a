// BoardApi over real event files: every endpoint's JSON, exact values, downsampling, ranges and
// every refused request's status and message.
#include "trainhooks/board/board_api.h"

#include "summary/summary_test_util.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "board/api_histogram.h"
#include "board/api_views.h"
#include "board/board_test_logdir.h"
#include "board/downsample.h"
#include "board/url_encode.h"
#include "summary/event_encoding.h"
#include "trainhooks/summary/event_reader.h"
#include "trainhooks/summary/event_writer.h"
#include "trainhooks/testing/fake_env.h"
#include "util/json_writer.h"

namespace trainhooks::board {
namespace board_api_test {

namespace fs = std::filesystem;
using nlohmann::json;
using summary::EventWriter;
using Query = std::map<std::string, std::string>;

constexpr double kStartTime = 1700000000.25;

using trainhooks::summary::testing::TempDir;

class BoardApiTest : public ::testing::Test {
 protected:
  // A writer for run `run` whose events are stamped with the fake clock.
  std::unique_ptr<EventWriter> writer(const std::string& run) {
    return std::make_unique<EventWriter>(dir_.path() / run,
                                         summary::EventWriterOptions{.env = {.clock = clock_}});
  }
  // Writes `values` at steps 1, 2, ... (wall time kStartTime + step) and closes the file.
  void write_scalars(const std::string& run, const std::string& tag,
                     const std::vector<float>& values) {
    auto w = writer(run);
    for (size_t i = 0; i < values.size(); ++i) {
      clock_->set_wall_seconds(kStartTime + static_cast<double>(i + 1));
      w->add_scalar(tag, values[i], static_cast<int64_t>(i + 1));
    }
    w->close();
  }
  BoardApi& api() {
    if (!index_) {
      index_ = std::make_unique<LogdirIndex>(dir_.path());
      index_->refresh();
      api_ = std::make_unique<BoardApi>(*index_);
    }
    return *api_;
  }
  json get(std::string_view path, const Query& query = {}) {
    const ApiResponse r = api().handle(path, query);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    EXPECT_EQ(r.content_type, "application/json");
    return json::parse(r.body);
  }
  // The status and error message of a refused request.
  std::pair<int, std::string> error(std::string_view path, const Query& query) {
    const ApiResponse r = api().handle(path, query);
    EXPECT_EQ(r.content_type, "application/json");
    const json body = json::parse(r.body);
    return {r.status, body.value("error", std::string("<no error member>"))};
  }

  TempDir dir_;
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>(kStartTime);
  std::unique_ptr<LogdirIndex> index_;
  std::unique_ptr<BoardApi> api_;
};

// A run with one tag of each kind the page shows (and a scalar "loss" at steps 1..3).
void write_every_kind(EventWriter& w, FakeClock& clock) {
  for (int step = 1; step <= 3; ++step) {
    clock.set_wall_seconds(kStartTime + step);
    w.add_scalar("loss", 1.0f / static_cast<float>(step), step);
  }
  clock.set_wall_seconds(kStartTime + 10);
  w.add_histogram("weights", at::arange(100, at::kFloat), 10);
  w.add_image("input", at::full({1, 1, 2, 3}, 128, at::kByte), 10, {.max_outputs = 1});
  w.add_text("note", "hello </script> world", 10);
}

TEST_F(BoardApiTest, RunsAreSortedWithTheirTagsGroupedByKind) {
  {
    auto w = writer("train");
    write_every_kind(*w, *clock_);
    clock_->set_wall_seconds(kStartTime + 20);
    w->add_scalar("accuracy", 0.5f, 20);
  }
  write_scalars("eval", "loss", {0.5f});

  const json runs = get("/api/runs")["runs"];
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["name"], "eval");
  const json& train = runs[1];
  EXPECT_EQ(train["name"], "train");
  EXPECT_EQ(train["last_wall_time"], kStartTime + 20);
  EXPECT_GE(train["events"].get<int64_t>(), 7);
  EXPECT_EQ(train["corrupt_records"], 0);
  EXPECT_EQ(train["purged_values"], 0);
  const json& tags = train["tags"];
  EXPECT_EQ(tags.size(), 4u);
  ASSERT_EQ(tags["scalars"].size(), 2u);
  EXPECT_EQ(tags["scalars"][0], json({{"tag", "accuracy"},
                                      {"count", 1},
                                      {"min_step", 20},
                                      {"max_step", 20},
                                      {"last_wall_time", kStartTime + 20}}));
  EXPECT_EQ(tags["scalars"][1], json({{"tag", "loss"},
                                      {"count", 3},
                                      {"min_step", 1},
                                      {"max_step", 3},
                                      {"last_wall_time", kStartTime + 3}}));
  ASSERT_EQ(tags["histograms"].size(), 1u);
  EXPECT_EQ(tags["histograms"][0]["tag"], "weights");
  ASSERT_EQ(tags["images"].size(), 1u);
  EXPECT_EQ(tags["images"][0]["tag"], "input/image");
  ASSERT_EQ(tags["text"].size(), 1u);
  EXPECT_EQ(tags["text"][0]["tag"], "note");
  EXPECT_EQ(tags["text"][0]["min_step"], 10);
}

TEST_F(BoardApiTest, ScalarsAreExactShortestFloatsWithNonFiniteValuesAsStrings) {
  const float inf = std::numeric_limits<float>::infinity();
  write_scalars("train", "loss", {0.1f, 1e-7f, std::nanf(""), inf, -inf, 3.0f, 16777216.0f});
  const ApiResponse r = api().handle("/api/scalars", {{"run", "train"}, {"tag", "loss"}});
  ASSERT_EQ(r.status, 200) << r.body;
  // The float's own shortest form: 0.1f is 0.1, not 0.10000000149011612.
  EXPECT_THAT(r.body, ::testing::HasSubstr(
                          R"("values": [0.1,1e-07,"NaN","Infinity","-Infinity",3,16777216])"));
  const json body = json::parse(r.body);
  EXPECT_EQ(body["run"], "train");
  EXPECT_EQ(body["tag"], "loss");
  EXPECT_EQ(body["total"], 7);
  EXPECT_EQ(body["in_range"], 7);
  EXPECT_EQ(body["downsampled"], false);
  EXPECT_EQ(body["steps"], json({1, 2, 3, 4, 5, 6, 7}));
  ASSERT_EQ(body["wall_times"].size(), 7u);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(body["wall_times"][i], kStartTime + i + 1);
  EXPECT_EQ(static_cast<float>(body["values"][0].get<double>()), 0.1f);
}

TEST_F(BoardApiTest, DownsamplingKeepsFirstLastMinAndMaxWithinMaxPoints) {
  std::vector<float> values(10000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(static_cast<float>(i) / 50);
  values[4321] = 100;  // a spike a stride would miss
  values[777] = -50;
  write_scalars("train", "loss", values);
  for (const int64_t max_points : {2, 3, 4, 7, 100, 2000}) {
    const json body =
        get("/api/scalars",
            {{"run", "train"}, {"tag", "loss"}, {"max_points", std::to_string(max_points)}});
    SCOPED_TRACE(max_points);
    EXPECT_EQ(body["total"], 10000);
    EXPECT_EQ(body["in_range"], 10000);
    EXPECT_EQ(body["downsampled"], true);
    const json& steps = body["steps"];
    ASSERT_LE(steps.size(), static_cast<size_t>(max_points));
    ASSERT_EQ(body["values"].size(), steps.size());
    ASSERT_EQ(body["wall_times"].size(), steps.size());
    EXPECT_EQ(steps.front(), 1);
    EXPECT_EQ(steps.back(), 10000);
    for (size_t k = 1; k < steps.size(); ++k) EXPECT_LT(steps[k - 1], steps[k]) << "in order, once";
    for (size_t k = 0; k < steps.size(); ++k) {
      EXPECT_EQ(body["values"][k].get<float>(), values[steps[k].get<size_t>() - 1]);
    }
    if (max_points >= 3) {
      EXPECT_THAT(steps, ::testing::Contains(4322)) << "the maximum survives";
    }
    if (max_points >= 4) {
      EXPECT_THAT(steps, ::testing::Contains(778)) << "the minimum survives";
    }
  }
  // The default: 2000 points at most, in 500 buckets of two to four.
  const json body = get("/api/scalars", {{"run", "train"}, {"tag", "loss"}});
  EXPECT_LE(body["steps"].size(), 2000u);
  EXPECT_GE(body["steps"].size(), 1000u);
}

TEST_F(BoardApiTest, RangeQueriesReturnEveryPointInTheRangeExactly) {
  std::vector<float> values(5000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  write_scalars("train", "loss", values);
  const json body =
      get("/api/scalars",
          {{"run", "train"}, {"tag", "loss"}, {"start_step", "1001"}, {"end_step", "2500"}});
  EXPECT_EQ(body["total"], 5000);
  EXPECT_EQ(body["in_range"], 1500);
  EXPECT_EQ(body["downsampled"], false);
  ASSERT_EQ(body["steps"].size(), 1500u);
  for (int k = 0; k < 1500; ++k) {
    EXPECT_EQ(body["steps"][k], 1001 + k);
    EXPECT_EQ(body["values"][k].get<float>(), values[1000 + k]);
  }
  // Open ends, an empty range and a range beyond the data.
  EXPECT_EQ(
      get("/api/scalars", {{"run", "train"}, {"tag", "loss"}, {"start_step", "4990"}})["steps"],
      json({4990, 4991, 4992, 4993, 4994, 4995, 4996, 4997, 4998, 4999, 5000}));
  EXPECT_EQ(get("/api/scalars", {{"run", "train"}, {"tag", "loss"}, {"end_step", "2"}})["steps"],
            json({1, 2}));
  const json none =
      get("/api/scalars",
          {{"run", "train"}, {"tag", "loss"}, {"start_step", "6000"}, {"end_step", "7000"}});
  EXPECT_EQ(none["in_range"], 0);
  EXPECT_EQ(none["steps"], json::array());
  // A zoomed range larger than max_points is downsampled within the range.
  const json zoomed = get("/api/scalars", {{"run", "train"},
                                           {"tag", "loss"},
                                           {"start_step", "100"},
                                           {"end_step", "299"},
                                           {"max_points", "40"}});
  EXPECT_EQ(zoomed["in_range"], 200);
  EXPECT_EQ(zoomed["downsampled"], true);
  EXPECT_EQ(zoomed["steps"].front(), 100);
  EXPECT_EQ(zoomed["steps"].back(), 299);
  EXPECT_LE(zoomed["steps"].size(), 40u);
}

// Exactly, in full. How fast is bench/board_bench.cpp's (make bench): a timed assertion here
// failed on a loaded machine.
TEST_F(BoardApiTest, AHundredThousandPointsAreAnsweredInFull) {
  std::vector<float> values(100000);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (float& v : values) v = normal(rng);
  write_scalars("train", "loss", values);
  const Query query{{"run", "train"}, {"tag", "loss"}, {"max_points", "100000"}};
  const ApiResponse r = api().handle("/api/scalars", query);
  ASSERT_EQ(r.status, 200);
  const json body = json::parse(r.body);
  ASSERT_EQ(body["values"].size(), 100000u);
  EXPECT_EQ(body["downsampled"], false);
  for (size_t i = 0; i < values.size(); i += 997)
    EXPECT_EQ(body["values"][i].get<float>(), values[i]);
}

TEST_F(BoardApiTest, BadRequestsAreRefusedWithStatusAndMessage) {
  {
    auto w = writer("train");
    write_every_kind(*w, *clock_);
  }
  struct Case {
    std::string path;
    Query query;
    int status;
    std::string message;
  };
  const std::string nul("a\0b", 3);
  const std::vector<Case> cases = {
      {"/api/nope", {}, 404, "unknown endpoint '/api/nope'"},
      {"/api/runs/", {}, 404, "unknown endpoint '/api/runs/'"},
      {"/api/../CMakeLists.txt", {}, 404, "unknown endpoint '/api/../CMakeLists.txt'"},
      {"/api/scalars", {{"run", "nope"}, {"tag", "loss"}}, 404, "unknown run 'nope'"},
      {"/api/scalars",
       {{"run", "train"}, {"tag", "nope"}},
       404,
       "run 'train' has no scalar tag 'nope'"},
      {"/api/scalars",
       {{"run", "train"}, {"tag", "weights"}},
       404,
       "run 'train' has no scalar tag 'weights'"},
      {"/api/histograms",
       {{"run", "train"}, {"tag", "loss"}},
       404,
       "run 'train' has no histogram tag 'loss'"},
      {"/api/images",
       {{"run", "train"}, {"tag", "loss"}},
       404,
       "run 'train' has no image tag 'loss'"},
      {"/api/text", {{"run", "train"}, {"tag", "loss"}}, 404, "run 'train' has no text tag 'loss'"},
      {"/api/scalars", {{"tag", "loss"}}, 400, "missing parameter 'run'"},
      {"/api/scalars", {{"run", "train"}}, 400, "missing parameter 'tag'"},
      {"/api/histograms", {{"run", "train"}}, 400, "missing parameter 'tag'"},
      {"/api/scalars",
       {{"run", "train"}, {"tag", "loss"}, {"max_points", "abc"}},
       400,
       "parameter 'max_points' must be an integer, got 'abc'"},
      {"/api/scalars",
       {{"run", "train"}, {"tag", "loss"}, {"max_points", "12x"}},
       400,
       "parameter 'max_points' must be an integer, got '12x'"},
      {"/api/scalars",
       {{"run", "train"}, {"tag", "loss"}, {"start_step", ""}},
       400,
       "parameter 'start_step' must be an integer, got ''"},
      {"/api/scalars",
       {{"run", "train"}, {"tag", "loss"}, {"end_step", "1e3"}},
       400,
       "parameter 'end_step' must be an integer, got '1e3'"},
      {"/api/scalars",
       {{"run", "train"}, {"tag", "loss"}, {"max_points", "0"}},
       400,
       "max_points must be between 2 and 100000, got 0"},
      {"/api/scalars",
       {{"run", "train"}, {"tag", "loss"}, {"max_points", "1"}},
       400,
       "max_points must be between 2 and 100000, got 1"},
      {"/api/scalars",
       {{"run", "train"}, {"tag", "loss"}, {"max_points", "100001"}},
       400,
       "max_points must be between 2 and 100000, got 100001"},
      {"/api/scalars",
       {{"run", "train"}, {"tag", "loss"}, {"start_step", "5"}, {"end_step", "3"}},
       400,
       "start_step 5 is after end_step 3"},
      {"/api/scalars",
       {{"run", "../x"}, {"tag", "loss"}},
       400,
       "invalid run name '../x': has a '..' component"},
      {"/api/scalars",
       {{"run", ".."}, {"tag", "loss"}},
       400,
       "invalid run name '..': has a '..' component"},
      {"/api/images",
       {{"run", "a/../../etc"}, {"tag", "x"}},
       400,
       "invalid run name 'a/../../etc': has a '..' component"},
      {"/api/scalars",
       {{"run", "/etc"}, {"tag", "loss"}},
       400,
       "invalid run name '/etc': starts with '/'"},
      {"/api/scalars",
       {{"run", "a\\b"}, {"tag", "loss"}},
       400,
       "invalid run name 'a\\b': contains a backslash"},
      {"/api/scalars",
       {{"run", nul}, {"tag", "loss"}},
       400,
       "invalid run name '" + nul + "': contains a NUL"},
      {"/api/scalars",
       {{"run", "train"}, {"tag", "loss"}, {"format", "xml"}},
       400,
       "parameter 'format' must be 'csv' or 'json', got 'xml'"},
      {"/api/scalars",
       {{"run", "train"}, {"tag", "loss"}, {"format", ""}},
       400,
       "parameter 'format' must be 'csv' or 'json', got ''"},
      {"/api/scalars",
       {{"run", "train"}, {"tag", "loss"}, {"format", "CSV"}},
       400,
       "parameter 'format' must be 'csv' or 'json', got 'CSV'"},
      {"/api/scalars",
       {{"run", "train"}, {"tag", "loss"}, {"format", "csv"}, {"max_points", "1"}},
       400,
       "max_points must be between 2 and 100000, got 1"},
      {"/api/scalars",
       {{"run", "train"}, {"tag", "nope"}, {"format", "csv"}},
       404,
       "run 'train' has no scalar tag 'nope'"},
      {"/api/image", {{"run", "train"}, {"tag", "input/image"}}, 400, "missing parameter 'index'"},
      {"/api/image",
       {{"run", "train"}, {"tag", "input/image"}, {"index", "x"}},
       400,
       "parameter 'index' must be an integer, got 'x'"},
      {"/api/image",
       {{"run", "train"}, {"tag", "input/image"}, {"index", "1"}},
       404,
       "run 'train' tag 'input/image' has no image at index 1 (1 kept)"},
      {"/api/image",
       {{"run", "train"}, {"tag", "input/image"}, {"index", "-1"}},
       404,
       "run 'train' tag 'input/image' has no image at index -1 (1 kept)"},
      {"/api/image",
       {{"run", "train"}, {"tag", "note"}, {"index", "0"}},
       404,
       "run 'train' has no image tag 'note'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path + " " + json(c.query).dump());
    EXPECT_EQ(error(c.path, c.query), std::make_pair(c.status, c.message));
  }
}

TEST_F(BoardApiTest, ScalarsDownloadAsTensorBoardsCsvAndJsonWithEveryPoint) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  write_scalars("train", "loss", {0.1f, nan, inf, -inf, 2.5f});

  ApiResponse csv =
      api().handle("/api/scalars", {{"run", "train"}, {"tag", "loss"}, {"format", "csv"}});
  EXPECT_EQ(csv.status, 200);
  EXPECT_EQ(csv.content_type, "text/csv; charset=utf-8");
  EXPECT_EQ(
      csv.content_disposition,
      "attachment; filename=\"run-train-tag-loss.csv\"; filename*=UTF-8''run-train-tag-loss.csv");
  // TensorBoard's columns and Python's csv module's line ends and spellings of NaN and infinity.
  EXPECT_EQ(csv.body,
            "Wall time,Step,Value\r\n"
            "1700000001.25,1,0.1\r\n"
            "1700000002.25,2,nan\r\n"
            "1700000003.25,3,inf\r\n"
            "1700000004.25,4,-inf\r\n"
            "1700000005.25,5,2.5\r\n");

  const ApiResponse rows = api().handle(
      "/api/scalars", {{"run", "train"}, {"tag", "loss"}, {"format", "json"}, {"start_step", "4"}});
  EXPECT_EQ(rows.status, 200);
  EXPECT_EQ(rows.content_type, "application/json");
  EXPECT_THAT(rows.content_disposition,
              ::testing::HasSubstr("filename=\"run-train-tag-loss.json\""));
  EXPECT_EQ(json::parse(rows.body), json::parse(R"([[1700000004.25, 4, "-Infinity"],
                                                    [1700000005.25, 5, 2.5]])"));
  // Without format, no file.
  EXPECT_EQ(api().handle("/api/scalars", {{"run", "train"}, {"tag", "loss"}}).content_disposition,
            "");
}

TEST_F(BoardApiTest, ADownloadHasEveryPointUnlessMaxPointsIsGiven) {
  std::vector<float> values(5000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 7);
  write_scalars("train", "loss", values);
  const Query query = {{"run", "train"}, {"tag", "loss"}, {"format", "json"}};
  EXPECT_EQ(json::parse(api().handle("/api/scalars", query).body).size(), 5000u);
  // The page's chart gets a display's worth (2000) of the same series.
  EXPECT_LE(get("/api/scalars", {{"run", "train"}, {"tag", "loss"}})["steps"].size(), 2000u);
  Query fewer = query;
  fewer["max_points"] = "100";
  EXPECT_LE(json::parse(api().handle("/api/scalars", fewer).body).size(), 100u);
}

TEST(BoardApiDownloadTest, ContentDispositionCannotCarryHostileNames) {
  using internal::content_disposition;
  // Quotes, CR/LF (a header of its own), ';', '\\', '%', non-ASCII and invalid UTF-8: the plain
  // name keeps none of them and the encoded one percent-encodes them.
  const std::string hostile = "run-a\"b\r\nSet-Cookie: x=1;\\%é\xff/t.csv";
  const std::string header = content_disposition(hostile);
  EXPECT_EQ(header,
            "attachment; filename=\"run-a_b__Set-Cookie__x_1_______t.csv\"; "
            "filename*=UTF-8''run-a%22b%0D%0ASet-Cookie%3A%20x%3D1%3B%5C%25%C3%A9%FF_t.csv");
  for (const char c : header) {
    EXPECT_TRUE(c >= 0x20 && c < 0x7f) << static_cast<int>(c);
  }
  EXPECT_EQ(header.find('"'), 21u);
  EXPECT_EQ(std::count(header.begin(), header.end(), '"'), 2);
  EXPECT_EQ(content_disposition("run-exp 1/train-tag-a/b.csv"),
            "attachment; filename=\"run-exp_1_train-tag-a_b.csv\"; "
            "filename*=UTF-8''run-exp%201_train-tag-a_b.csv");
}

TEST_F(BoardApiTest, HistogramsGiveTensorBoardsBandsPerStepAndTheLastHistogram) {
  {
    auto w = writer("train");
    for (int step = 1; step <= 3; ++step) {
      clock_->set_wall_seconds(kStartTime + step);
      w->add_histogram("weights", at::arange(1000, at::kFloat) * step, step);
    }
  }
  const json body = get("/api/histograms", {{"run", "train"}, {"tag", "weights"}});
  EXPECT_EQ(body["run"], "train");
  EXPECT_EQ(body["tag"], "weights");
  EXPECT_EQ(body["basis_points"], json({0, 668, 1587, 3085, 5000, 6915, 8413, 9332, 10000}));
  EXPECT_EQ(body["steps"], json({1, 2, 3}));
  EXPECT_EQ(body["wall_times"], json({kStartTime + 1, kStartTime + 2, kStartTime + 3}));
  ASSERT_EQ(body["bands"].size(), 3u);
  const auto written = summary::read_events(dir_.path() / "train");
  std::vector<summary::HistogramValue> histograms;
  for (const auto& e : written)
    for (const auto& v : e.values)
      if (v.histogram) histograms.push_back(*v.histogram);
  ASSERT_EQ(histograms.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const auto expected = internal::compress_histogram(histograms[k]);
    ASSERT_EQ(body["bands"][k].size(), 9u);
    for (size_t j = 0; j < 9; ++j) EXPECT_EQ(body["bands"][k][j].get<double>(), expected[j]);
    // Uniform values: the bands are the percentiles, within a bucket's width.
    EXPECT_EQ(body["bands"][k][0], 0.0);
    EXPECT_EQ(body["bands"][k][8].get<double>(), 999.0 * static_cast<double>(k + 1));
    EXPECT_NEAR(body["bands"][k][4].get<double>(), 500.0 * static_cast<double>(k + 1),
                60.0 * static_cast<double>(k + 1));
  }
  const json& last = body["last"];
  EXPECT_EQ(last["step"], 3);
  EXPECT_EQ(last["min"], 0.0);
  EXPECT_EQ(last["max"], 2997.0);
  EXPECT_EQ(last["bucket_limits"].get<std::vector<double>>(), histograms[2].bucket_limits);
  EXPECT_EQ(last["buckets"].get<std::vector<double>>(), histograms[2].buckets);
}

TEST(BoardApiHistogramTest, CompressionInterpolatesWithinBucketsAndClampsToMinAndMax) {
  using internal::compress_histogram;
  summary::HistogramValue h{
      .min = 0, .max = 4, .num = 4, .bucket_limits = {1, 2, 3, 4}, .buckets = {1, 1, 1, 1}};
  auto expect_bands = [](const std::array<double, 9>& got, const std::vector<double>& want) {
    ASSERT_EQ(want.size(), 9u);
    for (size_t j = 0; j < 9; ++j) EXPECT_DOUBLE_EQ(got[j], want[j]) << "basis point #" << j;
  };
  expect_bands(compress_histogram(h), {0, 0.2672, 0.6348, 1.234, 2, 2.766, 3.3652, 3.7328, 4});
  // min and max inside the first and last buckets bound the interpolation.
  h.min = 0.5;
  h.max = 3.5;
  expect_bands(compress_histogram(h), {0.5, 0.6336, 0.8174, 1.234, 2, 2.766, 3.1826, 3.3664, 3.5});
  // Empty buckets are skipped; a bucket after only empty ones starts at min.
  h = {.min = 1.2, .max = 3.9, .num = 4, .bucket_limits = {1, 2, 3, 4}, .buckets = {0, 2, 0, 2}};
  expect_bands(compress_histogram(h),
               {1.2, 1.2 + 0.1336 * 0.8, 1.2 + 0.3174 * 0.8, 1.2 + 0.617 * 0.8, 3, 3 + 0.383 * 0.9,
                3 + 0.6826 * 0.9, 3 + 0.8664 * 0.9, 3.9});
  // No values: zeros, as TensorBoard.
  expect_bands(compress_histogram({}), {0, 0, 0, 0, 0, 0, 0, 0, 0});
}

TEST_F(BoardApiTest, ImagesAreListedAndServedAsTheBytesWritten) {
  {
    auto w = writer("train");
    for (int step = 5; step <= 6; ++step) {
      clock_->set_wall_seconds(kStartTime + step);
      w->add_image("input", at::full({1, 3, 2, 4}, 40 * step, at::kByte), step, {.max_outputs = 1});
    }
  }
  const json list = get("/api/images", {{"run", "train"}, {"tag", "input/image"}});
  EXPECT_EQ(list, json({{"run", "train"},
                        {"tag", "input/image"},
                        {"images",
                         {{{"index", 0},
                           {"step", 5},
                           {"wall_time", kStartTime + 5},
                           {"width", 4},
                           {"height", 2}},
                          {{"index", 1},
                           {"step", 6},
                           {"wall_time", kStartTime + 6},
                           {"width", 4},
                           {"height", 2}}}}}));
  std::vector<std::string> written;
  for (const auto& e : summary::read_events(dir_.path() / "train"))
    for (const auto& v : e.values)
      if (v.image) written.push_back(v.image->encoded);
  ASSERT_EQ(written.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const ApiResponse r = api().handle(
        "/api/image", {{"run", "train"}, {"tag", "input/image"}, {"index", std::to_string(i)}});
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.content_type, "image/png");
    EXPECT_EQ(r.body, written[static_cast<size_t>(i)]);
    EXPECT_TRUE(r.body.starts_with("\x89PNG\r\n\x1a\n"));
  }
}

TEST_F(BoardApiTest, TextIsListedWithStepsAndWallTimes) {
  {
    auto w = writer("train");
    clock_->set_wall_seconds(kStartTime + 1);
    w->add_text("note", "first \"quoted\"\nline", 1);
    clock_->set_wall_seconds(kStartTime + 2);
    w->add_text("note", "second </script> <b>", 2);
  }
  const json body = get("/api/text", {{"run", "train"}, {"tag", "note"}});
  EXPECT_EQ(
      body,
      json({{"run", "train"},
            {"tag", "note"},
            {"text",
             {{{"step", 1}, {"wall_time", kStartTime + 1}, {"text", "first \"quoted\"\nline"}},
              {{"step", 2}, {"wall_time", kStartTime + 2}, {"text", "second </script> <b>"}}}}}));
}

TEST_F(BoardApiTest, TheLogDirectoryItselfIsTheRunNamedDot) {
  write_scalars(".", "loss", {1, 2});
  EXPECT_EQ(get("/api/runs")["runs"][0]["name"], ".");
  EXPECT_EQ(get("/api/scalars", {{"run", "."}, {"tag", "loss"}})["values"], json({1, 2}));
}

TEST_F(BoardApiTest, NamesWithDotsInsideAComponentAreServed) {
  // ".." refused by component, not as a substring: these name nothing above the log directory.
  write_scalars("a..b", "x..y", {1});
  write_scalars("exp/v1..v2", "../t", {2});
  write_scalars("...", "..", {3});
  const json runs = get("/api/runs")["runs"];
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0]["name"], "...");
  EXPECT_EQ(runs[1]["name"], "a..b");
  EXPECT_EQ(runs[2]["name"], "exp/v1..v2");
  EXPECT_EQ(get("/api/scalars", {{"run", "a..b"}, {"tag", "x..y"}})["values"], json({1}));
  EXPECT_EQ(get("/api/scalars", {{"run", "exp/v1..v2"}, {"tag", "../t"}})["values"], json({2}));
  EXPECT_EQ(get("/api/scalars", {{"run", "..."}, {"tag", ".."}})["values"], json({3}));
  for (const std::string run : {"..", "../a..b", "a..b/..", "exp/../a..b", "exp/v1..v2/../.."}) {
    SCOPED_TRACE(run);
    EXPECT_EQ(error("/api/scalars", {{"run", run}, {"tag", "x..y"}}),
              std::make_pair(400, "invalid run name '" + run + "': has a '..' component"));
  }
}

// ---- The graph and the hyperparameters ------------------------------------------------------

json node_named(const json& nodes, const std::string& name) {
  for (const json& n : nodes)
    if (n["name"] == name) return n;
  return json();
}

json attr(std::string name, std::string value) { return {{"name", name}, {"value", value}}; }

TEST_F(BoardApiTest, TheGraphIsItsNodesWithOpInputsDeviceAndAttrsAsText) {
  testing::write_view_runs(dir_.path());
  const json runs = get("/api/runs")["runs"];
  for (const json& run : runs) {
    SCOPED_TRACE(run["name"].dump());
    EXPECT_EQ(run["graph"], run["name"] == testing::kGraphRun);
    EXPECT_EQ(run["hparams"], !run["name"].get<std::string>().ends_with("/eval"));
  }

  const json graph = get("/api/graph", {{"run", testing::kGraphRun}});
  EXPECT_EQ(graph["run"], testing::kGraphRun);
  EXPECT_EQ(graph["step"], 0);
  const json& nodes = graph["nodes"];
  ASSERT_EQ(nodes.size(), static_cast<size_t>(testing::kGraphNodes));
  EXPECT_EQ(nodes[0], json({{"name", "x"},
                            {"op", "Placeholder"},
                            {"device", ""},
                            {"inputs", json::array()},
                            {"attrs", {attr("dtype", "DT_FLOAT"), attr("shape", "[?, 784]")}}}));
  EXPECT_EQ(node_named(nodes, "logits"),
            json({{"name", "logits"},
                  {"op", "CppFunc"},
                  {"device", "/device:CPU:0"},
                  {"inputs", {"x", "net/fc.weight", "net/fc.bias"}},
                  {"attrs", {attr("T", "DT_FLOAT"), attr("_output_shapes", "[[?, 10]]")}}}));
  EXPECT_EQ(node_named(nodes, "global_step")["attrs"],
            json({attr("dtype", "DT_INT64"), attr("shape", "[]")}));
  EXPECT_EQ(node_named(nodes, "train")["attrs"], json({attr("optimizer", "adam")}));
  // Names from the logs are values, whatever they hold.
  const json hostile = node_named(nodes, testing::kHostileNode);
  EXPECT_EQ(hostile["op"], testing::kHostileOp);
  EXPECT_EQ(hostile["attrs"], json({attr(testing::kHostileHParam, testing::kHostileValue)}));
  size_t edges = 0;
  for (const json& n : nodes) edges += n["inputs"].size();
  EXPECT_EQ(edges, static_cast<size_t>(testing::kGraphEdges));
}

TEST(BoardApiGraphTest, AttrsReadAsTheGraphViewShowsThem) {
  using summary::DataType;
  using summary::TensorShape;
  EXPECT_EQ(internal::attr_text(summary::AttrValue(TensorShape{{}, true})), "<unknown rank>");
  EXPECT_EQ(internal::attr_text(summary::AttrValue(int64_t{7})), "7");
  EXPECT_EQ(internal::attr_text(summary::AttrValue(0.5)), "0.5");
  EXPECT_EQ(internal::attr_text(summary::AttrValue(true)), "true");
  EXPECT_EQ(internal::attr_text(
                summary::AttrValue(std::vector<DataType>{DataType::kFloat, DataType::kInt64})),
            "[DT_FLOAT, DT_INT64]");
  EXPECT_EQ(internal::attr_text(summary::AttrValue(std::vector<std::string>{"a", "b"})),
            "[\"a\", \"b\"]");
}

TEST_F(BoardApiTest, GraphRequestsAreRefusedWithStatusAndMessage) {
  testing::write_view_runs(dir_.path());
  // A graph event whose bytes are not a GraphDef (the encoders frame their records).
  {
    std::string file;
    summary::append_file_version_event(file, kStartTime);
    summary::append_graph_event(file, kStartTime, 0, "\xff\xff\xff");
    fs::create_directories(dir_.path() / "broken");
    std::ofstream(dir_.path() / "broken" / "events.out.tfevents.1.host", std::ios::binary) << file;
  }
  EXPECT_EQ(error("/api/graph", {}), std::make_pair(400, std::string("missing parameter 'run'")));
  EXPECT_EQ(error("/api/graph", {{"run", "../hp"}}),
            std::make_pair(400, std::string("invalid run name '../hp': has a '..' component")));
  EXPECT_EQ(error("/api/graph", {{"run", "/hp"}}),
            std::make_pair(400, std::string("invalid run name '/hp': starts with '/'")));
  EXPECT_EQ(error("/api/graph", {{"run", "nope"}}),
            std::make_pair(404, std::string("unknown run 'nope'")));
  EXPECT_EQ(error("/api/graph", {{"run", "hp/sgd"}}),
            std::make_pair(404, std::string("run 'hp/sgd' has no graph")));
  const auto [status, message] = error("/api/graph", {{"run", "broken"}});
  EXPECT_EQ(status, 422);
  EXPECT_THAT(message,
              ::testing::StartsWith("run 'broken' has a graph event that is not a GraphDef: "));
}

TEST_F(BoardApiTest, HParamsAreOneSessionPerRunWithItsValuesAndFinalMetrics) {
  testing::write_view_runs(dir_.path());
  const json body = get("/api/hparams");
  // Hyperparameters by name; metrics as the experiments declare them.
  EXPECT_EQ(body["hparams"], json({{{"name", testing::kHostileHParam}, {"type", "string"}},
                                   {{"name", "batch"}, {"type", "number"}},
                                   {{"name", "lr"}, {"type", "number"}},
                                   {{"name", "optimizer"}, {"type", "string"}}}));
  EXPECT_EQ(body["metrics"],
            json({{{"tag", "accuracy"}, {"group", "eval"}, {"display_name", "test accuracy"}},
                  {{"tag", "loss"}, {"group", ""}, {"display_name", ""}}}));
  const json& sessions = body["sessions"];
  ASSERT_EQ(sessions.size(), std::size(testing::kViewRuns));
  std::vector<testing::ViewRun> runs(std::begin(testing::kViewRuns), std::end(testing::kViewRuns));
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) {
    return std::string_view(a.name) < std::string_view(b.name);
  });
  for (size_t i = 0; i < runs.size(); ++i) {
    const testing::ViewRun& r = runs[i];
    SCOPED_TRACE(r.name);
    const json& s = sessions[i];
    EXPECT_EQ(s["run"], r.name);
    EXPECT_EQ(s["group_name"], "");
    EXPECT_EQ(s["values"], json({testing::kHostileValue, r.batch, r.lr, r.optimizer}));
    EXPECT_EQ(s["metrics"],
              json({{{"value", r.accuracy}, {"step", 30}}, {{"value", r.loss}, {"step", 30}}}));
    EXPECT_EQ(s["start_time"], testing::kStartTime);
    if (r.ended) {
      EXPECT_EQ(s["status"], "success");
      EXPECT_EQ(s["end_time"], testing::test_wall_time(30));
    } else {
      EXPECT_TRUE(s["status"].is_null());
      EXPECT_TRUE(s["end_time"].is_null());
    }
  }
}

TEST_F(BoardApiTest, HParamsWithoutSessionsOrMetricsAreEmptyColumnsAndNulls) {
  write_scalars("train", "loss", {1, 2});
  EXPECT_EQ(
      get("/api/hparams"),
      json({{"hparams", json::array()}, {"metrics", json::array()}, {"sessions", json::array()}}));
  // A run whose metric was not written (yet): a null cell.
  auto w = writer("fresh");
  summary::Summary s;
  const summary::HParams hp{.values = {{"lr", 0.1}}, .metrics = {{.tag = "accuracy"}}};
  s.add_hparams_experiment(hp, kStartTime).add_hparams_session_start(hp, kStartTime);
  w->add_summary(std::move(s), 0);
  w->close();
  index_->refresh();
  const json body = get("/api/hparams");
  ASSERT_EQ(body["sessions"].size(), 1u);
  EXPECT_EQ(body["sessions"][0]["values"], json({0.1}));
  EXPECT_EQ(body["sessions"][0]["metrics"], json({nullptr}));
}

TEST(BoardApiJsonTest, StringsAreEscapedAndInvalidUtf8Replaced) {
  std::string out;
  trainhooks::internal::append_json_string(out, std::string("a\"b\\c\n\t\x01\x7f é €😀", 20));
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\t\\u0001\x7f é €😀\"");
  EXPECT_EQ(json::parse(out), std::string("a\"b\\c\n\t\x01\x7f é €😀"));
  out.clear();
  // A lone continuation byte, a truncated sequence, an overlong '/', a surrogate.
  trainhooks::internal::append_json_string(out,
                                           "x\x80y\xc3"
                                           "z\xc0\xaf\xed\xa0\x80");
  EXPECT_EQ(json::parse(out), "x\uFFFDy\uFFFDz\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD");
  out.clear();
  trainhooks::internal::append_json_number(out, -0.0);
  out += ' ';
  trainhooks::internal::append_json_number(out, 1.0f / 3);
  out += ' ';
  trainhooks::internal::append_json_number(out, 1.0 / 3);
  out += ' ';
  trainhooks::internal::append_json_number(out, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(out, "-0 0.33333334 0.3333333333333333 \"-Infinity\"");
}

TEST(BoardApiUrlTest, CanonicalUrlsEncodeAsEncodeUriComponent) {
  using internal::encode_uri_component;
  EXPECT_EQ(encode_uri_component("AZaz09-_.!~*'()"), "AZaz09-_.!~*'()");
  EXPECT_EQ(encode_uri_component("a b/c?d=e&f+g#h%i:j;k,l@m$n[o]"),
            "a%20b%2Fc%3Fd%3De%26f%2Bg%23h%25i%3Aj%3Bk%2Cl%40m%24n%5Bo%5D");
  EXPECT_EQ(encode_uri_component("é😀"), "%C3%A9%F0%9F%98%80");
  EXPECT_EQ(encode_uri_component(std::string("\0\x7f", 2)), "%00%7F");
  EXPECT_EQ(internal::api_url("/api/runs", {}), "/api/runs");
  EXPECT_EQ(internal::api_url("/api/image",
                              {{"run", "exp 1/train"}, {"tag", "in/image/0"}, {"index", "3"}}),
            "/api/image?run=exp%201%2Ftrain&tag=in%2Fimage%2F0&index=3");
}

TEST(BoardApiDownsampleTest, BucketsKeepFirstMinMaxLastInOrderOnce) {
  using internal::downsample_indices;
  const std::vector<float> v = {5, 1, 9, 2, 3, 3, 3, 3, 0, 7, 8, 6};
  EXPECT_EQ(downsample_indices(v, 0, 12, 12),
            (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  // Two buckets of six: [5 1 9 2 3 3] and [3 3 0 7 8 6].
  EXPECT_EQ(downsample_indices(v, 0, 12, 8), (std::vector<size_t>{0, 1, 2, 5, 6, 8, 10, 11}));
  // A sub-range, as a zoomed request has.
  EXPECT_EQ(downsample_indices(v, 2, 10, 4), (std::vector<size_t>{2, 8, 9}));
  // Fewer than four points: the ends and the farther extreme.
  EXPECT_EQ(downsample_indices(v, 0, 12, 2), (std::vector<size_t>{0, 11}));
  EXPECT_EQ(downsample_indices(v, 0, 12, 3), (std::vector<size_t>{0, 8, 11}));
  // NaN is neither extreme.
  const float nan = std::nanf("");
  EXPECT_EQ(downsample_indices({nan, nan, 4, nan, 1, nan}, 0, 6, 4),
            (std::vector<size_t>{0, 2, 4, 5}));
  EXPECT_EQ(downsample_indices({nan, nan, nan, nan, nan}, 0, 5, 4), (std::vector<size_t>{0, 4}));
}

}  // namespace board_api_test
}  // namespace trainhooks::board
