// Checkpoint files malformed in the ways the fuzz targets (fuzz/) found, built here byte for byte
// by the library's own writer: each must be a DataLossError naming the file, never a read out of
// bounds (which `make sanitize` would report).
#include <ATen/core/Dict.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "checkpoint/format/trainhooks/pickle_stream.h"
#include "checkpoint/format/trainhooks/torch_zip_reader.h"
#include "checkpoint/format/trainhooks/trainhooks_format.h"
#include "test_util.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;
using ::testing::HasSubstr;

namespace malformed_checkpoint_test {

// A tensor that claims more elements than its storage holds. A pickle records the sizes and the
// storage apart, and LibTorch's unpickler does not check one against the other: this is what a
// corrupted file with valid checksums (fuzz/trainstate_fuzzer's first finding) unpickles to.
at::Tensor overlong(at::ScalarType dtype, int64_t elements, size_t storage_bytes) {
  at::Tensor t = at::zeros({elements}, dtype);
  t.storage().set_nbytes(storage_bytes);
  return t;
}

th::internal::CheckpointContents contents(const std::string& path) {
  th::internal::CheckpointContents c;
  c.path = path;
  c.variables = {{"w", at::ones({2, 3})}};
  c.global_step = 3;
  return c;
}

TEST(MalformedCheckpointTest, ATrainStateTensorReachingPastItsStorageIsDataLoss) {
  th::testing::TempDir dir;
  auto c = contents(dir.file("model.ckpt-3"));
  c.cpu_rng = overlong(at::kByte, 21, 16);
  th::internal::write_checkpoint_files(c);
  const std::string message = th::testing::error_message<th::DataLossError>(
      [&] { th::internal::decode_checkpoint(dir.file("model.ckpt-3")); });
  EXPECT_EQ(message, "Checkpoint file '" + dir.file("model.ckpt-3.trainstate") +
                         "' is corrupt: a tensor of shape [21] reaches past its storage of 16 "
                         "bytes");
}

TEST(MalformedCheckpointTest, AVariableReachingPastItsStorageIsDataLoss) {
  th::testing::TempDir dir;
  auto c = contents(dir.file("model.ckpt-3"));
  c.variables = {{"w", overlong(at::kFloat, 6, 20)}};  // 24 bytes of floats over 20
  th::internal::write_checkpoint_files(c);
  const std::string message = th::testing::error_message<th::DataLossError>(
      [&] { th::internal::decode_checkpoint(dir.file("model.ckpt-3")); });
  EXPECT_THAT(message, HasSubstr("Checkpoint file '" + dir.file("model.ckpt-3") +
                                 "' is corrupt: a tensor of shape [6] reaches past its storage "
                                 "of 20 bytes"));
}

// fuzz/trainstate_fuzzer's and checkpoint_variables_fuzzer's second finding: a string whose
// stated length is 1.8 GB in a pickle of a few hundred bytes. LibTorch's unpickler would allocate
// and zero that much before finding the bytes missing; unpickle() refuses it first.
TEST(MalformedCheckpointTest, APickleLengthBeyondItsBytesIsRefusedBeforeAllocating) {
  c10::Dict<std::string, at::Tensor> dict;
  dict.insert("weights", at::ones({2}));
  std::vector<char> bytes = th::internal::pickle_bytes(c10::IValue(dict));
  ASSERT_TRUE(th::internal::unpickle(bytes.data(), bytes.size()).isGenericDict());

  // BINUNICODE (X), a 4-byte little-endian length, the key.
  const std::string key("X\x07\x00\x00\x00weights", 12);
  auto at = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  ASSERT_NE(at, bytes.end());
  at[4] = 0x70;  // 0x70000007 bytes
  const std::string message = th::testing::error_message<th::DataLossError>(
      [&] { th::internal::unpickle(bytes.data(), bytes.size()); });
  EXPECT_THAT(message, HasSubstr("states 1879048199 bytes"));
  EXPECT_THAT(message, ::testing::MatchesRegex("the opcode at byte [0-9]+ states 1879048199 "
                                               "bytes, [0-9]+ remain"));
}

// fuzz/trainstate_fuzzer's third finding: a memo index of billions, to which LibTorch's
// unpickler grows its memo table. An index beyond the pickle's length is refused.
TEST(MalformedCheckpointTest, AMemoIndexBeyondThePickleIsRefused) {
  c10::Dict<std::string, at::Tensor> dict;
  dict.insert("weights", at::ones({2}));
  std::vector<char> bytes = th::internal::pickle_bytes(c10::IValue(dict));
  // The key, then BINPUT (q) and its one-byte memo index.
  const std::string key("X\x07\x00\x00\x00weights", 12);
  auto at = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  ASSERT_NE(at, bytes.end());
  ASSERT_EQ(at[12], 'q');
  at[13] = static_cast<char>(0xff);
  const std::string message = th::testing::error_message<th::DataLossError>(
      [&] { th::internal::unpickle(bytes.data(), bytes.size()); });
  EXPECT_THAT(message, ::testing::MatchesRegex(
                           "the memo index 255 at byte [0-9]+ exceeds the pickle's [0-9]+ bytes"));
}

TEST(MalformedCheckpointTest, EmptyAndExactTensorsAreAccepted) {
  th::testing::TempDir dir;
  auto c = contents(dir.file("model.ckpt-3"));
  c.variables = {{"w", at::ones({2, 3})},
                 {"empty", at::zeros({0, 4})},
                 {"view", at::arange(12, at::kFloat).slice(0, 4, 10)}};
  c.cpu_rng = at::arange(16, at::kByte);
  th::internal::write_checkpoint_files(c);
  const auto decoded = th::internal::decode_checkpoint(dir.file("model.ckpt-3"));
  ASSERT_EQ(decoded.variables.size(), 3u);
  EXPECT_TRUE(decoded.variables[2].second.equal(at::arange(4, 10, at::kFloat)));
  EXPECT_EQ(decoded.cpu_rng->size(0), 16);
}

// The pickle of {"weights": ones(2), "bias": arange(3.)}, and where in it the zip entries of the
// record "data/0" start: its local header and its central directory entry.
struct Archive {
  std::vector<char> bytes = th::internal::pickle_bytes([] {
    c10::Dict<std::string, at::Tensor> dict;
    dict.insert("weights", at::ones({2}));
    dict.insert("bias", at::arange(3, at::kFloat));
    return c10::IValue(dict);
  }());
  size_t entry(const std::string& signature) const {
    const std::string name = signature + "archive/data/0";
    for (size_t i = 0; i + name.size() <= bytes.size(); ++i) {
      const size_t name_at = signature[2] == 1 ? i + 46 : i + 30;  // central or local
      if (std::memcmp(&bytes[i], signature.data(), 4) == 0 && name_at + 14 <= bytes.size() &&
          std::memcmp(&bytes[name_at], "archive/data/0", 14) == 0)
        return i;
    }
    ADD_FAILURE() << "no entry " << signature;
    return 0;
  }
  size_t local() const { return entry(std::string("PK\x03\x04", 4)); }
  size_t central() const { return entry(std::string("PK\x01\x02", 4)); }
};

// The zip's own fields, read by unpickle() to find the records in the file's bytes: a record that
// is not stored as it is, or whose bytes lie past the archive, is refused, never read.
TEST(MalformedCheckpointTest, ACompressedRecordIsRefused) {
  Archive a;
  ASSERT_TRUE(th::internal::unpickle(a.bytes.data(), a.bytes.size()).isGenericDict());
  a.bytes[a.central() + 10] = 8;  // method: deflate
  EXPECT_EQ(th::testing::error_message<th::DataLossError>(
                [&] { th::internal::unpickle(a.bytes.data(), a.bytes.size()); }),
            "the record 'archive/data/0' is compressed");
}

TEST(MalformedCheckpointTest, ARecordPastTheArchiveIsRefused) {
  Archive a;
  const size_t local = a.local();
  a.bytes[local + 28] = a.bytes[local + 29] = static_cast<char>(0xff);  // extra field length
  EXPECT_EQ(th::testing::error_message<th::DataLossError>(
                [&] { th::internal::unpickle(a.bytes.data(), a.bytes.size()); }),
            "the zip archive reaches past its bytes");
}

// LibTorch would look a storage that the archive lacks up by name, case-insensitively, and give
// it the size that the pickle states; unpickle() refuses it.
TEST(MalformedCheckpointTest, AStorageThatTheArchiveLacksIsRefused) {
  Archive a;
  for (size_t at : {a.local() + 30, a.central() + 46}) a.bytes[at + 13] = '7';  // data/0 -> data/7
  EXPECT_EQ(th::testing::error_message<th::DataLossError>(
                [&] { th::internal::unpickle(a.bytes.data(), a.bytes.size()); }),
            "the pickle names the storage '0', which the archive lacks");
}

// Records are where the file has them: in the file's bytes when aligned for any dtype, else
// copied to memory that is.
TEST(MalformedCheckpointTest, RecordsPointIntoTheBytesWhenAlignedElseAreCopiedAligned) {
  Archive a;
  for (size_t shift : {0, 1, 4}) {
    auto file = th::internal::FileBytes::allocate(a.bytes.size() + shift);
    std::memcpy(file->data() + shift, a.bytes.data(), a.bytes.size());
    const auto dict = th::internal::unpickle(file, shift, a.bytes.size()).toGenericDict();
    const at::Tensor bias = dict.at("bias").toTensor();
    EXPECT_TRUE(bias.equal(at::arange(3, at::kFloat))) << shift;
    EXPECT_TRUE(dict.at("weights").toTensor().equal(at::ones({2}))) << shift;
    const auto* p = static_cast<const char*>(bias.data_ptr());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << shift;
    const bool inside = p >= file->data() && p < file->data() + file->size();
    EXPECT_EQ(inside, shift == 0) << shift;
  }
}

}  // namespace malformed_checkpoint_test
