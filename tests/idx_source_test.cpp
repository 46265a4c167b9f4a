#include "trainhooks/idx_source.h"

#include <torch/torch.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/session.h"

namespace th = trainhooks;
namespace fs = std::filesystem;
using ::testing::HasSubstr;
using th::testing::error_message;
using th::testing::TempDir;

namespace idx_source_test {

using Bytes = std::vector<uint8_t>;

// An IDX file: magic 0x0000<type><rank>, big-endian dimensions, then `data`.
Bytes idx_file(std::vector<uint32_t> dims, const Bytes& data, uint8_t type = 0x08) {
  Bytes out = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(d >> shift));
  }
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// A gzip member holding `data`. Level 0 stores it: a 10-byte gzip header and a 5-byte block header
// precede the data, so compressed offsets are predictable.
Bytes gzip(const Bytes& data, int level = Z_BEST_COMPRESSION) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, level, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY), Z_OK);
  Bytes out(deflateBound(&z, data.size()));
  z.next_in = const_cast<uint8_t*>(data.data());
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string write(const TempDir& dir, const std::string& name, const Bytes& bytes) {
  std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  return path;
}

// Five 3 x 4 images whose pixels cover 0, 255 and values in between, and their labels.
constexpr uint32_t kCount = 5, kRows = 3, kCols = 4;
Bytes pixels() {
  Bytes p(kCount * kRows * kCols);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(i * 37 % 256);
  p[0] = 0;
  p[1] = 255;
  return p;
}
const Bytes kLabels = {3, 0, 9, 7, 1};
Bytes images_file() { return idx_file({kCount, kRows, kCols}, pixels()); }
Bytes labels_file() { return idx_file({kCount}, kLabels); }

float normalised(uint8_t v, double mean = th::kFashionMnistMean,
                 double stddev = th::kFashionMnistStddev) {
  return static_cast<float>((v / 255.0 - mean) / stddev);
}

std::vector<float> floats(const torch::Tensor& t) {
  auto c = t.contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

std::vector<int64_t> longs(const torch::Tensor& t) {
  auto c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// The expected images of `indices`, flattened, from pixels().
std::vector<float> expected_images(const std::vector<int64_t>& indices, float (*convert)(uint8_t)) {
  Bytes p = pixels();
  std::vector<float> out;
  for (int64_t i : indices) {
    for (uint32_t j = 0; j < kRows * kCols; ++j) out.push_back(convert(p[i * kRows * kCols + j]));
  }
  return out;
}

struct Files {
  TempDir dir;
  std::string images = write(dir, "images", images_file());
  std::string labels = write(dir, "labels", labels_file());
};

std::string load_error(const std::string& images, const std::string& labels) {
  return error_message<th::DataLossError>([&] { th::idx_source(images, labels); });
}

// ---- Reading -----------------------------------------------------------------------------------

TEST(IdxSourceTest, BatchesAreNormalisedFloatImagesWithAChannelAndInt64Labels) {
  Files f;
  auto source = th::idx_source(f.images, f.labels);
  EXPECT_EQ(source->size(), 5u);
  EXPECT_EQ(source->component_names(), (std::vector<std::string>{"data", "target"}));
  auto batch = source->get_batch({0, 1, 2, 3, 4});
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].sizes(), (std::vector<int64_t>{5, 1, 3, 4}));
  EXPECT_EQ(batch[0].scalar_type(), torch::kFloat);
  EXPECT_EQ(batch[1].sizes(), (std::vector<int64_t>{5}));
  EXPECT_EQ(batch[1].scalar_type(), torch::kLong);
  EXPECT_EQ(floats(batch[0]),
            expected_images({0, 1, 2, 3, 4}, [](uint8_t v) { return normalised(v); }));
  EXPECT_EQ(floats(batch[0])[0], normalised(0));
  EXPECT_FLOAT_EQ(floats(batch[0])[0], -0.2860f / 0.3530f);
  EXPECT_FLOAT_EQ(floats(batch[0])[1], (1.0f - 0.2860f) / 0.3530f);
  EXPECT_EQ(longs(batch[1]), (std::vector<int64_t>{3, 0, 9, 7, 1}));
}

