#include "util/crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace trainhooks {
namespace crc32c_test {

using ExtendFn = uint32_t (*)(uint32_t, const void*, size_t);

struct Path {
  const char* name;
  ExtendFn fn;
};

class Crc32cPathTest : public ::testing::TestWithParam<Path> {
 protected:
  void SetUp() override {
    if (GetParam().fn == &crc32c::extend_hardware && !crc32c::has_hardware()) {
      GTEST_SKIP() << "this CPU has no SSE4.2 CRC32 instruction";
    }
  }
  uint32_t crc(const std::string& bytes) { return GetParam().fn(0, bytes.data(), bytes.size()); }
};

TEST_P(Crc32cPathTest, MatchesTheCheckValueOf123456789) {
  EXPECT_EQ(crc("123456789"), 0xE3069283u);
}

// The iSCSI test vectors (RFC 3720, B.4).
TEST_P(Crc32cPathTest, MatchesThe32ZeroBytesVector) {
  EXPECT_EQ(crc(std::string(32, '\0')), 0x8A9136AAu);
}

TEST_P(Crc32cPathTest, MatchesThe32OnesBytesVector) {
  EXPECT_EQ(crc(std::string(32, '\xff')), 0x62A8AB43u);
}

TEST_P(Crc32cPathTest, MatchesTheAscendingBytesVector) {
  std::string bytes;
  for (int i = 0; i < 32; ++i) bytes.push_back(static_cast<char>(i));
  EXPECT_EQ(crc(bytes), 0x46DD794Eu);
}

TEST_P(Crc32cPathTest, MatchesTheDescendingBytesVector) {
  std::string bytes;
  for (int i = 31; i >= 0; --i) bytes.push_back(static_cast<char>(i));
  EXPECT_EQ(crc(bytes), 0x113FDB5Cu);
}

TEST_P(Crc32cPathTest, EmptyInputIsZero) { EXPECT_EQ(crc(""), 0u); }

TEST_P(Crc32cPathTest, ExtendingInPiecesEqualsOneShotAtEveryAlignment) {
  std::string bytes;
  for (int i = 0; i < 300; ++i) bytes.push_back(static_cast<char>(i * 7 + 3));
  const uint32_t whole = crc(bytes);
  for (size_t split = 0; split <= bytes.size(); ++split) {
    uint32_t c = GetParam().fn(0, bytes.data(), split);
    c = GetParam().fn(c, bytes.data() + split, bytes.size() - split);
    ASSERT_EQ(c, whole) << "split at " << split;
  }
}

INSTANTIATE_TEST_SUITE_P(BothPaths, Crc32cPathTest,
                         ::testing::Values(Path{"portable", &crc32c::extend_portable},
                                           Path{"hardware", &crc32c::extend_hardware}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Crc32cTest, HardwareAndPortablePathsAgreeOnEveryLength) {
  if (!crc32c::has_hardware()) GTEST_SKIP() << "this CPU has no SSE4.2 CRC32 instruction";
  std::string bytes;
  for (int i = 0; i < 1000; ++i) bytes.push_back(static_cast<char>((i * 131) ^ (i >> 3)));
  for (size_t n = 0; n <= bytes.size(); n += 7) {
    ASSERT_EQ(crc32c::extend_hardware(0, bytes.data() + 1, n - (n > 0 ? 1 : 0)),
              crc32c::extend_portable(0, bytes.data() + 1, n - (n > 0 ? 1 : 0)))
        << "length " << n;
  }
}

TEST(Crc32cTest, MaskRotatesAndOffsetsAsTensorFlowDoes) {
  const uint32_t c = 0xE3069283u;
  EXPECT_EQ(crc32c::mask(c), ((c >> 15) | (c << 17)) + 0xa282ead8u);
  EXPECT_EQ(crc32c::unmask(crc32c::mask(c)), c);
  EXPECT_NE(crc32c::mask(c), c);
  // The length field of every event file's first record (24) has this masked CRC.
  const unsigned char length[8] = {0x18, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(crc32c::mask(crc32c::value(length, 8)), 0x224b7fa3u);
}

}  // namespace crc32c_test
}  // namespace trainhooks
