#include "summary/record_io.h"

#include <gtest/gtest.h>

#include "summary_test_util.h"
#include "trainhooks/summary/event_reader.h"
#include "util/crc32c.h"

namespace trainhooks::summary {
namespace record_io_test {

using testing::bytes;
using testing::TempDir;
using testing::write_bytes;
using Status = RecordFileReader::Status;

// "123456789" framed: length 9, masked CRC of the length bytes, data, masked CRC of the data
// (crc32c 0xE3069283, masked 0xc78ab0e5). Computed independently of this library.
const std::string kFramed123456789 = bytes({0x09, 0, 0, 0, 0, 0, 0, 0, 0x37, 0xf9, 0x71, 0x39}) +
                                     "123456789" + bytes({0xe5, 0xb0, 0x8a, 0xc7});

TEST(RecordFramingTest, AppendRecordWritesLengthCrcDataCrc) {
  std::string out;
  append_record(out, "123456789");
  EXPECT_EQ(out, kFramed123456789);
}

TEST(RecordFramingTest, EmptyRecordHasZeroLengthAndTheMaskedCrcOfNothing) {
  std::string out;
  append_record(out, "");
  EXPECT_EQ(out, bytes({0, 0, 0, 0, 0, 0, 0, 0, 0x29, 0x03, 0x98, 0x07, 0xd8, 0xea, 0x82, 0xa2}));
}

class RecordFileReaderTest : public ::testing::Test {
 protected:
  std::filesystem::path file() const { return dir_.path() / "records"; }
  TempDir dir_;
};

TEST_F(RecordFileReaderTest, ReadsRecordsInOrderThenEnds) {
  std::string data;
  append_record(data, "first");
  append_record(data, "");
  append_record(data, std::string(100000, 'x'));
  write_bytes(file(), data);

  RecordFileReader reader(file());
  std::string record;
  ASSERT_EQ(reader.read(record), Status::kRecord);
  EXPECT_EQ(record, "first");
  ASSERT_EQ(reader.read(record), Status::kRecord);
  EXPECT_EQ(record, "");
  ASSERT_EQ(reader.read(record), Status::kRecord);
  EXPECT_EQ(record, std::string(100000, 'x'));
  EXPECT_EQ(reader.read(record), Status::kEnd);
  EXPECT_EQ(reader.offset(), data.size());
}

TEST_F(RecordFileReaderTest, TruncationAtEveryByteEndsCleanlyAfterTheLastWholeRecord) {
  std::string data;
  std::vector<size_t> ends;
  for (std::string r : {"alpha", "", "gamma-gamma"}) {
    append_record(data, r);
    ends.push_back(data.size());
  }
  for (size_t cut = 0; cut <= data.size(); ++cut) {
    write_bytes(file(), data.substr(0, cut));
    RecordFileReader reader(file());
    std::string record;
    size_t whole = 0;
    Status status;
    while ((status = reader.read(record)) == Status::kRecord) ++whole;
    ASSERT_EQ(status, Status::kEnd) << "cut at " << cut;
    size_t expected = std::count_if(ends.begin(), ends.end(), [&](size_t e) { return e <= cut; });
    ASSERT_EQ(whole, expected) << "cut at " << cut;
  }
}

TEST_F(RecordFileReaderTest, ResumesWhenATornRecordIsCompletedLater) {
  std::string data;
  append_record(data, "one");
  append_record(data, "two");
  write_bytes(file(), data.substr(0, data.size() - 3));
  RecordFileReader reader(file());
  std::string record;
  ASSERT_EQ(reader.read(record), Status::kRecord);
  ASSERT_EQ(reader.read(record), Status::kEnd);
  testing::append_bytes(file(), data.substr(data.size() - 3));
  ASSERT_EQ(reader.read(record), Status::kRecord);
  EXPECT_EQ(record, "two");
}

TEST_F(RecordFileReaderTest, DataCrcMismatchIsCorruptAtTheRecordOffsetAndSkipsWhole) {
  std::string data;
  append_record(data, "good");
  const size_t second = data.size();
  append_record(data, "flipped");
  append_record(data, "after");
  data[second + kRecordHeaderSize + 2] ^= 0x01;
  write_bytes(file(), data);

  RecordFileReader reader(file());
  std::string record;
  ASSERT_EQ(reader.read(record), Status::kRecord);
  ASSERT_EQ(reader.read(record), Status::kCorrupt);
  EXPECT_EQ(reader.offset(), second);
  EXPECT_EQ(reader.error(), "data CRC mismatch");
  EXPECT_EQ(reader.skip_corrupt(), kRecordHeaderSize + 7 + kRecordFooterSize);
  ASSERT_EQ(reader.read(record), Status::kRecord);
  EXPECT_EQ(record, "after");
}

TEST_F(RecordFileReaderTest, LengthCrcMismatchIsCorruptAndSkippingFindsTheNextRecord) {
  std::string data;
  append_record(data, "good");
  const size_t second = data.size();
  append_record(data, "bad length");
  const size_t third = data.size();
  append_record(data, "after");
  data[second] ^= 0x40;
  write_bytes(file(), data);

  RecordFileReader reader(file());
  std::string record;
  ASSERT_EQ(reader.read(record), Status::kRecord);
  ASSERT_EQ(reader.read(record), Status::kCorrupt);
  EXPECT_EQ(reader.error(), "length CRC mismatch");
  EXPECT_EQ(reader.skip_corrupt(), third - second);
  ASSERT_EQ(reader.read(record), Status::kRecord);
  EXPECT_EQ(record, "after");
}

TEST_F(RecordFileReaderTest, HugeLengthBeyondTheEndOfFileIsATornRecordNotAnAllocation) {
  std::string header(8, '\0');
  const uint64_t length = uint64_t{1} << 39;
  for (int i = 0; i < 8; ++i) header[i] = static_cast<char>(length >> (8 * i));
  const uint32_t masked = crc32c::mask(crc32c::value(header));
  for (int i = 0; i < 4; ++i) header.push_back(static_cast<char>(masked >> (8 * i)));
  write_bytes(file(), header + "only a few bytes");
  RecordFileReader reader(file());
  std::string record;
  EXPECT_EQ(reader.read(record), Status::kEnd);
  EXPECT_EQ(reader.offset(), 0u);
}

TEST_F(RecordFileReaderTest, MissingFileThrowsNamingThePath) {
  try {
    RecordFileReader reader(dir_.path() / "absent");
    FAIL() << "expected EventFileError";
  } catch (const EventFileError& e) {
    EXPECT_NE(std::string(e.what()).find("absent"), std::string::npos) << e.what();
  }
}

}  // namespace record_io_test
}  // namespace trainhooks::summary