TEST(IdxSourceTest, BatchFollowsTheOrderOfTheIndicesWithRepeats) {
  Files f;
  auto batch = th::idx_source(f.images, f.labels)->get_batch({4, 0, 2, 2});
  EXPECT_EQ(floats(batch[0]),
            expected_images({4, 0, 2, 2}, [](uint8_t v) { return normalised(v); }));
  EXPECT_EQ(longs(batch[1]), (std::vector<int64_t>{1, 3, 9, 9}));
  EXPECT_EQ(th::idx_source(f.images, f.labels)->get_batch({})[0].sizes(),
            (std::vector<int64_t>{0, 1, 3, 4}));
}

TEST(IdxSourceTest, OptionsChooseTheNormalisation) {
  Files f;
  auto plain = th::idx_source(f.images, f.labels, {.normalize = false})->get_batch({0, 1, 2});
  EXPECT_EQ(floats(plain[0]),
            expected_images({0, 1, 2}, [](uint8_t v) { return static_cast<float>(v / 255.0); }));
  EXPECT_EQ(floats(plain[0])[1], 1.0f);
  auto mnist =
      th::idx_source(f.images, f.labels, {.mean = 0.1307, .stddev = 0.3081})->get_batch({3});
  EXPECT_EQ(floats(mnist[0]),
            expected_images({3}, [](uint8_t v) { return normalised(v, 0.1307, 0.3081); }));
}

TEST(IdxSourceTest, InvalidOptionsAndIndicesAreInvalidArguments) {
  Files f;
  EXPECT_EQ(error_message<th::InvalidArgument>(
                [&] { th::idx_source(f.images, f.labels, {.stddev = 0}); }),
            "idx_source: stddev must be positive, got 0");
  EXPECT_EQ(error_message<th::InvalidArgument>(
                [&] { th::idx_source(f.images, f.labels, {.mean = std::nan("")}); }),
            "idx_source: mean must be finite, got nan");
  auto source = th::idx_source(f.images, f.labels);
  EXPECT_EQ(error_message<th::InvalidArgument>([&] {
              source->get_batch({0, 5});
            }),
            "idx_source: index 5 out of range [0, 5)");
  EXPECT_EQ(error_message<th::InvalidArgument>([&] { source->get_batch({-1}); }),
            "idx_source: index -1 out of range [0, 5)");
}

TEST(IdxSourceTest, GzipIsDetectedByItsMagicBytesNotTheName) {
  TempDir dir;
  // A gzip file without .gz and a plain file named .gz.
  auto images = write(dir, "images.idx", gzip(images_file()));
  auto labels = write(dir, "labels.gz", labels_file());
  auto batch = th::idx_source(images, labels)->get_batch({1, 3});
  EXPECT_EQ(floats(batch[0]), expected_images({1, 3}, [](uint8_t v) { return normalised(v); }));
  EXPECT_EQ(longs(batch[1]), (std::vector<int64_t>{0, 7}));
}

TEST(IdxSourceTest, ConcatenatedGzipMembersAreOneStream) {
  TempDir dir;
  Bytes whole = images_file();
  Bytes gz = gzip(Bytes(whole.begin(), whole.begin() + 21));
  Bytes rest = gzip(Bytes(whole.begin() + 21, whole.end()), 0);
  gz.insert(gz.end(), rest.begin(), rest.end());
  auto source = th::idx_source(write(dir, "images", gz), write(dir, "labels", gzip(labels_file())));
  EXPECT_EQ(floats(source->get_batch({0, 1, 2, 3, 4})[0]),
            expected_images({0, 1, 2, 3, 4}, [](uint8_t v) { return normalised(v); }));
}

TEST(IdxSourceTest, FeedsAGraphInput) {
  Files f;
  th::Graph g;
  auto batch = g.input("train", th::idx_source(f.images, f.labels), {.batch_size = 2});
  EXPECT_EQ(g.name(batch.data()), "train/data");
  EXPECT_EQ(g.name(batch.target()), "train/target");
  th::Session s(g);
  auto r = s.run({batch.data(), batch.target()});
  EXPECT_EQ(r[batch.data()].sizes(), (std::vector<int64_t>{2, 1, 3, 4}));
  EXPECT_EQ(longs(r[batch.target()]), (std::vector<int64_t>{3, 0}));
}

// ---- Bad input ---------------------------------------------------------------------------------

