// Checkpoint files malformed in the ways the fuzz targets (fuzz/) found, built here byte for byte
// by the library's own writer: each must be a DataLossError naming the file, never a read out of
// bounds (which `make sanitize` would report).
#include <ATen/ATen.h>
#include <ATen/core/Dict.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "test_util.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;
using ::testing::HasSubstr;

namespace {

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

}  // namespace
