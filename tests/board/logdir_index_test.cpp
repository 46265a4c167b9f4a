#include "trainhooks/board/logdir_index.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include <unistd.h>

#include "trainhooks/errors.h"
#include "trainhooks/summary/event_writer.h"
#include "trainhooks/summary/inspect.h"
#include "trainhooks/testing/fake_env.h"

// The summary tests' scratch directories and byte-level file helpers.
#include "summary/record_io.h"
#include "summary/summary_test_util.h"

namespace trainhooks::board {
namespace logdir_index_test {

namespace fs = std::filesystem;
using summary::EventWriter;
using summary::EventWriterOptions;
using summary::SessionStatus;
using summary::ValueKind;
using summary::testing::append_bytes;
using summary::testing::TempDir;
using summary::testing::write_bytes;

// ---- Events encoded by hand, for files the writer would never produce. ----

std::string varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

std::string length_delimited(int field, const std::string& bytes) {
  return varint(static_cast<uint64_t>(field) << 3 | 2) + varint(bytes.size()) + bytes;
}

std::string fixed32(int field, float v) {
  char b[4];
  std::memcpy(b, &v, 4);
  return varint(static_cast<uint64_t>(field) << 3 | 5) + std::string(b, 4);
}

// Summary.Value{tag, simple_value}.
std::string scalar_value(const std::string& tag, float v) {
  return length_delimited(1, tag) + fixed32(2, v);
}

// Event{step, summary{values}}, framed as a record.
std::string summary_record(int64_t step, const std::vector<std::string>& values) {
  std::string summary;
  for (const std::string& v : values) summary += length_delimited(1, v);
  std::string out;
  summary::append_record(
      out, varint(2 << 3) + varint(static_cast<uint64_t>(step)) + length_delimited(5, summary));
  return out;
}

std::string scalar_record(int64_t step, const std::string& tag, float v) {
  return summary_record(step, {scalar_value(tag, v)});
}

std::string version_record() {
  std::string out;
  summary::append_record(out, length_delimited(3, "brain.Event:2"));
  return out;
}

// ---- Fixtures ----

EventWriterOptions writer_options(double now, std::string suffix = "") {
  return {.flush_secs = 1000,
          .filename_suffix = std::move(suffix),
          .env = {.clock = std::make_shared<FakeClock>(now),
                  .log = std::make_shared<CapturingLogSink>()}};
}

std::vector<int64_t> steps_of(const ScalarSeries& s) { return s.steps; }

std::vector<std::string> names(const std::vector<RunInfo>& runs) {
  std::vector<std::string> out;
  for (const RunInfo& r : runs) out.push_back(r.name);
  return out;
}

const TagInfo* find_tag(const RunInfo& run, const std::string& tag, ValueKind kind) {
  for (const TagInfo& t : run.tags) {
    if (t.tag == tag && t.kind == kind) return &t;
  }
  return nullptr;
}

class LogdirIndexTest : public ::testing::Test {
 protected:
  LogdirIndexOptions options() { return {.env = {.log = log_}}; }
  fs::path file(const std::string& name = "events.out.tfevents.1.host") const {
    return dir_.path() / name;
  }

  TempDir dir_;
  std::shared_ptr<CapturingLogSink> log_ = std::make_shared<CapturingLogSink>();
};

TEST_F(LogdirIndexTest, ConstructorRejectsAPathThatIsNotADirectory) {
  const fs::path missing = dir_.path() / "missing";
  try {
    LogdirIndex index(missing);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), missing.string() + " is not a directory");
  }
  write_bytes(file(), version_record());
  EXPECT_THROW(LogdirIndex{file()}, InvalidArgument);
  try {
    LogdirIndex index(dir_.path(), {.max_images_per_tag = -1});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), "Invalid max_images_per_tag: -1");
  }
}

