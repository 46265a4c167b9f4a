#include "trainhooks/summary/event_reader.h"

#include <gtest/gtest.h>

#include "summary/record_io.h"
#include "summary_test_util.h"
#include "trainhooks/summary/event_writer.h"

namespace trainhooks::summary {
namespace event_reader_test {

using testing::bytes;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

const std::string kFileStart = bytes({0x18, 0, 0, 0, 0, 0, 0, 0, 0xa3, 0x7f, 0x4b, 0x22});

std::string version_record() {
  std::string out;
  append_record(out, bytes({0x1a, 0x0d}) + "brain.Event:2");
  return out;
}

std::string framed(const std::string& event) {
  std::string out;
  append_record(out, event);
  return out;
}

// Event{step, summary{value{tag, tensor, [metadata{plugin_data{plugin_name}}]}}}, by hand.
std::string tensor_event(int step, const std::string& tag, const std::string& tensor,
                         const std::string& plugin) {
  std::string value = bytes({0x0a, static_cast<int>(tag.size())}) + tag +
                      bytes({0x42, static_cast<int>(tensor.size())}) + tensor;
  if (!plugin.empty()) {
    std::string plugin_data = bytes({0x0a, static_cast<int>(plugin.size())}) + plugin;
    std::string metadata = bytes({0x0a, static_cast<int>(plugin_data.size())}) + plugin_data;
    value += bytes({0x4a, static_cast<int>(metadata.size())}) + metadata;
  }
  std::string summary = bytes({0x0a, static_cast<int>(value.size())}) + value;
  return bytes({0x10, step, 0x2a, static_cast<int>(summary.size())}) + summary;
}

class EventReaderTest : public ::testing::Test {
 protected:
  std::filesystem::path file(const std::string& name = "events.out.tfevents.1.host") const {
    return dir_.path() / name;
  }
  TempDir dir_;
};

TEST_F(EventReaderTest, ReadsTensorFlow2ScalarTensorsInEveryEncoding) {
  // rank-0 DT_FLOAT with tensor_content (1.5f), then with float_val (2.5f) and no metadata,
  // then DT_DOUBLE tensor_content (0.125) under another tag.
  const std::string content = bytes({0x08, 0x01, 0x12, 0x00, 0x22, 0x04, 0x00, 0x00, 0xc0, 0x3f});
  const std::string float_val = bytes({0x08, 0x01, 0x12, 0x00, 0x2a, 0x04, 0x00, 0x00, 0x20, 0x40});
  const std::string dbl = bytes({0x08, 0x02, 0x12, 0x00, 0x22, 0x08, 0, 0, 0, 0, 0, 0, 0xc0, 0x3f});
  write_bytes(file(), version_record() + framed(tensor_event(1, "m", content, "scalars")) +
                          framed(tensor_event(2, "m", float_val, "")) +
                          framed(tensor_event(3, "d", dbl, "scalars")));
  auto events = read_events(file());
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  const double expected[] = {1.5, 2.5, 0.125};
  for (int i = 0; i < 3; ++i) {
    const EventValue& v = events[i + 1].values.at(0);
    EXPECT_EQ(v.kind, ValueKind::kScalar) << i;
    EXPECT_EQ(v.scalar, expected[i]) << i;
    EXPECT_EQ(v.plugin_name, "scalars") << "remembered from the tag's first value";
    EXPECT_EQ(events[i + 1].step, i + 1);
  }
}

TEST_F(EventReaderTest, StringTensorsAreTextAndOtherTensorsAreTensors) {
  const std::string text = bytes({0x08, 0x07, 0x12, 0x00, 0x42, 0x02}) + "hi";
  const std::string vector = bytes({0x08, 0x01, 0x12, 0x04, 0x0a, 0x02, 0x08, 0x02, 0x2a, 0x08, 0,
                                    0, 0x80, 0x3f, 0, 0, 0, 0x40});  // [1.0, 2.0]
  write_bytes(file(), framed(tensor_event(0, "t", text, "text")) +
                          framed(tensor_event(0, "v", vector, "custom")));
  auto events = read_events(file());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].values.at(0).kind, ValueKind::kText);
  EXPECT_EQ(events[0].values.at(0).text, "hi");
  EXPECT_EQ(events[1].values.at(0).kind, ValueKind::kTensor);
  EXPECT_EQ(events[1].values.at(0).plugin_name, "custom");
}

