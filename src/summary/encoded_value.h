// The wire encoding of one summary value, shared by Summary (which builds it) and the event
// encoder (which wraps it into Summary.Value, adding plugin metadata on a tag's first value).
#pragma once

#include <cstdint>
#include <string>

#include "trainhooks/summary/summary.h"

namespace trainhooks::summary {

// The plugins this library writes for; each has fixed metadata bytes.
enum class Plugin : uint8_t { kScalars, kHistograms, kImages, kText };

struct EncodedValue {
  std::string tag{};
  Plugin plugin = Plugin::kScalars;
  // Scalars are kept as the float (simple_value, field 2); the others as the complete bytes of
  // their oneof field (key, length and message: image = 4, histo = 5, tensor = 8).
  float simple_value = 0;
  std::string body{};
};

}  // namespace trainhooks::summary
