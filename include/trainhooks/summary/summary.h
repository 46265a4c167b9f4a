// Summary: the values of one TensorBoard event (scalars, histograms, images, text), encoded when
// added so the tensors they came from may change right after.
//
// A Summary is what a summary-saving hook collects during a step and hands to
// EventWriter::add_summary(), which writes all its values as one event and puts each tag's
// plugin metadata on the tag's first value in the file. The encodings are TensorFlow's:
//   - scalar: Summary.Value.simple_value (plugin "scalars");
//   - histogram: HistogramProto over TF's default 1551 bucket limits, empty runs merged
//     (plugin "histograms"); NaN or infinity throws InvalidArgument, as TF does;
//   - image: one PNG per batch element, up to max_outputs; tags `<tag>/image/<i>` when
//     max_outputs > 1 and `<tag>/image` when it is 1, as TF 1.x's image summary (plugin "images");
//   - text: a rank-0 DT_STRING tensor (plugin "text");
//   - hyperparameters: TensorBoard's HParams summaries (hparams.h; plugin "hparams"), whose data
//     is in each value's own metadata, written with every value.
//
//   trainhooks::summary::Summary s;
//   s.add_scalar("loss", 0.25f).add_histogram("weights", w).add_text("note", "lr halved");
//   writer.add_summary(std::move(s), step);
//
// Thread safety: a Summary is a value; distinct objects may be used on distinct threads.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainhooks/summary/hparams.h"
#include "trainhooks/summary/value_kind.h"

namespace trainhooks::summary {

// Layout of an image tensor: N batch, C channels (1 gray, 3 RGB, 4 RGBA), H height, W width.
enum class DataFormat { kNCHW, kNHWC, kCHW, kHWC };

struct ImageOptions {
  DataFormat dataformats = DataFormat::kNCHW;
  // Images written from the front of the batch; also selects the tag scheme (see above).
  int64_t max_outputs = 3;
};

struct EncodedValue;  // The wire encoding of one value; private to the library.

class Summary {
 public:
  Summary();
  ~Summary();
  Summary(const Summary& other);
  Summary& operator=(const Summary& other);
  Summary(Summary&& other) noexcept;
  Summary& operator=(Summary&& other) noexcept;

  Summary& add_scalar(std::string_view tag, float value);
  // Any shape and real dtype; the values are read once, here.
  Summary& add_histogram(std::string_view tag, const at::Tensor& values);
  // uint8 pixels as they are; floating pixels in [0, 1] scaled by 255 and rounded (values
  // outside are clamped; a pixel with a non-finite channel is painted red, as TF does).
  Summary& add_image(std::string_view tag, const at::Tensor& images,
                     const ImageOptions& options = {});
  Summary& add_text(std::string_view tag, std::string_view text);
  // TensorBoard's HParams plugin (hparams.h). The experiment: the names and types of
  // hparams.values and the metrics; InvalidArgument as validate_hparams().
  Summary& add_hparams_experiment(const HParams& hparams, double time_created_secs);
  // A run's start: its values, group_name and model_uri; InvalidArgument as validate_hparams().
  Summary& add_hparams_session_start(const HParams& hparams, double start_time_secs);
  // A run's end and how it ended.
  Summary& add_hparams_session_end(HParamsStatus status, double end_time_secs);

  size_t size() const;
  bool empty() const { return size() == 0; }
  void clear();
  // The tags in insertion order (an image batch contributes one tag per image).
  std::vector<std::string> tags() const;

  // The serialized Summary message, plugin metadata on every value: for callers that store
  // summaries elsewhere. EventWriter does not need it.
  std::string serialize() const;

 private:
  friend class EventWriter;
  std::vector<EncodedValue> values_;
};

}  // namespace trainhooks::summary
