#include "trainhooks/summary/event_writer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "trainhooks/errors.h"

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "summary/histogram.h"
#include "summary/record_io.h"
#include "summary_test_util.h"
#include "trainhooks/summary/event_reader.h"

namespace trainhooks::summary {
namespace event_writer_test {

using namespace std::chrono_literals;
using testing::bytes;
using testing::files_in;
using testing::read_bytes;
using testing::TempDir;

std::string host() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

size_t count_occurrences(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = haystack.find(needle); pos != std::string::npos;
       pos = haystack.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

// A wall clock the test sets by hand, and a sink that keeps warnings.
struct Fakes {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>(1700000000.5);
  std::shared_ptr<CapturingLogSink> log = std::make_shared<CapturingLogSink>();

  EventWriterOptions options(EventWriterOptions base = {}) const {
    base.env = {.clock = clock, .log = log};
    return base;
  }
  std::vector<std::string> warned() const { return log->messages(LogLevel::kWarning); }
};

// The first record of a file written at 1700000000.5 (see event_encoding_test.cpp).
const std::string kVersionRecord =
    bytes({0x18, 0,    0,    0,    0,    0,    0,    0,    0xa3, 0x7f, 0x4b, 0x22,
           0x09, 0x00, 0x00, 0x20, 0x40, 0xfc, 0x54, 0xd9, 0x41, 0x1a, 0x0d}) +
    "brain.Event:2" + bytes({0x2b, 0x35, 0x31, 0x10});

class EventWriterTest : public ::testing::Test {
 protected:
  TempDir dir_;
  Fakes fakes_;
};

TEST_F(EventWriterTest, FileIsNamedWithTenDigitSecondsHostnameAndSuffix) {
  fakes_.clock->set_wall_seconds(123.75);
  EventWriter writer(dir_.path(), fakes_.options({.filename_suffix = ".v2"}));
  EXPECT_EQ(writer.file_path().filename().string(),
            "events.out.tfevents.0000000123." + host() + ".v2");
  EXPECT_EQ(writer.file_path().parent_path(), dir_.path());
}

TEST_F(EventWriterTest, NewFileHoldsTheVersionRecordBeforeAnyEvent) {
  EventWriter writer(dir_.path(), fakes_.options());
  EXPECT_EQ(read_bytes(writer.file_path()), kVersionRecord);
}

TEST_F(EventWriterTest, ScalarEventIsAppendedWithExactBytesAfterFlush) {
  EventWriter writer(dir_.path(), fakes_.options());
  writer.add_scalar("loss", 0.25f, 7);
  writer.flush();
  // See event_encoding_test.cpp for the field-by-field layout of this record.
  const std::string scalar =
      bytes({0x29, 0,    0,    0,    0,    0,    0,    0,    0x37, 0xff,
             0x5f, 0x00, 0x09, 0x00, 0x00, 0x20, 0x40, 0xfc, 0x54, 0xd9,
             0x41, 0x10, 0x07, 0x2a, 0x1c, 0x0a, 0x1a, 0x0a, 0x04}) +
      "loss" + bytes({0x15, 0x00, 0x00, 0x80, 0x3e, 0x4a, 0x0d, 0x0a, 0x09, 0x0a, 0x07}) +
      "scalars" + bytes({0x20, 0x01, 0xe4, 0xf8, 0xfb, 0xb3});
  EXPECT_EQ(read_bytes(writer.file_path()), kVersionRecord + scalar);
}

TEST_F(EventWriterTest, CreatesMissingLogdirs) {
  EventWriter writer(dir_.path() / "a" / "b", fakes_.options());
  EXPECT_TRUE(std::filesystem::is_directory(dir_.path() / "a" / "b"));
  EXPECT_EQ(files_in(dir_.path() / "a" / "b").size(), 1u);
}

TEST_F(EventWriterTest, UncreatableLogdirThrowsNamingIt) {
  testing::write_bytes(dir_.path() / "file", "x");
  try {
    EventWriter writer(dir_.path() / "file" / "sub", fakes_.options());
    FAIL() << "expected FileError";
  } catch (const trainhooks::FileError& e) {
    EXPECT_NE(std::string(e.what()).find((dir_.path() / "file" / "sub").string()),
              std::string::npos)
        << e.what();
  }
}

TEST_F(EventWriterTest, InvalidOptionsAreRejectedNamingTheArgument) {
  try {
    EventWriter writer(dir_.path(), fakes_.options({.max_queue = 0}));
    FAIL();
  } catch (const trainhooks::InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "Invalid max_queue: 0 (must be at least 1)");
  }
  try {
    EventWriter writer(dir_.path(), fakes_.options({.flush_secs = -1}));
    FAIL();
  } catch (const trainhooks::InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "Invalid flush_secs: -1 (must be positive)");
  }
}

TEST_F(EventWriterTest, EventsCarryTheInjectedWallTimeAndTheirStep) {
  EventWriter writer(dir_.path(), fakes_.options());
  fakes_.clock->set_wall_seconds(1800000000.25);
  writer.add_scalar("x", 1.5f, 42);
  writer.close();
  auto events = read_events(dir_.path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_EQ(events[0].wall_time, 1700000000.5);
  EXPECT_EQ(events[1].wall_time, 1800000000.25);
  EXPECT_EQ(events[1].step, 42);
  ASSERT_EQ(events[1].values.size(), 1u);
  EXPECT_EQ(events[1].values[0].tag, "x");
  EXPECT_EQ(events[1].values[0].kind, ValueKind::kScalar);
  EXPECT_EQ(events[1].values[0].scalar, 1.5);
  EXPECT_EQ(events[1].values[0].plugin_name, "scalars");
}

TEST_F(EventWriterTest, PluginMetadataIsWrittenOnlyOnTheFirstValueOfEachTag) {
  EventWriter writer(dir_.path(), fakes_.options());
  for (int step = 0; step < 5; ++step) {
    writer.add_scalar("a", 1.0f, step);
    writer.add_scalar("b", 2.0f, step);
  }
  writer.add_text("note", "hello", 0);
  writer.add_text("note", "again", 1);
  writer.close();
  const std::string file = read_bytes(writer.file_path());
  EXPECT_EQ(count_occurrences(file, "scalars"), 2u);
  EXPECT_EQ(count_occurrences(file, bytes({0x0a, 0x04}) + "text"), 1u);
  // The reader still attributes every value to its plugin.
  for (const auto& e : read_events(writer.file_path())) {
    for (const auto& v : e.values) EXPECT_FALSE(v.plugin_name.empty()) << v.tag;
  }
}

TEST_F(EventWriterTest, FlushMakesEveryEarlierEventReadable) {
  EventWriter writer(dir_.path(), fakes_.options());
  for (int i = 0; i < 100; ++i) writer.add_scalar("loss", static_cast<float>(i), i);
  writer.flush();
  auto events = read_events(dir_.path());
  ASSERT_EQ(events.size(), 101u);
  EXPECT_EQ(events.back().step, 99);
}

TEST_F(EventWriterTest, EventsReachTheFileEveryFlushSecsWithoutAnExplicitFlush) {
  EventWriter writer(dir_.path(), fakes_.options({.flush_secs = 0.05}));
  writer.add_scalar("loss", 1.0f, 1);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  size_t seen = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    seen = read_events(dir_.path()).size();
    if (seen == 2) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(seen, 2u);
}

TEST_F(EventWriterTest, WithoutFlushSmallWritesStayBufferedUntilFlushSecs) {
  EventWriter writer(dir_.path(), fakes_.options({.flush_secs = 3600}));
  writer.add_scalar("loss", 1.0f, 1);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(read_events(dir_.path()).size(), 1u) << "no write per event";
  writer.flush();
  EXPECT_EQ(read_events(dir_.path()).size(), 2u);
}

TEST_F(EventWriterTest, CloseWritesEverythingQueued) {
  EventWriter writer(dir_.path(), fakes_.options({.max_queue = 1000, .flush_secs = 3600}));
  for (int i = 0; i < 500; ++i) writer.add_scalar("loss", static_cast<float>(i), i);
  writer.close();
  EXPECT_TRUE(writer.closed());
  EXPECT_EQ(read_events(dir_.path()).size(), 501u);
}

TEST_F(EventWriterTest, DestructorClosesAndWritesQueuedEvents) {
  {
    EventWriter writer(dir_.path(), fakes_.options({.flush_secs = 3600}));
    writer.add_scalar("loss", 1.0f, 1);
  }
  EXPECT_EQ(read_events(dir_.path()).size(), 2u);
}

TEST_F(EventWriterTest, EventsAddedAfterCloseAreDroppedWithOneWarning) {
  EventWriter writer(dir_.path(), fakes_.options());
  writer.close();
  const std::string before = read_bytes(writer.file_path());
  writer.add_scalar("loss", 1.0f, 5);
  writer.add_text("t", "x", 6);
  writer.flush();
  EXPECT_EQ(read_bytes(writer.file_path()), before);
  EXPECT_EQ(writer.dropped_events(), 2);
  auto warned = fakes_.warned();
  ASSERT_EQ(warned.size(), 1u);
  EXPECT_EQ(warned[0], "EventWriter for " + dir_.path().string() +
                           " is closed; dropping the event at step 5 and any further ones "
                           "until reopen().");
}

TEST_F(EventWriterTest, ReopenStartsANewFileWithItsOwnVersionRecordAndMetadata) {
  EventWriter writer(dir_.path(), fakes_.options());
  writer.add_scalar("loss", 1.0f, 1);
  writer.close();
  const auto first = writer.file_path();
  fakes_.clock->set_wall_seconds(1700000010.0);
  writer.reopen();
  EXPECT_FALSE(writer.closed());
  EXPECT_NE(writer.file_path(), first);
  EXPECT_EQ(writer.file_path().filename().string(), "events.out.tfevents.1700000010." + host());
  writer.add_scalar("loss", 2.0f, 2);
  writer.close();
  auto second = read_events(writer.file_path());
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].file_version, "brain.Event:2");
  EXPECT_EQ(count_occurrences(read_bytes(writer.file_path()), "scalars"), 1u);
  EXPECT_EQ(read_events(first).size(), 2u);
  EXPECT_EQ(read_events(dir_.path()).size(), 4u);
}

