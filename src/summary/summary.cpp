#include "trainhooks/summary/summary.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "trainhooks/errors.h"

#include "proto/summary.pb.h"
#include "proto/tensor.pb.h"
#include "summary/encoded_value.h"
#include "summary/event_encoding.h"
#include "summary/histogram.h"
#include "summary/png.h"
#include "summary/wire.h"

namespace trainhooks::summary {
namespace {

const char* format_name(DataFormat format) {
  switch (format) {
    case DataFormat::kNCHW:
      return "NCHW";
    case DataFormat::kNHWC:
      return "NHWC";
    case DataFormat::kCHW:
      return "CHW";
    case DataFormat::kHWC:
      return "HWC";
  }
  return "?";
}

std::string shape_string(const at::Tensor& t) {
  return fmt::format("[{}]", fmt::join(t.sizes(), ", "));
}

// The images as a [N, H, W, C] tensor on the CPU.
at::Tensor to_nhwc(const at::Tensor& images, DataFormat format) {
  const bool batched = format == DataFormat::kNCHW || format == DataFormat::kNHWC;
  const int64_t want = batched ? 4 : 3;
  if (images.dim() != want) {
    throw InvalidArgument(fmt::format("add_image: images in {} format need {} dimensions, got {}",
                                      format_name(format), want, shape_string(images)));
  }
  at::Tensor t = images.detach().to(at::kCPU);
  if (!batched) t = t.unsqueeze(0);
  if (format == DataFormat::kNCHW || format == DataFormat::kCHW) t = t.permute({0, 2, 3, 1});
  return t;
}

// Pixels of one [H, W, C] image as bytes; float input is scaled from [0, 1].
std::vector<uint8_t> to_bytes(const at::Tensor& image) {
  const int64_t channels = image.size(2);
  const int64_t pixels = image.size(0) * image.size(1);
  std::vector<uint8_t> out(static_cast<size_t>(pixels * channels));
  if (image.scalar_type() == at::kByte) {
    at::Tensor c = image.contiguous();
    std::copy_n(c.data_ptr<uint8_t>(), out.size(), out.begin());
    return out;
  }
  at::Tensor c = image.to(at::kFloat).contiguous();
  const float* src = c.data_ptr<float>();
  // TF's bad_color: a pixel with a non-finite channel is drawn opaque red.
  static constexpr uint8_t kBadColor[4] = {255, 0, 0, 255};
  for (int64_t p = 0; p < pixels; ++p) {
    const float* in = src + p * channels;
    uint8_t* dst = out.data() + p * channels;
    bool finite = true;
    for (int64_t k = 0; k < channels; ++k) finite = finite && std::isfinite(in[k]);
    for (int64_t k = 0; k < channels; ++k) {
      dst[k] = finite ? static_cast<uint8_t>(std::clamp(in[k], 0.0f, 1.0f) * 255.0f + 0.5f)
                      : kBadColor[k];
    }
  }
  return out;
}

}  // namespace

const char* value_kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kNone:
      return "none";
    case ValueKind::kScalar:
      return "scalar";
    case ValueKind::kHistogram:
      return "histogram";
    case ValueKind::kImage:
      return "image";
    case ValueKind::kAudio:
      return "audio";
    case ValueKind::kText:
      return "text";
    case ValueKind::kTensor:
      return "tensor";
    case ValueKind::kLayout:
      return "layout";
    case ValueKind::kHParams:
      return "hparams";
  }
  return "?";
}

Summary::Summary() = default;
Summary::~Summary() = default;
Summary::Summary(const Summary& other) = default;
Summary& Summary::operator=(const Summary& other) = default;
Summary::Summary(Summary&& other) noexcept = default;
Summary& Summary::operator=(Summary&& other) noexcept = default;

size_t Summary::size() const { return values_.size(); }
void Summary::clear() { values_.clear(); }

std::vector<std::string> Summary::tags() const {
  std::vector<std::string> tags;
  tags.reserve(values_.size());
  for (const EncodedValue& v : values_) tags.push_back(v.tag);
  return tags;
}

Summary& Summary::add_scalar(std::string_view tag, float value) {
  values_.push_back({.tag = std::string(tag), .plugin = Plugin::kScalars, .simple_value = value});
  return *this;
}

