// The wire encoding of one summary value, shared by Summary (which builds it) and the event
// encoder (which wraps it into Summary.Value, adding plugin metadata on a tag's first value).
#pragma once

#include <cstdint>
#include <string>

#include "trainhooks/summary/summary.h"

namespace trainhooks::summary {

// The plugins this library writes for; each has fixed metadata bytes, except hparams, whose
// values carry their own.
enum class Plugin : uint8_t { kScalars, kHistograms, kImages, kText, kHParams };

struct EncodedValue {
  std::string tag{};
  Plugin plugin = Plugin::kScalars;
  // Scalars are kept as the float (simple_value, field 2); the others as the complete bytes of
  // their oneof field (key, length and message: image = 4, histo = 5, tensor = 8).
  float simple_value = 0;
  std::string body{};
  // A serialized SummaryMetadata of this value alone, written with every occurrence of the tag,
  // not only its first: the HParams plugin's data is in its metadata. Empty: the plugin's.
  std::string metadata{};
};

}  // namespace trainhooks::summary
