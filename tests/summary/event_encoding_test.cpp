// The bytes of encoded events, written out by hand from the protobuf wire format:
// key = (field << 3) | wire type; doubles and floats little-endian; lengths as varints.
#include "summary/event_encoding.h"

#include <gtest/gtest.h>

#include "summary/record_io.h"
#include "summary_test_util.h"
#include "trainhooks/summary/event_writer.h"

namespace trainhooks::summary {
namespace event_encoding_test {

using testing::bytes;

// 1700000000.5 as a little-endian double.
const std::string kWallTime = bytes({0x00, 0x00, 0x20, 0x40, 0xfc, 0x54, 0xd9, 0x41});

// Strips the TFRecord framing of a single record.
std::string payload(const std::string& record) {
  return record.substr(kRecordHeaderSize, record.size() - kRecordHeaderSize - kRecordFooterSize);
}

TEST(EventEncodingTest, FileVersionRecordIsTensorBoardsFirstRecord) {
  std::string out;
  append_file_version_event(out, 1700000000.5);
  const std::string expected =
      bytes({0x18, 0, 0, 0, 0, 0, 0, 0, 0xa3, 0x7f, 0x4b, 0x22}) +  // length 24 + masked CRC
      bytes({0x09}) + kWallTime +                                   // wall_time (1, fixed64)
      bytes({0x1a, 0x0d}) + "brain.Event:2" +                       // file_version (3)
      bytes({0x2b, 0x35, 0x31, 0x10});                              // masked CRC of the data
  EXPECT_EQ(out, expected);
}

TEST(EventEncodingTest, FirstScalarOfATagCarriesScalarsPluginMetadata) {
  std::string out;
  append_scalar_event(out, 1700000000.5, 7, "loss", 0.25f, /*with_metadata=*/true);
  const std::string expected =
      bytes({0x29, 0, 0, 0, 0, 0, 0, 0, 0x37, 0xff, 0x5f, 0x00}) +  // length 41
      bytes({0x09}) + kWallTime +                                   // wall_time
      bytes({0x10, 0x07}) +                                         // step 7
      bytes({0x2a, 0x1c}) +                                         // summary (5), 28 bytes
      bytes({0x0a, 0x1a}) +                                         //  value (1), 26 bytes
      bytes({0x0a, 0x04}) + "loss" +                                //   tag (1)
      bytes({0x15, 0x00, 0x00, 0x80, 0x3e}) +                       //   simple_value 0.25f
      bytes({0x4a, 0x0d}) +                                         //   metadata (9), 13 bytes
      bytes({0x0a, 0x09, 0x0a, 0x07}) + "scalars" +                 //    plugin_data.name
      bytes({0x20, 0x01}) +                                         //    data_class SCALAR
      bytes({0xe4, 0xf8, 0xfb, 0xb3});
  EXPECT_EQ(out, expected);
}

TEST(EventEncodingTest, LaterScalarsOfATagHaveNoMetadata) {
  std::string out;
  append_scalar_event(out, 1700000000.5, 8, "loss", 0.5f, /*with_metadata=*/false);
  const std::string expected =
      bytes({0x1a, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x9b, 0xd8, 0x2d}) + bytes({0x09}) + kWallTime +
      bytes({0x10, 0x08, 0x2a, 0x0d}) + bytes({0x0a, 0x0b, 0x0a, 0x04}) + "loss" +
      bytes({0x15, 0x00, 0x00, 0x00, 0x3f}) + bytes({0x66, 0x0b, 0xc7, 0x80});
  EXPECT_EQ(out, expected);
}

TEST(EventEncodingTest, StepZeroAndZeroWallTimeAreOmittedAsProto3Defaults) {
  std::string out;
  append_scalar_event(out, 0.0, 0, "a", 1.0f, false);
  EXPECT_EQ(payload(out), bytes({0x2a, 0x0a, 0x0a, 0x08, 0x0a, 0x01}) + "a" +
                              bytes({0x15, 0x00, 0x00, 0x80, 0x3f}));
}

TEST(EventEncodingTest, NegativeStepIsATenByteVarint) {
  std::string out;
  append_scalar_event(out, 0.0, -1, "a", 0.0f, false);
  EXPECT_EQ(payload(out).substr(0, 11),
            bytes({0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
}

TEST(EventEncodingTest, ZeroScalarValueIsStillWrittenBecauseItIsInAOneof) {
  std::string out;
  append_scalar_event(out, 0.0, 0, "a", 0.0f, false);
  EXPECT_NE(payload(out).find(bytes({0x15, 0, 0, 0, 0})), std::string::npos);
}

TEST(EventEncodingTest, SessionLogEventHoldsStatusPathAndMessage) {
  std::string out;
  append_session_log_event(out, 0.0, 3,
                           serialize_session_log(SessionStatus::kCheckpoint, "ck", "m"));
  EXPECT_EQ(payload(out), bytes({0x10, 0x03, 0x3a, 0x09, 0x08, 0x03, 0x12, 0x02}) + "ck" +
                              bytes({0x1a, 0x01}) + "m");
}

TEST(EventEncodingTest, TextIsARankZeroStringTensorWithTextPluginMetadata) {
  Summary s;
  s.add_text("note", "hi");
  // Summary.Value: tag, tensor (8) {dtype DT_STRING, empty shape, string_val "hi"}, metadata.
  const std::string tensor = bytes({0x08, 0x07, 0x12, 0x00, 0x42, 0x02}) + "hi";
  const std::string metadata = bytes({0x0a, 0x06, 0x0a, 0x04}) + "text" + bytes({0x20, 0x02});
  const std::string value =
      bytes({0x0a, 0x04}) + "note" + bytes({0x42, 0x08}) + tensor + bytes({0x4a, 0x0a}) + metadata;
  EXPECT_EQ(s.serialize(), bytes({0x0a, static_cast<int>(value.size())}) + value);
}

TEST(EventEncodingTest, PluginMetadataNamesThePluginAndItsDataClass) {
  EXPECT_EQ(plugin_metadata(Plugin::kHistograms),
            bytes({0x0a, 0x0c, 0x0a, 0x0a}) + "histograms" + bytes({0x20, 0x02}));
  EXPECT_EQ(plugin_metadata(Plugin::kImages),
            bytes({0x0a, 0x08, 0x0a, 0x06}) + "images" + bytes({0x20, 0x03}));
}

}  // namespace event_encoding_test
}  // namespace trainhooks::summary
