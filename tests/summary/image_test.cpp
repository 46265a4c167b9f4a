#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <png.h>
#include "trainhooks/errors.h"

#include "summary_test_util.h"
#include "trainhooks/summary/event_reader.h"
#include "trainhooks/summary/event_writer.h"

namespace trainhooks::summary {
namespace image_test {

struct Decoded {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;
};

// Decodes with libpng directly, in the PNG's own channel layout.
Decoded decode_png(const std::string& png) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, png.data(), png.size())) {
    ADD_FAILURE() << "not a PNG: " << image.message;
    return {};
  }
  Decoded d;
  d.width = static_cast<int>(image.width);
  d.height = static_cast<int>(image.height);
  d.channels = PNG_IMAGE_SAMPLE_CHANNELS(image.format);
  d.pixels.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, d.pixels.data(), 0, nullptr)) {
    ADD_FAILURE() << "PNG decoding failed: " << image.message;
  }
  return d;
}

// Writes `summary` through an EventWriter and returns the values read back.
std::vector<EventValue> round_trip(const Summary& summary) {
  testing::TempDir dir;
  {
    EventWriter writer(dir.path());
    writer.add_summary(summary, 1);
  }
  auto events = read_events(dir.path());
  EXPECT_EQ(events.size(), 2u);
  return events.empty() ? std::vector<EventValue>{} : events.back().values;
}

TEST(ImageSummaryTest, FloatNchwImageDecodesToTheScaledPixels) {
  // One 2x3 RGB image; channel c of pixel (y, x) is (y * 3 + x + c) / 10.
  at::Tensor img = at::empty({1, 3, 2, 3}, at::kFloat);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 3; ++x) img[0][c][y][x] = (y * 3 + x + c) / 10.0f;
  Summary s;
  s.add_image("rgb", img, {.max_outputs = 1});
  auto values = round_trip(s);
  ASSERT_EQ(values.size(), 1u);
  EXPECT_EQ(values[0].tag, "rgb/image");
  EXPECT_EQ(values[0].kind, ValueKind::kImage);
  EXPECT_EQ(values[0].plugin_name, "images");
  ASSERT_TRUE(values[0].image.has_value());
  EXPECT_EQ(values[0].image->height, 2);
  EXPECT_EQ(values[0].image->width, 3);
  EXPECT_EQ(values[0].image->colorspace, 3);
  Decoded d = decode_png(values[0].image->encoded);
  ASSERT_EQ(d.channels, 3);
  ASSERT_EQ(d.width, 3);
  ASSERT_EQ(d.height, 2);
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x)
      for (int c = 0; c < 3; ++c) {
        const int expected = static_cast<int>((y * 3 + x + c) / 10.0f * 255.0f + 0.5f);
        EXPECT_EQ(d.pixels[(y * 3 + x) * 3 + c], expected) << y << "," << x << "," << c;
      }
}

TEST(ImageSummaryTest, Uint8NhwcPixelsAreWrittenAsTheyAre) {
  at::Tensor img =
      at::arange(0, 2 * 4 * 5 * 4, at::kLong).remainder(256).to(at::kByte).reshape({2, 4, 5, 4});
  Summary s;
  s.add_image("rgba", img, {.dataformats = DataFormat::kNHWC});
  auto values = round_trip(s);
  ASSERT_EQ(values.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(values[i].tag, "rgba/image/" + std::to_string(i));
    EXPECT_EQ(values[i].image->colorspace, 4);
    Decoded d = decode_png(values[i].image->encoded);
    ASSERT_EQ(d.channels, 4);
    at::Tensor expected = img[i].contiguous();
    EXPECT_EQ(d.pixels, std::vector<uint8_t>(expected.data_ptr<uint8_t>(),
                                             expected.data_ptr<uint8_t>() + expected.numel()));
  }
}

TEST(ImageSummaryTest, GrayscaleChwImageHasColorspaceOne) {
  at::Tensor img = at::full({1, 3, 2}, 0.5f);
  Summary s;
  s.add_image("gray", img, {.dataformats = DataFormat::kCHW});
  auto values = round_trip(s);
  ASSERT_EQ(values.size(), 1u);
  EXPECT_EQ(values[0].tag, "gray/image/0");
  EXPECT_EQ(values[0].image->colorspace, 1);
  Decoded d = decode_png(values[0].image->encoded);
  EXPECT_EQ(d.channels, 1);
  EXPECT_EQ(d.pixels, std::vector<uint8_t>(6, 128));
}

TEST(ImageSummaryTest, HwcImageIsOneImage) {
  Summary s;
  s.add_image("hwc", at::zeros({4, 4, 3}, at::kByte), {.dataformats = DataFormat::kHWC});
  EXPECT_EQ(s.tags(), std::vector<std::string>{"hwc/image/0"});
}

TEST(ImageSummaryTest, AtMostMaxOutputsImagesFromTheFrontOfTheBatch) {
  Summary s;
  s.add_image("batch", at::zeros({5, 1, 2, 2}), {.max_outputs = 3});
  EXPECT_EQ(s.tags(),
            (std::vector<std::string>{"batch/image/0", "batch/image/1", "batch/image/2"}));
}

TEST(ImageSummaryTest, FloatPixelsOutsideZeroOneAreClampedAndNonFinitePixelsAreRed) {
  at::Tensor img = at::tensor({-0.5f, 2.0f, 0.0f, NAN, 0.25f, 0.25f}).reshape({1, 2, 1, 3});
  Summary s;
  s.add_image("clip", img, {.dataformats = DataFormat::kNHWC, .max_outputs = 1});
  auto values = round_trip(s);
  Decoded d = decode_png(values.at(0).image->encoded);
  EXPECT_EQ(d.pixels, (std::vector<uint8_t>{0, 255, 0, 255, 0, 0}));
}

TEST(ImageSummaryTest, RejectsTwoChannelsNamingTheTagAndShape) {
  Summary s;
  try {
    s.add_image("bad", at::zeros({1, 2, 4, 4}));
    FAIL() << "expected trainhooks::InvalidArgument";
  } catch (const trainhooks::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'bad' has 2 channels"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[1, 2, 4, 4]"), std::string::npos) << e.what();
  }
}

TEST(ImageSummaryTest, RejectsWrongRankAndZeroMaxOutputs) {
  Summary s;
  EXPECT_THROW(s.add_image("x", at::zeros({3, 4, 4})), trainhooks::InvalidArgument);
  EXPECT_THROW(s.add_image("x", at::zeros({1, 3, 4, 4}), {.max_outputs = 0}),
               trainhooks::InvalidArgument);
  EXPECT_THROW(s.add_image("x", at::zeros({1, 3, 4, 4}, at::kInt)), trainhooks::InvalidArgument);
}

}  // namespace image_test
}  // namespace trainhooks::summary