TEST_F(EventWriterTest, ReopenInTheSameSecondNeverOverwritesTheEarlierFile) {
  EventWriter writer(dir_.path(), fakes_.options());
  writer.add_scalar("loss", 1.0f, 1);
  writer.close();
  writer.reopen();
  EXPECT_EQ(writer.file_path().filename().string(),
            "events.out.tfevents.1700000000." + host() + ".1");
  writer.close();
  EXPECT_EQ(files_in(dir_.path()).size(), 2u);
  EXPECT_EQ(read_events(dir_.path() / ("events.out.tfevents.1700000000." + host())).size(), 2u);
}

TEST_F(EventWriterTest, ReopenOfAnOpenWriterDoesNothing) {
  EventWriter writer(dir_.path(), fakes_.options());
  const auto path = writer.file_path();
  fakes_.clock->set_wall_seconds(1700000100.0);
  writer.reopen();
  EXPECT_EQ(writer.file_path(), path);
  EXPECT_EQ(files_in(dir_.path()).size(), 1u);
}

TEST_F(EventWriterTest, AddingAfterReopenWarnsAgainOnlyAfterTheNextClose) {
  EventWriter writer(dir_.path(), fakes_.options());
  writer.close();
  writer.add_scalar("a", 1, 1);
  fakes_.clock->set_wall_seconds(1700000001.0);
  writer.reopen();
  writer.add_scalar("a", 1, 2);
  writer.close();
  writer.add_scalar("a", 1, 3);
  EXPECT_EQ(fakes_.warned().size(), 2u);
  EXPECT_EQ(writer.dropped_events(), 2);
}

