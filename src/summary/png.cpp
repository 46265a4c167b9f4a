#include "summary/png.h"

#include <png.h>

#include <stdexcept>
#include <string>

#include "trainhooks/errors.h"

namespace trainhooks::summary {

std::string encode_png(const uint8_t* pixels, int height, int width, int channels) {
  static constexpr png_uint_32 kFormats[] = {PNG_FORMAT_GRAY, PNG_FORMAT_GA, PNG_FORMAT_RGB,
                                             PNG_FORMAT_RGBA};
  if (channels < 1 || channels > 4 || height <= 0 || width <= 0) {
    throw InvalidArgument("encode_png: bad image geometry");
  }
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = kFormats[channels - 1];

  // The simplified API reports the size first, then writes into a buffer of that size.
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&image, nullptr, &size, 0, pixels, 0, nullptr)) {
    throw InternalError(std::string("PNG encoding failed: ") + image.message);
  }
  std::string out(size, '\0');
  if (!png_image_write_to_memory(&image, out.data(), &size, 0, pixels, 0, nullptr)) {
    throw InternalError(std::string("PNG encoding failed: ") + image.message);
  }
  out.resize(size);
  png_image_free(&image);
  return out;
}

}  // namespace trainhooks::summary
