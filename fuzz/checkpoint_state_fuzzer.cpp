// The `checkpoint` state-file parser (protobuf text format of TensorFlow's CheckpointState).
//
// Input: the file's text. A parsed state must print back (checkpoint_state_to_text) to text that
// parses to the same state; any trainhooks error is an accepted outcome for the input itself.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "trainhooks/checkpoint/checkpoint_state.h"
#include "trainhooks/errors.h"

namespace {

bool same_state(const trainhooks::CheckpointState& a, const trainhooks::CheckpointState& b) {
  // NaN timestamps survive the round trip as NaN, which == does not see as equal.
  auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  if (a.model_checkpoint_path != b.model_checkpoint_path ||
      a.all_model_checkpoint_paths != b.all_model_checkpoint_paths ||
      a.all_model_checkpoint_timestamps.size() != b.all_model_checkpoint_timestamps.size() ||
      !same(a.last_preserved_timestamp, b.last_preserved_timestamp))
    return false;
  for (size_t i = 0; i < a.all_model_checkpoint_timestamps.size(); ++i)
    if (!same(a.all_model_checkpoint_timestamps[i], b.all_model_checkpoint_timestamps[i]))
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace th = trainhooks;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  th::CheckpointState state;
  try {
    state = th::parse_checkpoint_state(text, "fuzz/checkpoint");
  } catch (const th::Error&) {
    return 0;
  }
  const std::string printed = th::checkpoint_state_to_text(state);
  th::CheckpointState again;
  try {
    again = th::parse_checkpoint_state(printed, "printed");
  } catch (const th::Error&) {
    __builtin_trap();  // we cannot read what we write
  }
  if (!same_state(state, again)) __builtin_trap();
  return 0;
}
