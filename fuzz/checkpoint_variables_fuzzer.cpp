// The checkpoint variables file reader (decode_checkpoint's second half): a LibTorch pickle of a
// dict name -> tensor.
//
// Input: the variables file. The sidecar beside it is valid and records the input's size and
// CRC32C, so that every input reaches the unpickling and the dict checks. Any trainhooks error is
// an accepted outcome.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "checkpoint/format/trainhooks/sidecar.h"
#include "checkpoint/format/trainhooks/trainhooks_format.h"
#include "fuzz_util.h"
#include "sidecar.h"
#include "trainhooks/errors.h"
#include "util/crc32c.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace th = trainhooks;
  const std::string_view vars(reinterpret_cast<const char*>(data), size);
  const std::string path = th::fuzz::write_scratch("model.ckpt-1", vars);
  th::fuzz::write_scratch(
      "model.ckpt-1.trainstate",
      th::fuzz::frame_sidecar(th::fuzz::minimal_payload(size, th::crc32c::value(vars))));
  try {
    th::internal::CheckpointContents contents = th::internal::decode_checkpoint(path);
    for (const auto& [name, tensor] : contents.variables)
      if (!tensor.defined()) __builtin_trap();
  } catch (const th::Error&) {
  }
  return 0;
}