TEST_F(LogdirIndexTest, ReadsEveryRunWithItsTagsNamedRelativeToTheLogdir) {
  {
    EventWriter root(dir_.path(), writer_options(1700000000));
    root.add_scalar("loss", 0.5f, 1);
    EventWriter train(dir_.path() / "train", writer_options(1700000001));
    summary::Summary s;
    s.add_scalar("loss", 0.25f)
        .add_histogram("w", at::arange(10).to(at::kFloat))
        .add_text("note", "hello");
    train.add_summary(std::move(s), 7);
    EventWriter deep(dir_.path() / "eval" / "deep", writer_options(1700000002));
    deep.add_scalar("acc", 0.75f, 3);
  }
  LogdirIndex index(dir_.path().string() + "/", options());
  EXPECT_TRUE(index.runs().empty()) << "nothing is read before refresh()";
  const RefreshStats stats = index.refresh();
  EXPECT_EQ(stats.new_runs, 3);
  EXPECT_EQ(stats.new_files, 3);
  EXPECT_EQ(stats.records, 6);  // a version record and one summary event per file
  const auto runs = index.runs();
  EXPECT_EQ(names(runs), (std::vector<std::string>{".", "eval/deep", "train"}));

  const RunInfo& train = runs[2];
  EXPECT_EQ(train.files, 1);
  EXPECT_EQ(train.events, 2);
  EXPECT_EQ(train.corrupt_records, 0);
  EXPECT_EQ(train.last_wall_time, 1700000001);
  ASSERT_EQ(train.tags.size(), 3u);
  EXPECT_EQ(train.tags[0].tag, "loss");
  EXPECT_EQ(train.tags[0].kind, ValueKind::kScalar);
  EXPECT_EQ(train.tags[0].plugin_name, "scalars");
  EXPECT_EQ(train.tags[0].count, 1);
  EXPECT_EQ(train.tags[0].min_step, 7);
  EXPECT_EQ(train.tags[0].max_step, 7);
  EXPECT_EQ(train.tags[0].last_wall_time, 1700000001);
  EXPECT_EQ(train.tags[1].tag, "note");
  EXPECT_EQ(train.tags[1].kind, ValueKind::kText);
  EXPECT_EQ(train.tags[2].tag, "w");
  EXPECT_EQ(train.tags[2].kind, ValueKind::kHistogram);

  const ScalarSeries loss = index.scalars("train", "loss");
  EXPECT_EQ(loss.steps, std::vector<int64_t>{7});
  EXPECT_EQ(loss.wall_times, std::vector<double>{1700000001});
  EXPECT_EQ(loss.values, std::vector<float>{0.25f});
  const auto w = index.histograms("train", "w");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].step, 7);
  EXPECT_EQ(w[0].histogram.num, 10);
  EXPECT_EQ(w[0].histogram.max, 9);
  const auto note = index.text("train", "note");
  ASSERT_EQ(note.size(), 1u);
  EXPECT_EQ(note[0].text, "hello");
  EXPECT_EQ(index.scalars("eval/deep", "acc").values, std::vector<float>{0.75f});
  EXPECT_EQ(index.scalars(".", "loss").values, std::vector<float>{0.5f});
  EXPECT_EQ(index.run("train")->events, 2);
  EXPECT_FALSE(index.run("nope").has_value());
}

TEST_F(LogdirIndexTest, RefreshReadsOnlyTheRecordsAppendedSinceTheLastOne) {
  EventWriter writer(dir_.path(), writer_options(1700000000));
  for (int step = 1; step <= 10; ++step) writer.add_scalar("loss", static_cast<float>(step), step);
  writer.flush();
  LogdirIndex index(dir_.path(), options());
  EXPECT_EQ(index.refresh().records, 11);
  EXPECT_EQ(index.refresh().records, 0);
  for (int step = 11; step <= 15; ++step) writer.add_scalar("loss", static_cast<float>(step), step);
  writer.flush();
  const RefreshStats stats = index.refresh();
  EXPECT_EQ(stats.records, 5);
  EXPECT_EQ(stats.new_files, 0);
  EXPECT_EQ(stats.new_runs, 0);
  const ScalarSeries loss = index.scalars(".", "loss");
  ASSERT_EQ(loss.steps.size(), 15u);
  for (int i = 0; i < 15; ++i) {
    EXPECT_EQ(loss.steps[i], i + 1);
    EXPECT_EQ(loss.values[i], static_cast<float>(i + 1));
  }
  EXPECT_EQ(index.run(".")->events, 16);
}