TEST_F(EventReaderTest, CorruptRecordThrowsNamingFileAndOffset) {
  std::string data = version_record();
  const size_t offset = data.size();
  data += framed(tensor_event(1, "m", bytes({0x08, 0x01}), ""));
  data[offset + kRecordHeaderSize + 1] ^= 0x10;
  write_bytes(file(), data);
  EventReader reader(file());
  ASSERT_TRUE(reader.next().has_value());
  try {
    reader.next();
    FAIL() << "expected EventFileError";
  } catch (const EventFileError& e) {
    EXPECT_EQ(std::string(e.what()), "Corrupt record in " + file().string() + " at byte offset " +
                                         std::to_string(offset) + ": data CRC mismatch");
    EXPECT_EQ(e.offset(), offset);
    EXPECT_EQ(e.file(), file());
  }
}

TEST_F(EventReaderTest, SkipModeReportsCorruptRecordsAndReadsOn) {
  std::string data = version_record();
  const size_t offset = data.size();
  data += framed(tensor_event(1, "m", bytes({0x08, 0x01}), ""));
  data += framed(bytes({0x10, 0x02}));
  data[offset + 3] ^= 0x01;  // the length's CRC no longer matches
  write_bytes(file(), data);
  auto log = std::make_shared<CapturingLogSink>();
  EventReader reader(file(), {.skip_corrupt = true, .env = {.log = log}});
  std::vector<int64_t> steps;
  while (auto e = reader.next()) steps.push_back(e->step);
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(reader.corrupt_records(), 1);
  const std::vector<std::string> reports = log->messages(LogLevel::kWarning);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0], "Corrupt record in " + file().string() + " at byte offset " +
                            std::to_string(offset) + ": length CRC mismatch; skipped");
}

TEST_F(EventReaderTest, RecordThatIsNotAnEventIsCorrupt) {
  write_bytes(file(), version_record() + framed(bytes({0xff, 0xff, 0xff})));
  EventReader reader(file());
  reader.next();
  EXPECT_THROW(reader.next(), EventFileError);
}

TEST_F(EventReaderTest, TornLastRecordEndsCleanlyAndIsReadOnceComplete) {
  const std::string last = framed(bytes({0x10, 0x07}));
  write_bytes(file(), version_record() + last.substr(0, 5));
  EventReader reader(file());
  ASSERT_TRUE(reader.next().has_value());
  EXPECT_FALSE(reader.next().has_value());
  testing::append_bytes(file(), last.substr(5));
  auto e = reader.next();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->step, 7);
}

TEST_F(EventReaderTest, DirectoryReadsItsEventFilesInNameOrder) {
  write_bytes(file("events.out.tfevents.2.host"), framed(bytes({0x10, 0x02})));
  write_bytes(file("events.out.tfevents.1.host"), framed(bytes({0x10, 0x01})));
  write_bytes(file("notes.txt"), "not events");
  std::filesystem::create_directories(dir_.path() / "sub");
  write_bytes(dir_.path() / "sub" / "events.out.tfevents.0.host", framed(bytes({0x10, 0x09})));
  EventReader reader(dir_.path());
  ASSERT_EQ(reader.files().size(), 2u);
  std::vector<int64_t> steps;
  while (auto e = reader.next()) steps.push_back(e->step);
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2}));
}

TEST_F(EventReaderTest, TornRecordInAnEarlierFileMovesOnToTheNextFile) {
  write_bytes(file("events.out.tfevents.1.host"),
              framed(bytes({0x10, 0x01})) + framed(bytes({0x10, 0x05})).substr(0, 9));
  write_bytes(file("events.out.tfevents.2.host"), framed(bytes({0x10, 0x02})));
  std::vector<int64_t> steps;
  for (const auto& e : read_events(dir_.path())) steps.push_back(e.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2}));
}