TEST(IdxSourceTest, MissingFileIsNotFoundNamingThePath) {
  Files f;
  std::string missing = f.dir.file("nope");
  EXPECT_EQ(error_message<th::NotFoundError>([&] { th::idx_source(missing, f.labels); }),
            "Cannot open IDX file '" + missing + "': No such file or directory");
  EXPECT_EQ(error_message<th::NotFoundError>([&] { th::idx_source(f.images, missing); }),
            "Cannot open IDX file '" + missing + "': No such file or directory");
}

TEST(IdxSourceTest, DirectoriesAndDevicesAreRefusedNamingTheKind) {
  Files f;
  EXPECT_EQ(
      error_message<th::FailedPreconditionError>([&] { th::idx_source(f.dir.path(), f.labels); }),
      "Cannot read IDX file '" + f.dir.path() +
          "': it is a directory, not a regular file (plain or gzip)");
  EXPECT_EQ(
      error_message<th::FailedPreconditionError>([&] { th::idx_source(f.images, "/dev/null"); }),
      "Cannot read IDX file '/dev/null': it is a character device, not a regular file "
      "(plain or gzip)");
  // A symlink is followed: to a regular file it reads, to a directory it is refused.
  fs::create_symlink(f.images, f.dir.file("images_link"));
  EXPECT_EQ(th::idx_source(f.dir.file("images_link"), f.labels)->size(), 5u);
  fs::create_directory_symlink(f.dir.path(), f.dir.file("dir_link"));
  EXPECT_EQ(error_message<th::FailedPreconditionError>(
                [&] { th::idx_source(f.images, f.dir.file("dir_link")); }),
            "Cannot read IDX file '" + f.dir.file("dir_link") +
                "': it is a directory, not a regular file (plain or gzip)");
}

// Opening a FIFO for reading waits for a writer: the load must refuse it at once. Should it block,
// a writer that opens and closes the FIFO releases it, so the test ends either way.
TEST(IdxSourceTest, AFifoIsRefusedWithoutBlocking) {
  Files f;
  const std::string fifo = f.dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  for (bool as_images : {true, false}) {
    SCOPED_TRACE(as_images ? "images" : "labels");
    auto load = std::async(std::launch::async, [&] {
      return error_message<th::FailedPreconditionError>(
          [&] { as_images ? th::idx_source(fifo, f.labels) : th::idx_source(f.images, fifo); });
    });
    if (load.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ADD_FAILURE() << "idx_source blocks on the FIFO " << fifo;
      while (load.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready) {
        int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
        if (fd >= 0) ::close(fd);
      }
    }
    EXPECT_EQ(load.get(), "Cannot read IDX file '" + fifo +
                              "': it is a FIFO, not a regular file (plain or gzip)");
  }
}

TEST(IdxSourceTest, WrongMagicDataTypeOrRankIsDataLossAtItsOffset) {
  Files f;
  Bytes bad = images_file();
  bad[0] = 0x12, bad[1] = 0x34, bad[2] = 0x56, bad[3] = 0x78;
  auto p = write(f.dir, "bad_magic", bad);
  EXPECT_EQ(load_error(p, f.labels),
            "IDX file '" + p +
                "': bad magic number 0x12345678 at byte offset 0, expected 0x00000803 (unsigned "
                "bytes, 3 dimensions: images: count, rows, cols)");

  p = write(f.dir, "float_images", idx_file({kCount, kRows, kCols}, pixels(), 0x0D));
  EXPECT_EQ(load_error(p, f.labels),
            "IDX file '" + p +
                "': data type 0x0d (float32) at byte offset 2, expected 0x08 (unsigned byte)");

  // The files swapped: labels (rank 1) where images (rank 3) belong.
  EXPECT_EQ(
      load_error(f.labels, f.images),
      "IDX file '" + f.labels +
          "': number of dimensions 1 at byte offset 3, expected 3 (images: count, rows, cols)");
}

