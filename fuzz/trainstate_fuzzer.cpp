// The `.trainstate` decoder (decode_checkpoint): the framing header, the pickled payload and its
// fields (optimizer states, RNG state, input positions, provider state).
//
// Input: a mode byte, then bytes. Mode bit 0 set: the bytes are the payload, framed with a valid
// header (bit 1: format version 1 instead of the current one), so that mutations reach the
// unpickling and the field checks; clear: the bytes are the whole sidecar file, for the header's
// own checks. The variables file beside it is a valid empty dict. Any trainhooks error is an
// accepted outcome.
#include <cstddef>
#include <cstdint>
#include <string>

#include "checkpoint/format/trainhooks/sidecar.h"
#include "checkpoint/format/trainhooks/trainhooks_format.h"
#include "fuzz_util.h"
#include "sidecar.h"
#include "trainhooks/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace th = trainhooks;
  static const std::string path = [] {
    auto empty = c10::impl::GenericDict(c10::StringType::get(), c10::TensorType::get());
    const std::vector<char> vars = torch::pickle_save(c10::IValue(empty));
    return th::fuzz::write_scratch("model.ckpt-1", std::string_view(vars.data(), vars.size()));
  }();
  th::fuzz::Cursor in(data, size);
  const uint8_t mode = in.byte();
  const std::string_view rest = in.rest();
  const std::string sidecar =
      (mode & 1)
          ? th::fuzz::frame_sidecar(rest, (mode & 2) ? 1 : th::internal::kCheckpointFormatVersion)
          : std::string(rest);
  th::fuzz::write_scratch("model.ckpt-1.trainstate", sidecar);
  try {
    th::internal::CheckpointContents contents = th::internal::decode_checkpoint(path);
    if (contents.global_step < 0) __builtin_trap();
  } catch (const th::Error&) {
  }
  return 0;
}