TEST_F(EventWriterTest, ConcurrentWritersThroughASmallQueueLoseNothingAndKeepPerThreadOrder) {
  constexpr int kThreads = 4, kEach = 20000;
  EventWriter writer(dir_.path(), fakes_.options({.max_queue = 10}));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string tag = "thread" + std::to_string(t);
      for (int i = 0; i < kEach; ++i) writer.add_scalar(tag, static_cast<float>(i), i);
    });
  }
  for (auto& t : threads) t.join();
  writer.close();
  std::map<std::string, int64_t> next;
  size_t values = 0;
  for (const auto& e : read_events(dir_.path())) {
    for (const auto& v : e.values) {
      ASSERT_EQ(e.step, next[v.tag]) << v.tag;
      ASSERT_EQ(v.scalar, static_cast<double>(e.step));
      ++next[v.tag];
      ++values;
    }
  }
  EXPECT_EQ(values, static_cast<size_t>(kThreads * kEach));
}

TEST_F(EventWriterTest, SummaryValuesAreWrittenAsOneEvent) {
  EventWriter writer(dir_.path(), fakes_.options());
  Summary s;
  s.add_scalar("a", 1.0f).add_text("b", "two").add_scalar("c", 3.0f);
  writer.add_summary(s, 9);
  writer.add_summary(std::move(s), 10);
  writer.close();
  auto events = read_events(dir_.path());
  ASSERT_EQ(events.size(), 3u);
  for (int i = 1; i <= 2; ++i) {
    ASSERT_EQ(events[i].values.size(), 3u);
    EXPECT_EQ(events[i].step, 8 + i);
    EXPECT_EQ(events[i].values[0].tag, "a");
    EXPECT_EQ(events[i].values[1].kind, ValueKind::kText);
    EXPECT_EQ(events[i].values[1].text, "two");
    EXPECT_EQ(events[i].values[1].plugin_name, "text");
    EXPECT_EQ(events[i].values[2].scalar, 3.0);
  }
}