TEST(IdxSourceTest, TruncatedHeaderOrDataIsDataLossAtTheEnd) {
  Files f;
  Bytes whole = images_file();
  auto p = write(f.dir, "short_header", Bytes(whole.begin(), whole.begin() + 10));
  EXPECT_EQ(
      load_error(p, f.labels),
      "IDX file '" + p + "': truncated header: expected 16 bytes, the file ends at byte offset 10");
  p = write(f.dir, "two_bytes", Bytes{0, 0});
  EXPECT_EQ(
      load_error(p, f.labels),
      "IDX file '" + p + "': truncated header: expected 16 bytes, the file ends at byte offset 2");

  p = write(f.dir, "short_data", Bytes(whole.begin(), whole.end() - 10));
  EXPECT_EQ(load_error(p, f.labels),
            "IDX file '" + p +
                "': truncated data: dimensions 5 x 3 x 4 (images: count, rows, cols) need 60 bytes "
                "after the 16-byte header, the file ends at byte offset 66");
  // Complete gzip streams of incomplete files: the same texts.
  p = write(f.dir, "short_data.gz", gzip(Bytes(whole.begin(), whole.end() - 10)));
  EXPECT_EQ(load_error(p, f.labels),
            "IDX file '" + p +
                "': truncated data: dimensions 5 x 3 x 4 (images: count, rows, cols) need 60 bytes "
                "after the 16-byte header, the file ends at byte offset 66");
  p = write(f.dir, "short_header.gz", gzip(Bytes(whole.begin(), whole.begin() + 3)));
  EXPECT_EQ(
      load_error(p, f.labels),
      "IDX file '" + p + "': truncated header: expected 16 bytes, the file ends at byte offset 3");
}

TEST(IdxSourceTest, TruncatedGzipStreamIsDataLossAtTheLastByteItHolds) {
  Files f;
  // Stored (level 0): a 10-byte gzip header and a 5-byte block header precede the data.
  Bytes gz = gzip(images_file(), 0);
  auto p = write(f.dir, "cut.gz", Bytes(gz.begin(), gz.begin() + 15 + 40));
  EXPECT_EQ(load_error(p, f.labels),
            "IDX file '" + p +
                "': truncated data: dimensions 5 x 3 x 4 (images: count, rows, cols) need 60 bytes "
                "after the 16-byte header, the file ends at byte offset 40 (the gzip stream is "
                "truncated)");
  p = write(f.dir, "cut_header.gz", Bytes(gz.begin(), gz.begin() + 15 + 7));
  EXPECT_EQ(load_error(p, f.labels),
            "IDX file '" + p +
                "': truncated header: expected 16 bytes, the file ends at byte offset 7 (the gzip "
                "stream is truncated)");
  // All the data but not the CRC-32 and length that end the stream.
  p = write(f.dir, "no_trailer.gz", Bytes(gz.begin(), gz.end() - 8));
  EXPECT_EQ(load_error(p, f.labels),
            "IDX file '" + p +
                "': truncated gzip stream: it ends after the data at byte offset 76 without its "
                "trailer");
}

TEST(IdxSourceTest, CorruptGzipStreamIsDataLossAtItsUncompressedOffset) {
  Files f;
  Bytes gz = gzip(images_file());
  Bytes bad_crc = gz;
  bad_crc[bad_crc.size() - 8] ^= 0xFF;
  auto p = write(f.dir, "bad_crc.gz", bad_crc);
  EXPECT_EQ(load_error(p, f.labels),
            "IDX file '" + p +
                "': corrupt gzip stream at byte offset 76 of the uncompressed data: incorrect data "
                "check");
  Bytes bad_method = gz;
  bad_method[2] = 7;
  p = write(f.dir, "bad_method.gz", bad_method);
  EXPECT_EQ(load_error(p, f.labels),
            "IDX file '" + p +
                "': corrupt gzip stream at byte offset 0 of the uncompressed data: unknown "
                "compression method");
  // A stored block whose length check fails, after 20 bytes of a first member.
  Bytes whole = images_file();
  Bytes two = gzip(Bytes(whole.begin(), whole.begin() + 20));
  Bytes second = gzip(Bytes(whole.begin() + 20, whole.end()), 0);
  second[13] ^= 0xFF;  // NLEN
  two.insert(two.end(), second.begin(), second.end());
  p = write(f.dir, "bad_block.gz", two);
  EXPECT_EQ(load_error(p, f.labels),
            "IDX file '" + p +
                "': corrupt gzip stream at byte offset 20 of the uncompressed data: invalid stored "
                "block lengths");
}

// What zlib makes of a whole gzip stream: the bytes it inflates before it stops, and its message
// when it stops on corrupt data ("" otherwise).
struct Inflated {
  size_t bytes = 0;
  std::string error;
};
Inflated inflate_all(const Bytes& gz) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 16 + 15), Z_OK);
  Bytes out(1 << 16);
  z.next_in = const_cast<uint8_t*>(gz.data());
  z.avail_in = static_cast<uInt>(gz.size());
  Inflated result;
  for (;;) {
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    int rc = inflate(&z, Z_NO_FLUSH);
    if (rc == Z_OK) continue;
    if (rc == Z_DATA_ERROR) result.error = z.msg;
    break;
  }
  result.bytes = z.total_out;
  inflateEnd(&z);
  return result;
}

