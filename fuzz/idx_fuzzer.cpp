// The IDX reader (idx_source): header, dimensions, gzip members, trailing bytes.
//
// Input: a u16 length, the images file of that length, then the labels file. A leading mode bit
// (the length's top bit) replaces the labels file by a valid one of as many labels as the images
// header announces, so that mutations of the images file get past the count check. A source that
// is built must hand out a batch of its first and last examples.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/idx_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace th = trainhooks;
  th::fuzz::Cursor in(data, size);
  const uint16_t head = in.u16();
  const std::string images(in.take(head & 0x7fff));
  std::string labels(in.rest());
  if ((head & 0x8000) && images.size() >= 8) {
    // An IDX1 header for the images' count and that many zero labels (at most 64 Ki).
    labels.assign("\x00\x00\x08\x01", 4);
    labels.append(images, 4, 4);
    const auto* c = reinterpret_cast<const unsigned char*>(images.data() + 4);
    const uint32_t count = uint32_t{c[0]} << 24 | uint32_t{c[1]} << 16 | uint32_t{c[2]} << 8 | c[3];
    labels.append(count < (1u << 16) ? count : 0, '\0');
  }
  const std::string images_path = th::fuzz::write_scratch("images-idx3-ubyte", images);
  const std::string labels_path = th::fuzz::write_scratch("labels-idx1-ubyte", labels);
  try {
    auto source = th::idx_source(images_path, labels_path);
    const auto n = static_cast<int64_t>(source->size());
    if (n > 0) {
      auto batch = source->get_batch({0, n - 1});
      if (batch.size() != 2 || batch[0].size(0) != 2) __builtin_trap();
    }
  } catch (const th::Error&) {
  }
  return 0;
}
