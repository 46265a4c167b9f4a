// PNG encoding (libpng) of 8-bit images for image summaries.
#pragma once

#include <cstdint>
#include <string>

namespace trainhooks::summary {

// `pixels` holds height rows of width * channels bytes; channels 1 (gray), 2 (gray + alpha),
// 3 (RGB) or 4 (RGBA). Throws InternalError if libpng fails.
std::string encode_png(const uint8_t* pixels, int height, int width, int channels);

}  // namespace trainhooks::summary