// Damage inside the compressed data may make the stream inflate to more than the header
// describes before zlib's CRC-32 or distance check fails: it is a corrupt gzip stream, not bytes
// after the data. (With a single byte more, zlib fails the check in the call that returns it.)
TEST(IdxSourceTest, DamageThatLengthensAGzipStreamIsACorruptGzipStream) {
  Files f;
  // The stream of a file 10 bytes longer, with the checksum of the file itself: it decodes the
  // extra bytes, then fails the check.
  Bytes longer = images_file();
  longer.resize(longer.size() + 10);
  Bytes gz = gzip(longer);
  Bytes crc = gzip(images_file());
  std::copy(crc.end() - 8, crc.end() - 4, gz.end() - 8);
  auto p = write(f.dir, "longer_bad_crc.gz", gz);
  EXPECT_EQ(load_error(p, f.labels),
            "IDX file '" + p +
                "': corrupt gzip stream at byte offset 86 of the uncompressed data: incorrect data "
                "check");

  // Labels of 2000 images, one bit flipped in the middle of the compressed data: the first flip
  // that makes zlib inflate 2 bytes or more past the data before it reports the damage.
  constexpr uint32_t kMany = 2000;
  Bytes labels(kMany);
  uint32_t state = 1;
  for (auto& l : labels)
    l = static_cast<uint8_t>((state = state * 1103515245u + 12345u) >> 16) % 10;
  Bytes whole = idx_file({kMany}, labels);
  Bytes clean = gzip(whole);
  Bytes damaged;
  Inflated inflated;
  for (size_t at = clean.size() / 3; at < clean.size() * 2 / 3 && damaged.empty(); ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      Bytes d = clean;
      d[at] ^= static_cast<uint8_t>(1 << bit);
      inflated = inflate_all(d);
      if (!inflated.error.empty() && inflated.bytes > whole.size() + 1) {
        damaged = d;
        break;
      }
    }
  }
  ASSERT_FALSE(damaged.empty()) << "no bit flip lengthens the stream";
  auto images = write(f.dir, "many_images", idx_file({kMany, 1, 1}, Bytes(kMany, 0)));
  p = write(f.dir, "damaged_labels.gz", damaged);
  EXPECT_EQ(load_error(images, p), "IDX file '" + p + "': corrupt gzip stream at byte offset " +
                                       std::to_string(inflated.bytes) +
                                       " of the uncompressed data: " + inflated.error);
}

TEST(IdxSourceTest, BytesAfterTheDataAreDataLoss) {
  Files f;
  Bytes longer = images_file();
  longer.push_back(0);
  auto p = write(f.dir, "longer", longer);
  EXPECT_EQ(load_error(p, f.labels),
            "IDX file '" + p +
                "': unexpected bytes after the data at byte offset 76, where dimensions 5 x 3 x 4 "
                "(images: count, rows, cols) end");
  p = write(f.dir, "longer.gz", gzip(longer));
  EXPECT_EQ(load_error(p, f.labels),
            "IDX file '" + p +
                "': unexpected bytes after the data at byte offset 76, where dimensions 5 x 3 x 4 "
                "(images: count, rows, cols) end");
  // Garbage after a complete gzip stream (not another member).
  Bytes gz = gzip(images_file());
  size_t end = gz.size();
  gz.insert(gz.end(), {'x', 'y', 'z'});
  p = write(f.dir, "garbage.gz", gz);
  EXPECT_EQ(load_error(p, f.labels),
            "IDX file '" + p +
                "': unexpected bytes after the end of the gzip stream (at byte offset 76 of the "
                "uncompressed data, byte offset " +
                std::to_string(end) + " of the file)");
}