TEST_F(LogdirIndexTest, PartialRecordAtTheEndIsReadOnceItIsComplete) {
  const std::string second = scalar_record(2, "loss", 2.0f);
  write_bytes(file(), version_record() + scalar_record(1, "loss", 1.0f) +
                          second.substr(0, second.size() / 2));
  LogdirIndex index(dir_.path(), options());
  EXPECT_EQ(index.refresh().records, 2);
  EXPECT_EQ(steps_of(index.scalars(".", "loss")), std::vector<int64_t>{1});
  EXPECT_EQ(index.refresh().records, 0) << "still incomplete";
  // A writer whose write failed part-way cuts the file back to its last whole record: that is
  // no shrinking below what was read.
  write_bytes(file(), version_record() + scalar_record(1, "loss", 1.0f));
  EXPECT_EQ(index.refresh().records, 0);
  append_bytes(file(), second.substr(0, second.size() / 2));
  EXPECT_EQ(index.refresh().records, 0);
  append_bytes(file(), second.substr(second.size() / 2));
  EXPECT_EQ(index.refresh().records, 1);
  const ScalarSeries loss = index.scalars(".", "loss");
  EXPECT_EQ(loss.steps, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(loss.values, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(index.run(".")->corrupt_records, 0);
  EXPECT_TRUE(log_->entries().empty()) << log_->entries()[0].message;
}

TEST_F(LogdirIndexTest, CorruptRecordIsSkippedCountedAndWarnedAboutOnce) {
  std::string data = version_record() + scalar_record(1, "loss", 1.0f);
  const size_t offset = data.size();
  data += scalar_record(2, "loss", 2.0f);
  data[offset + summary::kRecordHeaderSize + 1] ^= 0x10;  // the data CRC no longer matches
  data += scalar_record(3, "loss", 3.0f);
  write_bytes(file(), data);
  LogdirIndex index(dir_.path(), options());
  EXPECT_EQ(index.refresh().records, 3);
  EXPECT_EQ(steps_of(index.scalars(".", "loss")), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(index.run(".")->corrupt_records, 1);
  EXPECT_EQ(log_->messages(LogLevel::kWarning),
            std::vector<std::string>{"Corrupt record in " + file().string() + " at byte offset " +
                                     std::to_string(offset) + ": data CRC mismatch; skipped"});
  append_bytes(file(), scalar_record(4, "loss", 4.0f));
  EXPECT_EQ(index.refresh().records, 1);
  EXPECT_EQ(steps_of(index.scalars(".", "loss")), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(index.run(".")->corrupt_records, 1);
  EXPECT_EQ(log_->messages(LogLevel::kWarning).size(), 1u);
}

TEST_F(LogdirIndexTest, FileThatIsNoEventFileIsWarnedAboutOnceAndTheRunReadOn) {
  // A corrupt first record with nothing valid after it: the reader gives up on the file.
  std::string bad = version_record();
  bad[3] ^= 0x01;
  write_bytes(file("events.out.tfevents.1.bad"), bad);
  write_bytes(file("events.out.tfevents.2.good"), version_record() + scalar_record(1, "x", 1));
  LogdirIndex index(dir_.path(), options());
  EXPECT_NO_THROW(index.refresh());
  EXPECT_NO_THROW(index.refresh());
  EXPECT_EQ(steps_of(index.scalars(".", "x")), std::vector<int64_t>{1});
  const auto warnings = log_->messages(LogLevel::kWarning);
  ASSERT_EQ(warnings.size(), 2u) << "the corrupt record, then the file, each once";
  EXPECT_EQ(warnings[1].rfind(file("events.out.tfevents.1.bad").string() +
                                  " is not an event file: its first record fails its checks",
                              0),
            0u)
      << warnings[1];
}

TEST_F(LogdirIndexTest, UnreadableFileIsWarnedAboutAndSkipped) {
  if (::geteuid() == 0) GTEST_SKIP() << "permissions do not apply to root";
  write_bytes(file("events.out.tfevents.1.a"), version_record() + scalar_record(1, "x", 1));
  write_bytes(file("events.out.tfevents.2.b"), version_record() + scalar_record(2, "x", 2));
  fs::permissions(file("events.out.tfevents.1.a"), fs::perms::none);
  LogdirIndex index(dir_.path(), options());
  EXPECT_NO_THROW(index.refresh());
  EXPECT_EQ(steps_of(index.scalars(".", "x")), std::vector<int64_t>{2});
  EXPECT_EQ(log_->messages(LogLevel::kWarning),
            std::vector<std::string>{"Cannot open " + file("events.out.tfevents.1.a").string() +
                                     ": Permission denied"});
}

TEST_F(LogdirIndexTest, FileThatShrankIsReadAgainFromTheStart) {
  std::string data = version_record();
  for (int step = 1; step <= 5; ++step) data += scalar_record(step, "loss", 1.0f);
  write_bytes(file(), data);
  LogdirIndex index(dir_.path(), options());
  EXPECT_EQ(index.refresh().records, 6);
  write_bytes(file(), version_record() + scalar_record(10, "loss", 2.0f));  // same file, shorter
  EXPECT_EQ(index.refresh().records, 2);
  const ScalarSeries loss = index.scalars(".", "loss");
  EXPECT_EQ(loss.steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 10})) << "earlier values stay";
  EXPECT_EQ(loss.values.back(), 2.0f);
  EXPECT_EQ(log_->messages(LogLevel::kInfo),
            std::vector<std::string>{
                file().string() + " was truncated or replaced; reading it again from the start"});
  EXPECT_EQ(index.refresh().records, 0);
}

TEST_F(LogdirIndexTest, DeletedFileStopsBeingFollowedAndItsValuesStay) {
  write_bytes(file("events.out.tfevents.1.a"), version_record() + scalar_record(1, "x", 1));
  write_bytes(file("events.out.tfevents.2.b"), version_record() + scalar_record(2, "x", 2));
  LogdirIndex index(dir_.path(), options());
  index.refresh();
  EXPECT_EQ(index.run(".")->files, 2);
  fs::remove(file("events.out.tfevents.1.a"));
  EXPECT_EQ(index.refresh().records, 0);
  EXPECT_EQ(index.run(".")->files, 1);
  EXPECT_EQ(steps_of(index.scalars(".", "x")), (std::vector<int64_t>{1, 2}));
  fs::remove(file("events.out.tfevents.2.b"));
  index.refresh();
  ASSERT_TRUE(index.run(".").has_value()) << "the directory is still there";
  EXPECT_EQ(index.run(".")->files, 0);
  EXPECT_TRUE(log_->messages(LogLevel::kWarning).empty());
}

TEST_F(LogdirIndexTest, DeletedRunDirectoryRemovesTheRun) {
  for (const char* run : {"train", "eval"}) {
    fs::create_directories(dir_.path() / run);
    write_bytes(dir_.path() / run / "events.out.tfevents.1.h",
                version_record() + scalar_record(1, "x", 1));
  }
  LogdirIndex index(dir_.path(), options());
  index.refresh();
  EXPECT_EQ(names(index.runs()), (std::vector<std::string>{"eval", "train"}));
  fs::remove_all(dir_.path() / "eval");
  index.refresh();
  EXPECT_EQ(names(index.runs()), std::vector<std::string>{"train"});
  EXPECT_FALSE(index.run("eval").has_value());
  EXPECT_THROW(index.scalars("eval", "x"), NotFoundError);

  // Moved away and made again between two refreshes: a new run of the same name.
  TempDir elsewhere;
  fs::rename(dir_.path() / "train", elsewhere.path() / "train");
  fs::create_directories(dir_.path() / "train");
  write_bytes(dir_.path() / "train" / "events.out.tfevents.2.h",
              version_record() + scalar_record(5, "y", 1));
  const RefreshStats stats = index.refresh();
  EXPECT_EQ(stats.new_runs, 1);
  const RunInfo train = *index.run("train");
  EXPECT_EQ(train.events, 2);
  ASSERT_EQ(train.tags.size(), 1u);
  EXPECT_EQ(train.tags[0].tag, "y");
}

TEST_F(LogdirIndexTest, RunThatAppearsLaterIsFound) {
  fs::create_directories(dir_.path() / "a");
  write_bytes(dir_.path() / "a" / "events.out.tfevents.1.h", version_record());
  LogdirIndex index(dir_.path(), options());
  EXPECT_EQ(index.refresh().new_runs, 1);
  fs::create_directories(dir_.path() / "b" / "c");
  write_bytes(dir_.path() / "b" / "c" / "events.out.tfevents.1.h",
              version_record() + scalar_record(4, "x", 1));
  const RefreshStats stats = index.refresh();
  EXPECT_EQ(stats.new_runs, 1);
  EXPECT_EQ(stats.new_files, 1);
  EXPECT_EQ(stats.records, 2);
  EXPECT_EQ(names(index.runs()), (std::vector<std::string>{"a", "b/c"}));
  EXPECT_EQ(steps_of(index.scalars("b/c", "x")), std::vector<int64_t>{4});
  EXPECT_EQ(index.run("a")->tags.size(), 0u);
}

TEST_F(LogdirIndexTest, RestartDiscardsEveryTagsValuesFromItsStepOn) {
  {
    EventWriter first(dir_.path(), writer_options(1700000000));
    first.add_session_log(SessionStatus::kStart, "", "", 0);  // the run's beginning
    for (int step = 1; step <= 70; ++step) {
      first.add_scalar("loss", static_cast<float>(step), step);
      if (step % 10 == 0) first.add_text("note", "before " + std::to_string(step), step);
    }
  }
  LogdirIndex index(dir_.path(), options());
  index.refresh();
  EXPECT_EQ(index.scalars(".", "loss").steps.size(), 70u);
  {
    // Restored from the checkpoint of step 50: the steps after it are written again.
    EventWriter second(dir_.path(), writer_options(1700000100));
    second.add_session_log(SessionStatus::kStart, "", "", 51);
    for (int step = 51; step <= 100; ++step) {
      second.add_scalar("loss", static_cast<float>(1000 + step), step);
    }
  }
  index.refresh();
  const ScalarSeries loss = index.scalars(".", "loss");
  ASSERT_EQ(loss.steps.size(), 100u);
  for (int i = 0; i < 100; ++i) {
    const int step = i + 1;
    EXPECT_EQ(loss.steps[i], step);
    EXPECT_EQ(loss.values[i], static_cast<float>(step <= 50 ? step : 1000 + step)) << step;
  }
  std::vector<int64_t> note_steps;
  for (const TextPoint& t : index.text(".", "note")) note_steps.push_back(t.step);
  EXPECT_EQ(note_steps, (std::vector<int64_t>{10, 20, 30, 40, 50}));
  const RunInfo run = *index.run(".");
  EXPECT_EQ(run.purged_values, 22);  // loss 51..70 and note 60, 70
  EXPECT_EQ(find_tag(run, "loss", ValueKind::kScalar)->count, 100);
  EXPECT_EQ(find_tag(run, "note", ValueKind::kText)->max_step, 50);
  EXPECT_EQ(log_->messages(LogLevel::kInfo),
            std::vector<std::string>{"run '.': restart at step 51 (SessionLog START): 22 earlier "
                                     "values with step >= 51 discarded"});
}

TEST_F(LogdirIndexTest, WithoutFileVersionAnOutOfOrderStepPurgesOnlyItsOwnTags) {
  std::string data;
  for (int step = 1; step <= 4; ++step) {
    data += summary_record(step, {scalar_value("a", 1), scalar_value("b", 1)});
  }
  write_bytes(file(), data);
  LogdirIndex index(dir_.path(), options());
  index.refresh();
  append_bytes(file(), scalar_record(2, "a", 5));
  index.refresh();
  const ScalarSeries a = index.scalars(".", "a");
  EXPECT_EQ(a.steps, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(a.values, (std::vector<float>{1, 5}));
  EXPECT_EQ(steps_of(index.scalars(".", "b")), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(index.run(".")->purged_values, 3);
}

TEST_F(LogdirIndexTest, SeriesComeBackInStepOrderWithEqualStepsInReadOrder) {
  std::string data = version_record();
  for (int step : {5, 3, 4, 1}) data += scalar_record(step, "x", static_cast<float>(step));
  data += scalar_record(3, "x", 30);
  write_bytes(file(), data);
  LogdirIndex index(dir_.path(), options());
  index.refresh();
  ScalarSeries x = index.scalars(".", "x");
  EXPECT_EQ(x.steps, (std::vector<int64_t>{1, 3, 3, 4, 5}));
  EXPECT_EQ(x.values, (std::vector<float>{1, 3, 30, 4, 5}));
  append_bytes(file(), scalar_record(2, "x", 2) + scalar_record(6, "x", 6));
  index.refresh();
  x = index.scalars(".", "x");
  EXPECT_EQ(x.steps, (std::vector<int64_t>{1, 2, 3, 3, 4, 5, 6}));
  EXPECT_EQ(x.values, (std::vector<float>{1, 2, 3, 30, 4, 5, 6}));
  const TagInfo* info = find_tag(*index.run("."), "x", ValueKind::kScalar);
  EXPECT_EQ(info->min_step, 1);
  EXPECT_EQ(info->max_step, 6);
}

TEST_F(LogdirIndexTest, ImagesAreSampledToTheLimitAlwaysKeepingTheNewest) {
  EventWriter writer(dir_.path(), writer_options(1700000000));
  LogdirIndex index(dir_.path(), {.max_images_per_tag = 3, .env = {.log = log_}});
  for (int step = 1; step <= 60; ++step) {
    writer.add_image("sample", at::full({1, 1, 2, 2}, step, at::kByte), step, {.max_outputs = 1});
    if (step % 6 == 0) {
      writer.flush();
      index.refresh();
      const auto images = index.images(".", "sample/image");
      ASSERT_EQ(images.size(), 3u) << step;
      EXPECT_EQ(images.back().step, step);
      EXPECT_TRUE(images[0].step < images[1].step && images[1].step < images[2].step);
      EXPECT_EQ(images.back().image.width, 2);
      EXPECT_EQ(images.back().image.encoded.substr(1, 3), "PNG");
    }
  }
  const TagInfo* info = find_tag(*index.run("."), "sample/image", ValueKind::kImage);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->count, 3);
  EXPECT_EQ(info->max_step, 60);
  EXPECT_EQ(info->plugin_name, "images");
}

TEST_F(LogdirIndexTest, UnknownRunOrTagOfAKindIsNotFound) {
  write_bytes(file(), version_record() + scalar_record(1, "loss", 1));
  LogdirIndex index(dir_.path(), options());
  index.refresh();
  auto message = [](auto&& call) {
    try {
      call();
    } catch (const NotFoundError& e) {
      return std::string(e.what());
    }
    return std::string("no NotFoundError");
  };
  EXPECT_EQ(message([&] { index.scalars("x", "loss"); }), "unknown run 'x'");
  EXPECT_EQ(message([&] { index.images("x", "loss"); }), "unknown run 'x'");
  EXPECT_EQ(message([&] { index.scalars(".", "y"); }), "run '.' has no scalar tag 'y'");
  EXPECT_EQ(message([&] { index.histograms(".", "loss"); }), "run '.' has no histogram tag 'loss'");
  EXPECT_EQ(message([&] { index.images(".", "loss"); }), "run '.' has no image tag 'loss'");
  EXPECT_EQ(message([&] { index.text(".", "loss"); }), "run '.' has no text tag 'loss'");
}

TEST_F(LogdirIndexTest, UndecodedTensorHistogramIsListedAsATensor) {
  // Summary.Value{tag "h", metadata{plugin_data{plugin_name "histograms"}}, tensor{DT_DOUBLE}}:
  // TensorFlow 2's histogram, whose tensor the reader does not decode.
  const std::string value =
      length_delimited(1, "h") +
      length_delimited(9, length_delimited(1, length_delimited(1, "histograms"))) +
      length_delimited(8, varint(1 << 3) + varint(2));
  write_bytes(file(), version_record() + summary_record(3, {value}));
  LogdirIndex index(dir_.path(), options());
  index.refresh();
  const RunInfo run = *index.run(".");
  ASSERT_EQ(run.tags.size(), 1u);
  EXPECT_EQ(run.tags[0].kind, ValueKind::kTensor);
  EXPECT_EQ(run.tags[0].plugin_name, "histograms");
  EXPECT_EQ(run.tags[0].max_step, 3);
  EXPECT_THROW(index.histograms(".", "h"), NotFoundError);
}

TEST_F(LogdirIndexTest, ReadersRunConcurrentlyWithRefreshes) {
  EventWriter writer(dir_.path(), writer_options(1700000000));
  LogdirIndex index(dir_.path(), options());
  constexpr int kSteps = 200;
  std::atomic<bool> done{false};
  std::atomic<int> inconsistent{0};
  std::thread refresher([&] {
    for (int step = 1; step <= kSteps; ++step) {
      writer.add_scalar("loss", static_cast<float>(step), step);
      writer.flush();
      index.refresh();
    }
    done = true;
  });
  size_t last_size = 0;
  int reads = 0;
  while (!done || reads == 0) {
    const auto run = index.run(".");
    if (!run || run->tags.empty()) continue;
    const ScalarSeries s = index.scalars(".", "loss");
    ++reads;
    const bool consistent = s.steps.size() == s.values.size() &&
                            s.steps.size() == s.wall_times.size() && s.steps.size() >= last_size &&
                            std::is_sorted(s.steps.begin(), s.steps.end());
    if (!consistent) ++inconsistent;
    for (size_t i = 0; i < s.steps.size(); ++i) {
      if (s.steps[i] != static_cast<int64_t>(i + 1) || s.values[i] != static_cast<float>(i + 1)) {
        ++inconsistent;
        break;
      }
    }
    last_size = s.steps.size();
  }
  refresher.join();
  EXPECT_EQ(inconsistent, 0);
  EXPECT_GT(reads, 0);
  EXPECT_EQ(index.scalars(".", "loss").steps.size(), static_cast<size_t>(kSteps));
}

TEST_F(LogdirIndexTest, ReadsForeignEventFilesAsInspectDoes) {
  const fs::path dir = fs::path(TRAINHOOKS_SHARED_TESTDATA) / "tfevents";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "shared test data not found at " << dir;
  LogdirIndex index(dir, options());
  index.refresh();
  const auto expected = summary::inspect_logdir(dir, {.read = {.purge_orphaned_data = true}});
  const auto runs = index.runs();
  ASSERT_EQ(runs.size(), expected.size());
  int64_t compared = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    const summary::RunStats& want = expected[r];
    const RunInfo& got = runs[r];
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.files, std::ssize(want.files));
    EXPECT_EQ(got.events, want.events);
    EXPECT_EQ(got.corrupt_records, 0);
    ASSERT_EQ(got.tags.size(), want.tags.size());
    for (size_t t = 0; t < got.tags.size(); ++t) {
      const summary::TagStats& w = want.tags[t];
      const TagInfo& g = got.tags[t];
      EXPECT_EQ(g.tag, w.tag);
      EXPECT_EQ(g.kind, w.kind) << w.tag;
      EXPECT_EQ(g.plugin_name, w.plugin_name) << w.tag;
      EXPECT_EQ(g.count, w.count) << w.tag;
      EXPECT_EQ(g.min_step, w.min_step) << w.tag;
      EXPECT_EQ(g.max_step, w.max_step) << w.tag;
      EXPECT_EQ(g.last_wall_time, w.last_wall_time) << w.tag;
      if (w.kind == ValueKind::kScalar) {
        const ScalarSeries s = index.scalars(got.name, g.tag);
        EXPECT_EQ(std::ssize(s.steps), w.count);
        EXPECT_EQ(s.values.back(), static_cast<float>(*w.last_value)) << w.tag;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 4) << "my_metric, tag, hello, strict/foo";
  // The README's account of two of them.
  const ScalarSeries metric = index.scalars(".", "my_metric");
  ASSERT_EQ(metric.steps.size(), 100u);
  EXPECT_EQ(metric.steps[99], 99);
  EXPECT_EQ(metric.values[99], 49.5f);
  const ScalarSeries strict = index.scalars(".", "strict/foo");
  ASSERT_EQ(strict.steps.size(), 100u);
  EXPECT_EQ(strict.steps[1], 5);
  EXPECT_EQ(strict.steps[99], 495);
}

}  // namespace logdir_index_test
}  // namespace trainhooks::board
