#include "checkpoint/format/safetensors/safetensors_file.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;

namespace safetensors_file_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using th::internal::parse_safetensors;
using th::internal::read_safetensors;
using th::internal::safetensors_bytes;
using th::internal::SafetensorsFile;
using th::internal::write_safetensors;
using th::testing::error_message;
using Tensors = std::vector<std::pair<std::string, at::Tensor>>;
using Metadata = std::map<std::string, std::string>;

// A C string literal's bytes, NULs included.
template <size_t N>
std::string lit(const char (&s)[N]) {
  return std::string(s, N - 1);
}

std::string from_bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out += static_cast<char>(b);
  return out;
}

// A file of `json` as its header (unpadded) and `data` after it.
std::string file_of(const std::string& json, const std::string& data = "") {
  std::string out(8, '\0');
  const uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  return out + json + data;
}

SafetensorsFile parse(const std::string& bytes, const std::string& name = "test.safetensors") {
  return parse_safetensors(bytes.data(), bytes.size(), name);
}

std::string raw_bytes(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()),
                     static_cast<size_t>(c.numel()) * c.element_size());
}

std::vector<std::string> names_of(const SafetensorsFile& f) {
  std::vector<std::string> out;
  for (const auto& [name, t] : f.tensors) out.push_back(name);
  return out;
}