TEST(IdxSourceTest, AbsurdDimensionsFailBeforeAllocating) {
  Files f;
  // 10^12 bytes claimed; a plain file must hold them, a gzip file can hold 1032 times its size.
  auto p = write(f.dir, "huge", idx_file({1000000, 1000, 1000}, pixels()));
  EXPECT_EQ(load_error(p, f.labels),
            "IDX file '" + p +
                "': truncated data: dimensions 1000000 x 1000 x 1000 (images: count, rows, cols) "
                "need 1000000000000 bytes after the 16-byte header, the file ends at byte offset "
                "76");
  Bytes gz = gzip(idx_file({1000000, 1000, 1000}, pixels()));
  p = write(f.dir, "huge.gz", gz);
  EXPECT_EQ(load_error(p, f.labels),
            "IDX file '" + p +
                "': dimensions 1000000 x 1000 x 1000 at byte offset 4 (images: count, rows, "
                "cols) claim 1000000000000 bytes of data, more than a gzip file of " +
                std::to_string(gz.size()) + " bytes can hold");
  p = write(f.dir, "max.gz", gzip(idx_file({0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, {})));
  EXPECT_THAT(load_error(p, f.labels),
              HasSubstr("claim 79228162458924105385300197375 bytes of data, more than a gzip"));
  p = write(f.dir, "huge_labels", idx_file({0xFFFFFFFF}, kLabels));
  EXPECT_THAT(load_error(f.images, p), HasSubstr("need 4294967295 bytes after the 8-byte header"));

  p = write(f.dir, "zero_rows", idx_file({5, 0, 4}, {}));
  EXPECT_EQ(
      load_error(p, f.labels),
      "IDX file '" + p +
          "': dimensions 5 x 0 x 4 at byte offset 4 (images: count, rows, cols): a size is 0");
}

TEST(IdxSourceTest, ImageAndLabelCountsMustMatch) {
  Files f;
  auto p = write(f.dir, "four_labels", idx_file({4}, {1, 2, 3, 4}));
  EXPECT_EQ(load_error(f.images, p), "idx_source: the images file '" + f.images +
                                         "' holds 5 images but the labels file '" + p +
                                         "' holds 4 labels");
}

TEST(IdxSourceTest, LabelsBeyondTheClassesFailAtLoadNamingTheFirst) {
  Files f;
  Bytes labels = kLabels;
  labels[3] = 200;
  labels[4] = 10;
  auto p = write(f.dir, "labels200", idx_file({kCount}, labels));
  EXPECT_EQ(load_error(f.images, p),
            "IDX file '" + p +
                "': label 200 at index 3 (byte offset 11) is out of range: with 10 classes "
                "(IdxOptions::num_classes) labels are 0 to 9");
  // Checked after inflating, in gzip files too.
  auto gz = write(f.dir, "labels200.gz", gzip(idx_file({kCount}, labels)));
  EXPECT_EQ(load_error(f.images, gz),
            "IDX file '" + gz +
                "': label 200 at index 3 (byte offset 11) is out of range: with 10 classes "
                "(IdxOptions::num_classes) labels are 0 to 9");
  // num_classes moves the bound; 256 accepts every byte.
  EXPECT_EQ(error_message<th::DataLossError>(
                [&] { th::idx_source(f.images, f.labels, {.num_classes = 4}); }),
            "IDX file '" + f.labels +
                "': label 9 at index 2 (byte offset 10) is out of range: with 4 classes "
                "(IdxOptions::num_classes) labels are 0 to 3");
  EXPECT_EQ(th::idx_source(f.images, f.labels, {.num_classes = 10})->size(), 5u);
  auto all = th::idx_source(f.images, p, {.num_classes = 256})->get_batch({0, 1, 2, 3, 4});
  EXPECT_EQ(longs(all[1]), (std::vector<int64_t>{3, 0, 9, 200, 10}));
  for (int bad : {0, -1, 257}) {
    EXPECT_EQ(error_message<th::InvalidArgument>(
                  [&] { th::idx_source(f.images, f.labels, {.num_classes = bad}); }),
              "idx_source: num_classes must be between 1 and 256 (labels are bytes), got " +
                  std::to_string(bad));
  }
}

// ---- Fashion-MNIST -----------------------------------------------------------------------------

TEST(FashionMnistSourceTest, MissingDirectoryOrFileNamesTheDebianPackage) {
  TempDir dir;
  std::string missing = dir.file("nope");
  EXPECT_EQ(error_message<th::NotFoundError>(
                [&] { th::fashion_mnist_source(missing, th::FashionMnistSplit::kTrain); }),
            "fashion_mnist_source: directory '" + missing +
                "' does not exist; install the Debian package dataset-fashion-mnist (it puts the "
                "files into /usr/share/datasets/fashion-mnist)");
  write(dir, "t10k-images-idx3-ubyte.gz", gzip(images_file()));
  EXPECT_EQ(error_message<th::NotFoundError>(
                [&] { th::fashion_mnist_source(dir.path(), th::FashionMnistSplit::kTest); }),
            "fashion_mnist_source: no Fashion-MNIST labels in '" + dir.path() +
                "': neither t10k-labels-idx1-ubyte nor t10k-labels-idx1-ubyte.gz exists; install "
                "the Debian package dataset-fashion-mnist (it puts the files into "
                "/usr/share/datasets/fashion-mnist)");
  EXPECT_THAT(error_message<th::NotFoundError>(
                  [&] { th::fashion_mnist_source(dir.path(), th::FashionMnistSplit::kTrain); }),
              HasSubstr("no Fashion-MNIST images in '" + dir.path() +
                        "': neither train-images-idx3-ubyte nor train-images-idx3-ubyte.gz"));
}

TEST(FashionMnistSourceTest, ReadsTheSplitPreferringThePlainFile) {
  TempDir dir;
  write(dir, "train-images-idx3-ubyte.gz", gzip(images_file()));
  write(dir, "train-labels-idx1-ubyte.gz", gzip(labels_file()));
  write(dir, "t10k-images-idx3-ubyte.gz", gzip(idx_file({1, 1, 1}, {255})));
  write(dir, "t10k-labels-idx1-ubyte.gz", gzip(idx_file({1}, {7})));
  auto train = th::fashion_mnist_source(dir.path(), th::FashionMnistSplit::kTrain);
  EXPECT_EQ(train->size(), 5u);
  EXPECT_EQ(longs(train->get_batch({0, 3})[1]), (std::vector<int64_t>{3, 7}));
  auto test =
      th::fashion_mnist_source(dir.path(), th::FashionMnistSplit::kTest, {.normalize = false});
  EXPECT_EQ(floats(test->get_batch({0})[0]), std::vector<float>{1.0f});
  // With both present the plain file is read (here, a different one).
  write(dir, "t10k-labels-idx1-ubyte", idx_file({1}, {4}));
  test = th::fashion_mnist_source(dir.path(), th::FashionMnistSplit::kTest);
  EXPECT_EQ(longs(test->get_batch({0})[1]), std::vector<int64_t>{4});
}

// The files of Debian's dataset-fashion-mnist (scripts/install-deps.sh installs it).
TEST(FashionMnistSourceTest, ReadsTheDebianFiles) {
  ASSERT_TRUE(std::filesystem::is_directory(th::kFashionMnistDefaultDir))
      << "install the Debian package dataset-fashion-mnist";
  struct Split {
    th::FashionMnistSplit split;
    size_t size;
    int64_t per_class;
    int64_t first_label;
    int64_t first_pixel_sum;
  };
  for (auto s : {Split{th::FashionMnistSplit::kTrain, 60000, 6000, 9, 76247},
                 Split{th::FashionMnistSplit::kTest, 10000, 1000, 9, 33456}}) {
    auto source =
        th::fashion_mnist_source(th::kFashionMnistDefaultDir, s.split, {.normalize = false});
    ASSERT_EQ(source->size(), s.size);
    std::vector<int64_t> all(s.size);
    for (size_t i = 0; i < s.size; ++i) all[i] = static_cast<int64_t>(i);
    auto batch = source->get_batch(all);
    EXPECT_EQ(batch[0].sizes(), (std::vector<int64_t>{static_cast<int64_t>(s.size), 1, 28, 28}));
    EXPECT_EQ(batch[1][0].item<int64_t>(), s.first_label);
    EXPECT_EQ(torch::round(batch[0][0].sum() * 255).item<float>(), s.first_pixel_sum);
    EXPECT_EQ(longs(torch::bincount(batch[1])), std::vector<int64_t>(10, s.per_class));
    if (s.split == th::FashionMnistSplit::kTrain) {
      // The defaults normalise with the training set's own statistics.
      EXPECT_NEAR(batch[0].mean().item<double>(), th::kFashionMnistMean, 1e-4);
      EXPECT_NEAR(batch[0].std().item<double>(), th::kFashionMnistStddev, 1e-3);
    }
  }
}

}  // namespace idx_source_test
