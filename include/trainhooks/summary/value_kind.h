// The kinds of summary values and session logs, apart from summary.h so that readers of event
// files (event_reader.h, the board) do not include LibTorch.
#pragma once

namespace trainhooks::summary {

// What a summary value holds, as a reader sees it.
// kLayout: a custom_scalars dashboard layout. kHParams: an HParams plugin summary (hparams.h).
enum class ValueKind {
  kNone,
  kScalar,
  kHistogram,
  kImage,
  kAudio,
  kText,
  kTensor,
  kLayout,
  kHParams
};
// "none", "scalar", "histogram", "image", "audio", "text", "tensor", "layout", "hparams".
const char* value_kind_name(ValueKind kind);

// SessionLog.status: TensorBoard drops points logged after a START with a higher step than it.
enum class SessionStatus { kUnspecified = 0, kStart = 1, kStop = 2, kCheckpoint = 3 };

}  // namespace trainhooks::summary