TEST_F(EventReaderTest, MissingPathThrowsNamingIt) {
  try {
    EventReader reader(dir_.path() / "nope");
    FAIL();
  } catch (const EventFileError& e) {
    EXPECT_EQ(std::string(e.what()),
              "No such file or directory: " + (dir_.path() / "nope").string());
  }
}

std::string delimited(int field, const std::string& payload) {
  return bytes({field << 3 | 2, static_cast<int>(payload.size())}) + payload;
}

// What `reader` says (the error message) when it reads on.
std::string error_reading(EventReader& reader) {
  try {
    while (reader.next()) {
    }
  } catch (const EventFileError& e) {
    return e.what();
  }
  return "";
}

TEST_F(EventReaderTest, FileThatIsNotAnEventFileIsAnErrorNamingIt) {
  write_bytes(file("README.md"), "# Not an event file\nJust text.\n");
  EventReader reader(file("README.md"));
  EXPECT_EQ(error_reading(reader), file("README.md").string() +
                                       " is not an event file: its first record fails its checks "
                                       "(length CRC mismatch)");
  auto log = std::make_shared<CapturingLogSink>();
  EventReader skipping(file("README.md"), {.skip_corrupt = true, .env = {.log = log}});
  EXPECT_EQ(error_reading(skipping),
            file("README.md").string() +
                " is not an event file: its first record fails its "
                "checks (length CRC mismatch) and no valid record follows");
}

TEST_F(EventReaderTest, OtherTfRecordFilesAreNotEventFiles) {
  // A tf.Example-like record: field 1 length-delimited, which an Event does not have.
  write_bytes(file("data.tfrecord"), framed(delimited(1, delimited(1, "features"))));
  EventReader reader(file("data.tfrecord"));
  EXPECT_EQ(error_reading(reader), file("data.tfrecord").string() +
                                       " is not an event file: its first record has none of an "
                                       "Event's fields");
}

TEST_F(EventReaderTest, PartialLastRecordIsListedWithItsOffsetAndSizeUntilCompleted) {
  const std::string last = framed(bytes({0x10, 0x07}));
  write_bytes(file(), version_record() + last.substr(0, 5));
  EventReader reader(file());
  while (reader.next()) {
  }
  ASSERT_EQ(reader.partial_records().size(), 1u);
  EXPECT_EQ(reader.partial_records()[0].file, file());
  EXPECT_EQ(reader.partial_records()[0].offset, version_record().size());
  EXPECT_EQ(reader.partial_records()[0].bytes, 5u);
  testing::append_bytes(file(), last.substr(5));
  ASSERT_TRUE(reader.next().has_value());
  EXPECT_FALSE(reader.next().has_value());
  EXPECT_TRUE(reader.partial_records().empty());
}

TEST_F(EventReaderTest, CustomScalarsLayoutIsALayoutNotText) {
  const std::string chart = delimited(1, "a");
  const std::string layout =
      delimited(1, delimited(1, "losses") + delimited(2, chart) + delimited(2, chart)) +
      delimited(1, delimited(1, "accuracy") + delimited(2, chart));
  const std::string tensor = bytes({0x08, 0x07}) + delimited(8, layout);  // DT_STRING, string_val
  write_bytes(file(), version_record() + framed(tensor_event(0, "custom_scalars__config__", tensor,
                                                             "custom_scalars")));
  auto events = read_events(file());
  ASSERT_EQ(events.size(), 2u);
  const EventValue& v = events[1].values.at(0);
  EXPECT_EQ(v.kind, ValueKind::kLayout);
  EXPECT_EQ(std::string(value_kind_name(v.kind)), "layout");
  ASSERT_TRUE(v.layout.has_value());
  EXPECT_EQ(v.layout->categories, (std::vector<std::string>{"losses", "accuracy"}));
  EXPECT_EQ(v.layout->charts, 3);
  EXPECT_TRUE(v.text.empty());
}

TEST_F(EventReaderTest, GraphEventsAreFlagged) {
  write_bytes(file(), version_record() + framed(delimited(4, "graph")) +
                          framed(delimited(9, "meta graph")));
  auto events = read_events(file());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_TRUE(events[1].graph_def);
  EXPECT_FALSE(events[1].meta_graph_def);
  EXPECT_TRUE(events[2].meta_graph_def);
}

