#include "checkpoint/format/trainhooks/torch_zip_writer.h"

#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/format/trainhooks/torch_zip_reader.h"
#include "test_util.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;

namespace torch_zip_writer_test {

using Records = std::vector<std::pair<std::string, std::string>>;

std::string bytes_of(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

std::string ours(const Records& records,
                 uint64_t zip64_limit = th::internal::TorchZipWriter::kZip64Limit) {
  std::string out;
  th::internal::TorchZipWriter w(
      [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }, "archive",
      zip64_limit);
  for (const auto& [name, data] : records) w.write_record(name, data.data(), data.size());
  w.finish();
  EXPECT_EQ(w.size(), out.size());
  return out;
}

std::string libtorchs(const Records& records) {
  std::string out;
  caffe2::serialize::PyTorchStreamWriter w([&](const void* p, size_t n) {
    out.append(static_cast<const char*>(p), n);
    return n;
  });
  for (const auto& [name, data] : records) w.writeRecord(name, data.data(), data.size());
  w.writeEndOfFile();
  return out;
}

// The CRC-32 of zip, bit by bit.
uint32_t reference_crc32(const std::string& s) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : s) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

TEST(TorchZipWriterTest, Crc32IsZipsInAnyPieces) {
  EXPECT_EQ(th::internal::zip_crc32(0, "123456789", 9), 0xCBF43926u);
  EXPECT_EQ(th::internal::zip_crc32(0, "", 0), 0u);
  const std::string data = bytes_of(100003, 1);
  const uint32_t whole = reference_crc32(data);
  EXPECT_EQ(th::internal::zip_crc32(0, data.data(), data.size()), whole);
  uint32_t pieces = 0;
  for (size_t at = 0, n = 1; at < data.size(); at += n, n = n * 3 + 1) {
    n = std::min(n, data.size() - at);
    pieces = th::internal::zip_crc32(pieces, data.data() + at, n);
  }
  EXPECT_EQ(pieces, whole);
}

TEST(TorchZipWriterTest, WritesPyTorchStreamWritersBytes) {
  // Sizes around the 64-byte alignment, empty records, and records of several 1 MiB pieces.
  const Records records = {{"data/0", bytes_of(0, 2)},    {"data/1", bytes_of(1, 3)},
                           {"data/2", bytes_of(63, 4)},   {"data/3", bytes_of(64, 5)},
                           {"data/4", bytes_of(65, 6)},   {"data/5", bytes_of(3000001, 7)},
                           {"data/6", bytes_of(4095, 8)}, {"data/7", bytes_of(4097, 9)},
                           {"a name with spaces/é", "x"}, {"data.pkl", bytes_of(200, 10)}};
  const std::string expected = libtorchs(records);
  const std::string got = ours(records);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected) << "the first difference is at byte "
                               << std::mismatch(got.begin(), got.end(), expected.begin()).first -
                                      got.begin();
  EXPECT_EQ(ours({}), libtorchs({}));
}

// With the ZIP64 limit lowered, both large sizes and large offsets take ZIP64 fields; Python's
// zipfile, which checks every CRC, reads the archive back. (LibTorch's miniz reader checks a ZIP64
// offset's placeholder, 0xFFFFFFFF, against the archive size, so it reads such fields only in
// archives larger than 4 GiB, where they occur.)
TEST(TorchZipWriterTest, Zip64FieldsAreReadable) {
  const Records records = {{"data/0", bytes_of(50, 11)},
                           {"data/1", bytes_of(5000, 12)},
                           {"data/2", bytes_of(10, 13)},
                           {"data.pkl", bytes_of(300, 14)}};
  const std::string archive = ours(records, /*zip64_limit=*/1000);
  EXPECT_NE(archive, ours(records));

  if (std::system("/usr/bin/python3 -c 'import zipfile' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 is not available; skipping the zipfile check";
  th::testing::TempDir dir;
  const std::string path = dir.file("zip64.zip");
  std::ofstream(path, std::ios::binary) << archive;
  const std::string command =
      "timeout 60 /usr/bin/python3 -c \"import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); "
      "print(z.testzip(), [(i.filename, i.file_size) for i in z.infolist()])\" " +
      path + " 2>&1";
  int status = -1;
  const std::string out = th::testing::run_command(command, status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out,
            "None [('archive/data/0', 50), ('archive/data/1', 5000), ('archive/data/2', 10), "
            "('archive/data.pkl', 300), ('archive/version', 2)]\n");
}

// The restore path's reader of the central directory finds each record's bytes, through ZIP64
// fields as through plain ones.
TEST(TorchZipWriterTest, ZipRecordsFindsEachRecordsBytes) {
  const Records records = {{"data/0", bytes_of(50, 11)},
                           {"data/1", bytes_of(5000, 12)},
                           {"data/2", bytes_of(10, 13)},
                           {"data.pkl", bytes_of(300, 14)}};
  for (uint64_t limit : {th::internal::TorchZipWriter::kZip64Limit, uint64_t{1000}, uint64_t{0}}) {
    const std::string archive = ours(records, limit);
    const auto found = th::internal::zip_records(archive.data(), archive.size());
    ASSERT_EQ(found.size(), records.size() + 1) << limit;  // and the version record
    for (size_t i = 0; i < records.size(); ++i) {
      EXPECT_EQ(found[i].name, "archive/" + records[i].first) << limit;
      EXPECT_EQ(archive.substr(found[i].offset, found[i].size), records[i].second) << limit;
      if (records[i].first.rfind("data/", 0) == 0) {
        EXPECT_EQ(found[i].offset % 64, 0u) << limit;
      }
    }
  }
}

TEST(TorchZipWriterTest, RefusesRecordsAfterFinish) {
  std::string out;
  th::internal::TorchZipWriter w(
      [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); });
  w.finish();
  EXPECT_THROW(w.write_record("data/0", "x", 1), th::InternalError);
  EXPECT_THROW(w.finish(), th::InternalError);
}

}  // namespace torch_zip_writer_test