Summary& Summary::add_histogram(std::string_view tag, const at::Tensor& values) {
  if (values.is_complex()) {
    throw InvalidArgument(
        fmt::format("add_histogram: '{}' has complex values; a histogram needs real ones", tag));
  }
  at::Tensor flat = values.detach().to(at::kCPU).to(at::kDouble).contiguous().reshape({-1});
  const double* data = flat.data_ptr<double>();
  const size_t count = static_cast<size_t>(flat.numel());
  for (size_t i = 0; i < count; ++i) {
    // TF's HistogramSummary texts.
    if (std::isnan(data[i])) {
      throw InvalidArgument(fmt::format("Nan in summary histogram for: {}", tag));
    }
    if (std::isinf(data[i])) {
      throw InvalidArgument(fmt::format("Infinity in summary histogram for: {}", tag));
    }
  }
  values_.push_back({.tag = std::string(tag),
                     .plugin = Plugin::kHistograms,
                     .body = encode_histogram_field(build_histogram(data, count))});
  return *this;
}

Summary& Summary::add_image(std::string_view tag, const at::Tensor& images,
                            const ImageOptions& options) {
  if (options.max_outputs < 1) {
    throw InvalidArgument(
        fmt::format("Invalid max_outputs: {} (must be at least 1)", options.max_outputs));
  }
  at::Tensor nhwc = to_nhwc(images, options.dataformats);
  const int64_t channels = nhwc.size(3);
  if (channels != 1 && channels != 3 && channels != 4) {
    throw InvalidArgument(
        fmt::format("add_image: '{}' has {} channels; images need 1 (gray), 3 (RGB) or 4 (RGBA), "
                    "shape {} as {}",
                    tag, channels, shape_string(images), format_name(options.dataformats)));
  }
  if (nhwc.size(1) <= 0 || nhwc.size(2) <= 0 || nhwc.size(1) > INT32_MAX ||
      nhwc.size(2) > INT32_MAX) {
    throw InvalidArgument(fmt::format("add_image: '{}' has an empty or oversized image, shape {}",
                                      tag, shape_string(images)));
  }
  if (nhwc.scalar_type() != at::kByte && !nhwc.is_floating_point()) {
    throw InvalidArgument(fmt::format("add_image: '{}' must be uint8 or floating, got {}", tag,
                                      c10::toString(nhwc.scalar_type())));
  }
  const int height = static_cast<int>(nhwc.size(1));
  const int width = static_cast<int>(nhwc.size(2));
  const int64_t n = std::min(options.max_outputs, nhwc.size(0));
  for (int64_t i = 0; i < n; ++i) {
    std::vector<uint8_t> pixels = to_bytes(nhwc[i]);
    proto::Summary::Image image;
    image.set_height(height);
    image.set_width(width);
    image.set_colorspace(static_cast<int32_t>(channels));
    image.set_encoded_image_string(
        encode_png(pixels.data(), height, width, static_cast<int>(channels)));
    EncodedValue value{.plugin = Plugin::kImages};
    // TF 1.x: the tag scheme depends on how many images were asked for, not how many came.
    value.tag =
        options.max_outputs > 1 ? fmt::format("{}/image/{}", tag, i) : fmt::format("{}/image", tag);
    wire::put_bytes_field(value.body, 4, image.SerializeAsString());
    values_.push_back(std::move(value));
  }
  return *this;
}

Summary& Summary::add_text(std::string_view tag, std::string_view text) {
  proto::TensorProto tensor;
  tensor.set_dtype(proto::DT_STRING);
  tensor.mutable_tensor_shape();  // rank 0: present and empty, as TF writes it
  tensor.add_string_val(std::string(text));
  EncodedValue value{.tag = std::string(tag), .plugin = Plugin::kText};
  wire::put_bytes_field(value.body, 8, tensor.SerializeAsString());
  values_.push_back(std::move(value));
  return *this;
}

std::string Summary::serialize() const {
  std::string out;
  for (const EncodedValue& v : values_) {
    wire::put_delimited_header(out, 1, value_size(v, true));
    append_value(out, v, true);
  }
  return out;
}

}  // namespace trainhooks::summary