// Files written by other tools; the expected contents are those listed in the folder's README.
class SharedTestdataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::is_directory(testing::shared_tfevents_dir())) {
      GTEST_SKIP() << "shared test data not found at " << testing::shared_tfevents_dir();
    }
  }
  static std::filesystem::path path(const std::string& name) {
    return testing::shared_tfevents_dir() / name;
  }
  // Events after the version record, checking that record and the file's first bytes.
  static std::vector<Event> read(const std::string& name) {
    EXPECT_EQ(read_bytes(path(name)).substr(0, 12), kFileStart);
    auto events = read_events(path(name));
    EXPECT_FALSE(events.empty());
    if (events.empty()) return events;
    EXPECT_EQ(events[0].file_version, "brain.Event:2");
    return {events.begin() + 1, events.end()};
  }
};

TEST_F(SharedTestdataTest, TensorFlow2RankZeroTensorScalars) {
  auto events =
      read("go-tensorboard__events.out.tfevents.1585499054.Jaakkos-Mac-mini.local.11684.5.v2");
  ASSERT_EQ(events.size(), 100u);
  for (int step = 0; step < 100; ++step) {
    const Event& e = events[step];
    EXPECT_EQ(e.step, step);
    ASSERT_EQ(e.values.size(), 1u);
    EXPECT_EQ(e.values[0].tag, "my_metric");
    EXPECT_EQ(e.values[0].kind, ValueKind::kScalar);
    EXPECT_EQ(e.values[0].plugin_name, "scalars");
    EXPECT_EQ(e.values[0].scalar, 0.5 * step);
  }
}

TEST_F(SharedTestdataTest, TensorboardXSimpleValues) {
  auto events = read("tensorboa.rs__events.out.tfevents.1661684667.applepie4");
  ASSERT_EQ(events.size(), 10u);
  for (int step = 0; step < 10; ++step) {
    EXPECT_EQ(events[step].step, step);
    ASSERT_EQ(events[step].values.size(), 1u);
    EXPECT_EQ(events[step].values[0].tag, "tag");
    EXPECT_EQ(events[step].values[0].kind, ValueKind::kScalar);
    EXPECT_EQ(events[step].values[0].scalar, step);
  }
}

TEST_F(SharedTestdataTest, MlverseTfeventsScalarWithPluginMetadata) {
  auto events = read("tfevents-js__events.out.tfevents.1687811641.v2");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].step, 0);
  ASSERT_EQ(events[0].values.size(), 1u);
  EXPECT_EQ(events[0].values[0].tag, "hello");
  EXPECT_EQ(events[0].values[0].kind, ValueKind::kScalar);
  EXPECT_EQ(events[0].values[0].scalar, 1.0);
  EXPECT_EQ(events[0].values[0].plugin_name, "scalars");
}

TEST_F(SharedTestdataTest, PyTorchSummaryWriterScalarsEveryFiveSteps) {
  auto events = read("strict__run_1__events.out.tfevents.1622543341.janoshs-mbp.lan.86862.0");
  ASSERT_EQ(events.size(), 100u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(events[i].step, 5 * i);
    ASSERT_EQ(events[i].values.size(), 1u);
    EXPECT_EQ(events[i].values[0].tag, "strict/foo");
    EXPECT_EQ(events[i].values[0].kind, ValueKind::kScalar);
  }
}

TEST_F(SharedTestdataTest, EveryRecordPassesBothCrcChecks) {
  for (const auto& entry : std::filesystem::directory_iterator(testing::shared_tfevents_dir())) {
    if (!is_event_file_name(entry.path().filename().string())) continue;
    RecordFileReader records(entry.path());
    std::string record;
    RecordFileReader::Status status;
    while ((status = records.read(record)) == RecordFileReader::Status::kRecord) {
    }
    EXPECT_EQ(status, RecordFileReader::Status::kEnd) << entry.path();
    EXPECT_EQ(records.offset(), std::filesystem::file_size(entry.path())) << entry.path();
  }
}

}  // namespace event_reader_test
}  // namespace trainhooks::summary
