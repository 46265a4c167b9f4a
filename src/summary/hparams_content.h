// The HParams plugin's data inside a summary value's metadata (HParamsPluginData), shared by
// Summary (which encodes it, summary/hparams.cpp) and EventReader (which decodes it).
#pragma once

#include <optional>
#include <string_view>

#include "trainhooks/summary/hparams.h"

namespace trainhooks::summary {

// The content of an "hparams" plugin's metadata as a value; nullopt when it is not an
// HParamsPluginData of version 0 holding one of the three messages.
std::optional<HParamsValue> decode_hparams_content(std::string_view content);

}  // namespace trainhooks::summary