TEST_F(EventWriterTest, HistogramRoundTripsWithTensorFlowsBuckets) {
  at::Tensor values = at::linspace(-3, 3, 101, at::kFloat);
  EventWriter writer(dir_.path(), fakes_.options());
  writer.add_histogram("w", values, 3);
  writer.close();
  auto events = read_events(dir_.path());
  ASSERT_EQ(events.size(), 2u);
  const EventValue& v = events[1].values.at(0);
  EXPECT_EQ(v.kind, ValueKind::kHistogram);
  EXPECT_EQ(v.plugin_name, "histograms");
  ASSERT_TRUE(v.histogram.has_value());
  at::Tensor d = values.to(at::kDouble).contiguous();
  HistogramValue expected = build_histogram(d.data_ptr<double>(), 101);
  EXPECT_EQ(v.histogram->num, 101);
  EXPECT_EQ(v.histogram->min, -3.0);
  EXPECT_EQ(v.histogram->max, 3.0);
  EXPECT_EQ(v.histogram->sum, expected.sum);
  EXPECT_EQ(v.histogram->sum_squares, expected.sum_squares);
  EXPECT_EQ(v.histogram->bucket_limits, expected.bucket_limits);
  EXPECT_EQ(v.histogram->buckets, expected.buckets);
}

TEST_F(EventWriterTest, SessionLogRoundTrips) {
  EventWriter writer(dir_.path(), fakes_.options());
  writer.add_session_log(SessionStatus::kStart, "", "", 0);
  writer.add_session_log(SessionStatus::kCheckpoint, "/ckpt/model.ckpt-10", "saved", 10);
  writer.close();
  auto events = read_events(dir_.path());
  ASSERT_EQ(events.size(), 3u);
  ASSERT_TRUE(events[1].session_log.has_value());
  EXPECT_EQ(events[1].session_log->status, SessionStatus::kStart);
  ASSERT_TRUE(events[2].session_log.has_value());
  EXPECT_EQ(events[2].session_log->status, SessionStatus::kCheckpoint);
  EXPECT_EQ(events[2].session_log->checkpoint_path, "/ckpt/model.ckpt-10");
  EXPECT_EQ(events[2].session_log->msg, "saved");
  EXPECT_EQ(events[2].step, 10);
}

TEST(EventWriterCacheTest, ReturnsOneSharedWriterPerLogdir) {
  TempDir dir;
  auto a = EventWriter::for_logdir(dir.path() / "run");
  auto b = EventWriter::for_logdir(dir.path() / "run" / "");
  auto c = EventWriter::for_logdir(dir.path() / "x" / ".." / "run");
  auto other = EventWriter::for_logdir(dir.path() / "other");
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  EXPECT_NE(a, other);
  EventWriter::clear_cache();
  EXPECT_TRUE(a->closed());
  EXPECT_TRUE(other->closed());
  auto fresh = EventWriter::for_logdir(dir.path() / "run");
  EXPECT_NE(fresh, a);
  EXPECT_FALSE(fresh->closed());
  EventWriter::clear_cache();
}

// A writer killed mid-stream (SIGKILL: no destructor, no flush) leaves whole records followed by
// at most one torn record; the reader returns every whole one and stops without an error.
TEST(EventWriterCrashTest, ReaderReadsUpToTheLastWholeRecordOfAKilledWriter) {
  TempDir dir;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      EventWriter writer(dir.path(), {.flush_secs = 0.001});
      for (int64_t i = 0; i < 100'000'000; ++i) writer.add_scalar("loss", static_cast<float>(i), i);
    } catch (...) {
    }
    _exit(1);  // only reached if the parent never kills us
  }
  // Bounded wait for the child to have written a good amount, then kill it.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  uintmax_t size = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path(), ec)) {
      size = entry.file_size(ec);
    }
    if (size > 512 * 1024) break;
    std::this_thread::sleep_for(2ms);
  }
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child finished before it was killed";
  ASSERT_GT(size, 512u * 1024u) << "the child wrote too little in 30 s";

  EventReader reader(dir.path());
  auto first = reader.next();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->file_version, "brain.Event:2");
  int64_t expected_step = 0;
  while (auto e = reader.next()) {
    ASSERT_EQ(e->step, expected_step);
    ASSERT_EQ(e->values.at(0).scalar, static_cast<double>(expected_step));
    ++expected_step;
  }
  EXPECT_GT(expected_step, 10000);
  // What follows the last whole record is less than one scalar record (about 40 bytes).
  RecordFileReader records(reader.files().at(0));
  std::string record;
  while (records.read(record) == RecordFileReader::Status::kRecord) {
  }
  EXPECT_LT(std::filesystem::file_size(reader.files().at(0)) - records.offset(), 64u);
}

}  // namespace event_writer_test
}  // namespace trainhooks::summary