void expect_same_tensor(const at::Tensor& actual, const at::Tensor& expected) {
  EXPECT_EQ(actual.scalar_type(), expected.scalar_type());
  EXPECT_EQ(actual.sizes(), expected.sizes());
  EXPECT_TRUE(actual.is_contiguous());
  EXPECT_EQ(raw_bytes(actual), raw_bytes(expected));
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_whole(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

const std::vector<at::ScalarType> kSupported = {at::kBool,   at::kByte,     at::kChar, at::kShort,
                                                at::kHalf,   at::kBFloat16, at::kInt,  at::kFloat,
                                                at::kDouble, at::kLong};

TEST(SafetensorsFileTest, RoundTripsEverySupportedDtype) {
  Tensors tensors;
  for (const at::ScalarType type : kSupported) {
    at::Tensor t = at::arange(-3, 9, at::kLong).reshape({3, 4});
    t = type == at::kBool ? t.remainder(3).eq(0) : t.to(type);
    if (type == at::kByte)
      t = at::arange(250, 262, at::kInt).remainder(256).to(type).reshape({3, 4});
    tensors.emplace_back(std::string("t_") + c10::toString(type), t);
  }
  const SafetensorsFile f = parse(safetensors_bytes(tensors, {}));
  ASSERT_EQ(f.tensors.size(), tensors.size());
  EXPECT_TRUE(f.metadata.empty());
  for (const auto& [name, expected] : tensors) {
    SCOPED_TRACE(name);
    const auto it = std::find_if(f.tensors.begin(), f.tensors.end(),
                                 [&](const auto& entry) { return entry.first == name; });
    ASSERT_NE(it, f.tensors.end());
    expect_same_tensor(it->second, expected);
  }
}

// The reference sorts by its Dtype enum (BOOL U8 I8 I16 F16 BF16 I32 F32 F64 I64 among these)
// descending, then by name: the names below sort the other way round.
TEST(SafetensorsFileTest, OrdersTensorsByTheReferenceDtypeOrderThenName) {
  const Tensors tensors = {
      {"a_bool", at::ones({1}, at::kBool)},  {"b_u8", at::ones({1}, at::kByte)},
      {"c_i8", at::ones({1}, at::kChar)},    {"d_i16", at::ones({1}, at::kShort)},
      {"e_f16", at::ones({1}, at::kHalf)},   {"f_bf16", at::ones({1}, at::kBFloat16)},
      {"g_i32", at::ones({1}, at::kInt)},    {"h_f32", at::ones({1}, at::kFloat)},
      {"i_f64", at::ones({1}, at::kDouble)}, {"j_i64", at::ones({1}, at::kLong)},
      {"k_i64", at::ones({1}, at::kLong)},
  };
  const SafetensorsFile f = parse(safetensors_bytes(tensors, {}));
  EXPECT_THAT(names_of(f), ElementsAre("j_i64", "k_i64", "i_f64", "h_f32", "g_i32", "f_bf16",
                                       "e_f16", "d_i16", "c_i8", "b_u8", "a_bool"));
  // The same bytes whatever order the tensors come in.
  const Tensors reversed(tensors.rbegin(), tensors.rend());
  EXPECT_EQ(safetensors_bytes(reversed, {}), safetensors_bytes(tensors, {}));

  // Names compare byte-wise, as Rust's strings do.
  const Tensors names = {{"z", at::ones({1})},
                         {"\xC3\xA9", at::ones({1})},
                         {"A", at::ones({1})},
                         {"a", at::ones({1})}};
  EXPECT_THAT(names_of(parse(safetensors_bytes(names, {}))),
              ElementsAre("A", "a", "z", "\xC3\xA9"));
}

TEST(SafetensorsFileTest, WritesNonContiguousTensorsContiguously) {
  const at::Tensor base = at::arange(24, at::kFloat).reshape({4, 6});
  const Tensors tensors = {
      {"transposed", base.t()},
      {"strided", base.slice(1, 0, 6, 2)},
      {"expanded", at::arange(3, at::kLong).expand({2, 3})},
      {"offset", base[2]},
  };
  ASSERT_FALSE(tensors[0].second.is_contiguous());
  const SafetensorsFile f = parse(safetensors_bytes(tensors, {}));
  ASSERT_EQ(f.tensors.size(), 4u);
  for (const auto& [name, expected] : tensors) {
    SCOPED_TRACE(name);
    for (const auto& [got_name, got] : f.tensors)
      if (got_name == name) expect_same_tensor(got, expected.contiguous());
  }
}

TEST(SafetensorsFileTest, RoundTripsScalarAndEmptyTensors) {
  const Tensors tensors = {
      {"scalar", at::scalar_tensor(2.5, at::kDouble)},
      {"empty", at::empty({0}, at::kFloat)},
      {"empty_3d", at::empty({2, 0, 3}, at::kInt)},
      {"bool_scalar", at::scalar_tensor(true, at::kBool)},
  };
  const SafetensorsFile f = parse(safetensors_bytes(tensors, {}));
  ASSERT_THAT(names_of(f), ElementsAre("scalar", "empty", "empty_3d", "bool_scalar"));
  for (size_t i = 0; i < tensors.size(); ++i)
    expect_same_tensor(f.tensors[i].second, tensors[i].second);
  EXPECT_EQ(f.tensors[0].second.dim(), 0);
  EXPECT_EQ(f.tensors[3].second.dim(), 0);
}

TEST(SafetensorsFileTest, RoundTripsMetadata) {
  const Metadata metadata = {
      {"format", "pt"},
      {"unicode", "\xC3\xA9t\xC3\xA9 \xE2\x9C\x93"},
      {"escapes", "quote\" backslash\\ slash/ newline\n tab\t control\x01 del\x7F"},
      {"empty", ""},
  };
  const std::string bytes = safetensors_bytes({{"w", at::ones({2})}}, metadata);
  // serde_json's escapes: the short ones, \u00XX in lower case for other control characters,
  // nothing else (not '/', not DEL, not non-ASCII).
  EXPECT_THAT(bytes, HasSubstr(lit("\"escapes\":\"quote\\\" backslash\\\\ slash/ newline\\n tab\\t "
                                   "control\\u0001 del\x7F\"")));
  EXPECT_THAT(bytes, HasSubstr("{\"__metadata__\":{\"empty\":\"\",\"escapes\":"));
  EXPECT_EQ(parse(bytes).metadata, metadata);
}

// ---- Files written by the reference implementation --------------------------------------------
//
// The byte strings below are the literal serializations asserted by the reference's own tests:
//   huggingface/safetensors safetensors/src/tensor.rs (mod tests: test_serialization,
//     test_serialization_forced_alignement, test_empty, test_deserialization,
//     test_empty_shapes_allowed, test_zero_sized_tensor, test_whitespace_padded_header, and the
//     malformed ones further down)
//   huggingface/safetensors bindings/python/tests/test_simple.py (test_serialization,
//     test_serialization_forces_alignment, test_serialization_metadata,
//     test_deserialization_metadata), where save() is the same Rust serializer that
//     safetensors.torch.save_file calls.

struct ReferenceFile {
  const char* test;
  std::string bytes;
  Tensors tensors;
  Metadata metadata;
};

std::vector<ReferenceFile> reference_files() {
  at::Tensor i32 = at::zeros({2, 2}, at::kInt);
  at::Tensor i32_one = i32.clone();
  i32_one[1][1] = 1;
  const std::string zeros16(16, '\0');
  return {
      {"tensor.rs test_serialization",
       from_bytes({64, 0,  0,   0,   0,   0,   0,   0,   123, 34,  97,  116, 116, 110, 46,  48,
                   34, 58, 123, 34,  100, 116, 121, 112, 101, 34,  58,  34,  70,  51,  50,  34,
                   44, 34, 115, 104, 97,  112, 101, 34,  58,  91,  49,  44,  50,  44,  51,  93,
                   44, 34, 100, 97,  116, 97,  95,  111, 102, 102, 115, 101, 116, 115, 34,  58,
                   91, 48, 44,  50,  52,  93,  125, 125, 0,   0,   0,   0,   0,   0,   128, 63,
                   0,  0,  0,   64,  0,   0,   64,  64,  0,   0,   128, 64,  0,   0,   160, 64}),
       {{"attn.0", at::arange(6, at::kFloat).reshape({1, 2, 3})}},
       {}},
      {"tensor.rs test_serialization_forced_alignement",
       from_bytes({72,  0,   0,   0,   0,   0,   0,   0,   123, 34, 97, 116, 116, 110, 48,
                   34,  58,  123, 34,  100, 116, 121, 112, 101, 34, 58, 34,  70,  51,  50,
                   34,  44,  34,  115, 104, 97,  112, 101, 34,  58, 91, 49,  44,  49,  44,
                   50,  44,  51,  93,  44,  34,  100, 97,  116, 97, 95, 111, 102, 102, 115,
                   101, 116, 115, 34,  58,  91,  48,  44,  50,  52, 93, 125, 125, 32,  32,
                   32,  32,  32,  32,  32,  0,   0,   0,   0,   0,  0,  128, 63,  0,   0,
                   0,   64,  0,   0,   64,  64,  0,   0,   128, 64, 0,  0,   160, 64}),
       {{"attn0", at::arange(6, at::kFloat).reshape({1, 1, 2, 3})}},
       {}},
      {"tensor.rs test_empty (no metadata)",
       from_bytes({8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32}),
       {},
       {}},
      {"tensor.rs test_empty (metadata)",
       from_bytes({40,  0,   0,   0,  0,  0,  0,   0,   123, 34,  95,  95,  109, 101, 116, 97,
                   100, 97,  116, 97, 95, 95, 34,  58,  123, 34,  102, 114, 97,  109, 101, 119,
                   111, 114, 107, 34, 58, 34, 112, 116, 34,  125, 125, 32,  32,  32,  32,  32}),
       {},
       {{"framework", "pt"}}},
      {"test_simple.py test_serialization",
       lit("@\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],"
           "\"data_offsets\":[0,16]}}   ") +
           lit(" \x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
       {{"test", i32}},
       {}},
      {"test_simple.py test_serialization (data[1, 1] = 1)",
       lit("@\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],"
           "\"data_offsets\":[0,16]}}   ") +
           lit(" \x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00"),
       {{"test", i32_one}},
       {}},
      {"test_simple.py test_serialization_forces_alignment",
       lit("\x80\x00\x00\x00\x00\x00\x00\x00{\"test1\":{\"dtype\":\"I32\",\"shape\":[2,2],"
           "\"data_offsets\":[0,16]},\"test2\":{\"dtype\":\"F16\",\"shape\":[2,2],"
           "\"data_offsets\":[16,24]}}") +
           lit("      \x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
               "\x00\x00\x00\x00\x00\x00"),
       {{"test1", i32}, {"test2", at::zeros({2, 2}, at::kHalf)}},
       {}},
      {"test_simple.py test_serialization_metadata",
       lit("`\x00\x00\x00\x00\x00\x00\x00{\"__metadata__\":{\"framework\":\"pt\"},\"test1\":{"
           "\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}") +
           " " + zeros16,
       {{"test1", i32}},
       {{"framework", "pt"}}},
  };
}

TEST(SafetensorsFileTest, WritesTheBytesOfTheReferenceWriter) {
  for (const ReferenceFile& ref : reference_files()) {
    SCOPED_TRACE(ref.test);
    EXPECT_EQ(safetensors_bytes(ref.tensors, ref.metadata), ref.bytes);
  }
}

TEST(SafetensorsFileTest, ReadsTheFilesOfTheReferenceWriter) {
  for (const ReferenceFile& ref : reference_files()) {
    SCOPED_TRACE(ref.test);
    const SafetensorsFile f = parse(ref.bytes);
    EXPECT_EQ(f.metadata, ref.metadata);
    ASSERT_EQ(f.tensors.size(), ref.tensors.size());
    for (size_t i = 0; i < ref.tensors.size(); ++i) {
      EXPECT_EQ(f.tensors[i].first, ref.tensors[i].first);
      expect_same_tensor(f.tensors[i].second, ref.tensors[i].second);
    }
  }
}

TEST(SafetensorsFileTest, ReadsWhatOtherWritersProduce) {
  // Unpadded header (tensor.rs test_deserialization, test_simple.py test_deserialization).
  SafetensorsFile f =
      parse(lit("<\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\","
                "\"shape\":[2,2],\"data_offsets\":[0,16]}}\x00\x00\x00\x00\x00"
                "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"));
  ASSERT_THAT(names_of(f), ElementsAre("test"));
  expect_same_tensor(f.tensors[0].second, at::zeros({2, 2}, at::kInt));

  // A rank-0 tensor (tensor.rs test_empty_shapes_allowed).
  f =
      parse(lit("8\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[],"
                "\"data_offsets\":[0,4]}}\x00\x00\x00\x00"));
  ASSERT_THAT(names_of(f), ElementsAre("test"));
  expect_same_tensor(f.tensors[0].second, at::scalar_tensor(0, at::kInt));

  // An empty tensor, spaces inside the JSON, no data at all (tensor.rs test_zero_sized_tensor).
  f =
      parse(lit("<\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,0],"
                "\"data_offsets\":[0, 0]}}"));
  ASSERT_THAT(names_of(f), ElementsAre("test"));
  expect_same_tensor(f.tensors[0].second, at::empty({2, 0}, at::kInt));

  // Any JSON whitespace as padding (tensor.rs test_whitespace_padded_header).
  f = parse(lit("\x06\x00\x00\x00\x00\x00\x00\x00{}\x0D\x20\x09\x0A"));
  EXPECT_TRUE(f.tensors.empty());

  // Metadata, and a header length that is no multiple of 8 (test_simple.py
  // test_deserialization_metadata).
  f = parse(lit("f\x00\x00\x00\x00\x00\x00\x00{\"__metadata__\":{\"framework\":\"pt\"},"
                "\"test1\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}       ") +
            std::string(16, '\0'));
  EXPECT_EQ(f.metadata, (Metadata{{"framework", "pt"}}));
  EXPECT_THAT(names_of(f), ElementsAre("test1"));

  // Tensors listed in another order than their data, as older writers did; null metadata.
  f = parse(file_of(R"({"__metadata__":null,"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},)"
                    R"("b":{"data_offsets":[0,2],"shape":[2],"dtype":"U8","extra":"ignored"}})",
                    lit("\x01\x02\x03\x04")));
  EXPECT_THAT(names_of(f), ElementsAre("b", "a"));
  EXPECT_EQ(raw_bytes(f.tensors[0].second), lit("\x01\x02"));
  EXPECT_EQ(raw_bytes(f.tensors[1].second), lit("\x03\x04"));
  EXPECT_TRUE(f.metadata.empty());
}

TEST(SafetensorsFileTest, BoolBytesOtherThanZeroReadAsTrue) {
  const SafetensorsFile f = parse(
      file_of(R"({"b":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", lit("\x00\x02\xff")));
  EXPECT_EQ(raw_bytes(f.tensors[0].second), lit("\x00\x01\x01"));
}

TEST(SafetensorsFileTest, WritesAFileCrashSafelyAndReadsItBack) {
  th::testing::TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const Tensors tensors = {{"w", at::randn({3, 5})}, {"step", at::scalar_tensor(7, at::kLong)}};
  const Metadata metadata = {{"format", "pt"}};
  write_safetensors(path, tensors, metadata);
  EXPECT_EQ(read_whole(path), safetensors_bytes(tensors, metadata));
  const SafetensorsFile f = read_safetensors(path);
  EXPECT_EQ(f.metadata, metadata);
  ASSERT_THAT(names_of(f), ElementsAre("step", "w"));
  expect_same_tensor(f.tensors[0].second, tensors[1].second);
  expect_same_tensor(f.tensors[1].second, tensors[0].second);
  // Replaced whole.
  write_safetensors(path, {{"x", at::ones({1}, at::kByte)}}, {});
  EXPECT_THAT(names_of(read_safetensors(path)), ElementsAre("x"));
}

TEST(SafetensorsFileTest, MissingFileIsNotFound) {
  th::testing::TempDir dir;
  const std::string path = dir.file("absent.safetensors");
  EXPECT_THAT(error_message<th::NotFoundError>([&] { read_safetensors(path); }),
              HasSubstr("Safetensors file '" + path + "' does not exist"));
  EXPECT_THAT(error_message<th::FileError>([&] { read_safetensors(dir.path()); }),
              HasSubstr("it is a directory"));
}

TEST(SafetensorsFileTest, WriteErrorsAreTheAtomicFileWritersErrors) {
  th::testing::TempDir dir;
  const std::string path = dir.file("missing/model.safetensors");
  EXPECT_THROW(write_safetensors(path, {{"w", at::ones({1})}}, {}), th::NotFoundError);
}

// ---- Malformed files --------------------------------------------------------------------------

struct Malformed {
  const char* what;
  std::string bytes;
  std::string message;
};

std::string tensor_entry(const std::string& name, const std::string& dtype,
                         const std::string& shape, const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

std::vector<Malformed> malformed_files() {
  const std::string eight(8, 'x');
  return {
      // tensor.rs test_header_too_small
      {"empty file", "", "is truncated: 0 bytes, shorter than the 8-byte header length"},
      {"header length only", lit("\x10\x00\x00\x00"), "shorter than the 8-byte header length"},
      // tensor.rs test_invalid_header_length
      {"header beyond the file", lit("<\x00\x00\x00\x00\x00\x00\x00"),
       "is truncated: its header length is 60 bytes, but only 0 bytes follow it"},
      // tensor.rs test_header_too_large
      {"header over the limit",
       lit("<\x00\x00\x00\x00\xff\xff\xff{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],"
           "\"data_offsets\":[0,16]}}\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
           "\x00\x00"),
       "exceeds the format's limit of 100000000 bytes"},
      {"header one byte over the limit", lit("\x01\xe1\xf5\x05\x00\x00\x00\x00{}"),
       "its header length 100000001 exceeds the format's limit of 100000000 bytes"},
      // tensor.rs test_invalid_header_non_utf8
      {"header not UTF-8", lit("\x01\x00\x00\x00\x00\x00\x00\x00\xff"),
       "is corrupt: its header is not valid UTF-8"},
      // tensor.rs test_invalid_header_not_json
      {"header not JSON", lit("\x01\x00\x00\x00\x00\x00\x00\x00{"),
       "is corrupt: its header is not valid JSON ("},
      {"empty header", file_of(""), "its header is not valid JSON ("},
      {"NUL in the header", file_of(lit("{}\x00     ")),
       "its header is not valid JSON: a NUL byte at offset 2"},
      {"byte order mark", file_of("\xEF\xBB\xBF{}"), "starts with a byte order mark"},
      {"header not an object", file_of("[]      "), "its header is not a JSON object"},
      {"entry not an object", file_of(R"({"a":3})"),
       "tensor 'a' has the header entry 3, not an object"},
      {"nested too deep",
       file_of(R"({"a":{"dtype":"U8","shape":[[1]],"data_offsets":[0,1]}})", "x"),
       "its header nests JSON deeper than the format does"},
      {"unknown dtype", file_of("{" + tensor_entry("a", "Q7", "[1]", "[0,1]") + "}", "x"),
       "tensor 'a' has the unknown dtype 'Q7'"},
      {"dtype not a string", file_of(R"({"a":{"dtype":8,"shape":[1],"data_offsets":[0,1]}})", "x"),
       "tensor 'a' has the dtype 8"},
      {"no shape", file_of(R"({"a":{"dtype":"U8","data_offsets":[0,1]}})", "x"),
       "tensor 'a' has no 'shape'"},
      {"no data_offsets", file_of(R"({"a":{"dtype":"U8","shape":[1]}})", "x"),
       "tensor 'a' has no 'data_offsets'"},
      {"negative dimension", file_of("{" + tensor_entry("a", "U8", "[-1]", "[0,1]") + "}", "x"),
       "tensor 'a' has the shape [-1], not a list of non-negative integers"},
      {"fractional dimension", file_of("{" + tensor_entry("a", "U8", "[1.0]", "[0,1]") + "}", "x"),
       "tensor 'a' has the shape [1.0], not a list of non-negative integers"},
      {"shape not a list", file_of("{" + tensor_entry("a", "U8", "1", "[0,1]") + "}", "x"),
       "tensor 'a' has the shape 1, not a list"},
      {"three offsets", file_of("{" + tensor_entry("a", "U8", "[1]", "[0,1,2]") + "}", "x"),
       "tensor 'a' has the data_offsets [0,1,2], not [BEGIN, END]"},
      {"offsets backwards", file_of("{" + tensor_entry("a", "U8", "[0]", "[8,4]") + "}", eight),
       "tensor 'a' has data_offsets [8, 4] that end before they begin"},
      // tensor.rs test_invalid_info
      {"size and offsets disagree",
       lit("<\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],"
           "\"data_offsets\":[0, 4]}}"),
       "tensor 'test' of dtype I32 and shape [2,2] has 16 bytes, but its data_offsets [0, 4] span "
       "4"},
      // tensor.rs test_validation_overflow (both)
      {"shape overflows",
       lit("O\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,"
           "18446744073709551614],\"data_offsets\":[0,16]}}\x00\x00\x00\x00\x00\x00\x00\x00"
           "\x00\x00\x00\x00\x00\x00\x00\x00"),
       "tensor 'test' has the shape [2,18446744073709551614], whose size overflows"},
      {"size overflows",
       lit("N\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,"
           "9223372036854775807],\"data_offsets\":[0,16]}}\x00\x00\x00\x00\x00\x00\x00\x00"
           "\x00\x00\x00\x00\x00\x00\x00\x00"),
       "whose size overflows 64 bits"},
      {"dimension beyond int64",
       file_of("{" + tensor_entry("a", "U8", "[0,9223372036854775808]", "[0,0]") + "}"),
       "tensor 'a' has the dimension 9223372036854775808, beyond LibTorch's sizes"},
      {"overlap",
       file_of("{" + tensor_entry("a", "U8", "[8]", "[0,8]") + "," +
                   tensor_entry("b", "U8", "[8]", "[4,12]") + "}",
               eight + "yyyy"),
       "tensor 'b' (data_offsets [4, 12]) overlaps tensor 'a' (data_offsets [0, 8])"},
      // tensor.rs test_json_attack: every tensor at [0, 16]
      {"all at one offset",
       file_of("{" + tensor_entry("w0", "F32", "[2,2]", "[0,16]") + "," +
                   tensor_entry("w1", "F32", "[2,2]", "[0,16]") + "}",
               std::string(16, '\0')),
       "overlaps tensor 'w0'"},
      {"hole",
       file_of("{" + tensor_entry("a", "U8", "[4]", "[0,4]") + "," +
                   tensor_entry("b", "U8", "[4]", "[8,12]") + "}",
               eight + "yyyy"),
       "bytes [4, 8) of its data buffer belong to no tensor"},
      {"hole at the start", file_of("{" + tensor_entry("a", "U8", "[4]", "[4,8]") + "}", eight),
       "bytes [0, 4) of its data buffer belong to no tensor"},
      // tensor.rs test_metadata_incomplete_buffer (both)
      {"bytes after the last tensor",
       lit("<\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],"
           "\"data_offsets\":[0,16]}}\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
           "\x00\x00") +
           "extra_bogus_data_for_polyglot_file",
       "the last 34 bytes of its data buffer belong to no tensor"},
      {"data cut short",
       lit("<\x00\x00\x00\x00\x00\x00\x00{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],"
           "\"data_offsets\":[0,16]}}\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
       "is truncated: its tensors need 16 bytes of data after the header, the file has 14"},
      {"duplicate name",
       file_of("{" + tensor_entry("a", "U8", "[1]", "[0,1]") + "," +
                   tensor_entry("a", "U8", "[1]", "[1,2]") + "}",
               "xy"),
       "the name 'a' appears twice in its header"},
      {"duplicate key in an entry",
       file_of(R"({"a":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})", "x"),
       "the key 'dtype' appears twice in the header entry 'a'"},
      {"metadata value not a string", file_of(R"({"__metadata__":{"epoch":3}})"),
       "its '__metadata__' value for 'epoch' is not a string but 3"},
      {"metadata not an object", file_of(R"({"__metadata__":["pt"]})"),
       "its '__metadata__' is not an object of strings"},
      {"duplicate metadata key", file_of(R"({"__metadata__":{"k":"a","k":"b"}})"),
       "the key 'k' appears twice in the header entry '__metadata__'"},
      {"sub-byte size", file_of("{" + tensor_entry("a", "F4", "[3]", "[0,1]") + "}", "x"),
       "tensor 'a' of dtype F4 and shape [3] does not fill whole bytes"},
  };
}

TEST(SafetensorsFileTest, MalformedBytesAreDataLossNamingTheFileAndTheProblem) {
  for (const Malformed& m : malformed_files()) {
    SCOPED_TRACE(m.what);
    const std::string message =
        error_message<th::DataLossError>([&] { parse(m.bytes, "bad.safetensors"); });
    EXPECT_THAT(message, HasSubstr("Safetensors file 'bad.safetensors' is "));
    EXPECT_THAT(message, HasSubstr(m.message));
  }
}

TEST(SafetensorsFileTest, MalformedFilesAreDataLossNamingThePath) {
  th::testing::TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  for (const Malformed& m : malformed_files()) {
    SCOPED_TRACE(m.what);
    write_whole(path, m.bytes);
    const std::string message = error_message<th::DataLossError>([&] { read_safetensors(path); });
    EXPECT_THAT(message, HasSubstr("Safetensors file '" + path + "' is "));
    EXPECT_THAT(message, HasSubstr(m.message));
  }
}

TEST(SafetensorsFileTest, DtypesWithoutALibTorchTypeAreUnimplemented) {
  for (const auto& [dtype, shape, size] :
       std::vector<std::tuple<std::string, std::string, int>>{{"U16", "[2]", 4},
                                                              {"U32", "[1]", 4},
                                                              {"U64", "[1]", 8},
                                                              {"C64", "[1]", 8},
                                                              {"F8_E4M3", "[3]", 3},
                                                              {"F8_E5M2", "[1]", 1},
                                                              {"F8_E8M0", "[1]", 1},
                                                              {"F6_E2M3", "[4]", 3},
                                                              {"F4", "[2]", 1}}) {
    SCOPED_TRACE(dtype);
    const std::string bytes =
        file_of("{" + tensor_entry("q", dtype, shape, "[0," + std::to_string(size) + "]") + "}",
                std::string(static_cast<size_t>(size), '\0'));
    EXPECT_THAT(error_message<th::UnimplementedError>([&] { parse(bytes, "q.safetensors"); }),
                HasSubstr("Safetensors file 'q.safetensors': tensor 'q' has dtype " + dtype +
                          ", for which LibTorch 1.13 has no type"));
  }
}

TEST(SafetensorsFileTest, HugeDimensionBesideAZeroOneIsRead) {
  const SafetensorsFile f =
      parse(file_of("{" + tensor_entry("a", "F32", "[0,9223372036854775807]", "[0,0]") + "}"));
  EXPECT_EQ(f.tensors[0].second.sizes(),
            (std::vector<int64_t>{0, std::numeric_limits<int64_t>::max()}));
}

TEST(SafetensorsFileTest, RefusesToWriteWhatTheFormatCannotHold) {
  const auto message = [](const Tensors& tensors, const Metadata& metadata = {}) {
    return error_message<th::InvalidArgument>([&] { safetensors_bytes(tensors, metadata); });
  };
  EXPECT_THAT(message({{"c", at::ones({2}, at::kComplexFloat)}}),
              HasSubstr("Cannot write safetensors: tensor 'c' has dtype ComplexFloat"));
  EXPECT_THAT(message({{"", at::ones({2})}}), HasSubstr("a tensor name is empty"));
  EXPECT_THAT(message({{"w", at::ones({2})}, {"w", at::ones({3})}}),
              HasSubstr("the tensor name 'w' appears twice"));
  EXPECT_THAT(message({{"__metadata__", at::ones({2})}}),
              HasSubstr("the tensor name '__metadata__' is the format's metadata key"));
  EXPECT_THAT(message({{"bad\xff", at::ones({2})}}), HasSubstr("is not valid UTF-8"));
  EXPECT_THAT(message({{"u", at::Tensor()}}), HasSubstr("tensor 'u' is undefined"));
  EXPECT_THAT(message({{"s", at::ones({2, 2}).to_sparse()}}),
              HasSubstr("tensor 's' is not a dense CPU tensor"));
  EXPECT_THAT(message({}, {{"k", "\xc3"}}), HasSubstr("the metadata entry 'k' is not valid UTF-8"));

  th::testing::TempDir dir;
  const std::string path = dir.file("x.safetensors");
  EXPECT_THAT(error_message<th::InvalidArgument>([&] {
                write_safetensors(path, {{"", at::ones({1})}}, {});
              }),
              HasSubstr("Cannot write safetensors file '" + path + "': a tensor name is empty"));
}

}  // namespace safetensors_file_test
