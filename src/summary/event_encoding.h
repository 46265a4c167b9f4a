// Encoding of Event messages into framed records, used by the writer thread.
//
// The envelope (Event, Summary, Summary.Value) is written with the wire helpers; payload
// messages (HistogramProto, Summary.Image, TensorProto, SessionLog, SummaryMetadata) come from the
// generated protobuf classes. The bytes equal protobuf's own serialization of the same Event.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "summary/encoded_value.h"

namespace trainhooks::summary {

inline constexpr std::string_view kFileVersion = "brain.Event:2";

// The serialized SummaryMetadata of a plugin: plugin_name, data_class (scalars: SCALAR,
// histograms and text: TENSOR, images: BLOB_SEQUENCE, hparams: none), empty content (version 0 of
// each plugin's data; an hparams value carries its own metadata, EncodedValue::metadata).
const std::string& plugin_metadata(Plugin plugin);
const char* plugin_name(Plugin plugin);

// Each appends one framed record to `out`.
void append_file_version_event(std::string& out, double wall_time);
// One Summary.Value with simple_value; metadata when `with_metadata`.
void append_scalar_event(std::string& out, double wall_time, int64_t step, std::string_view tag,
                         float value, bool with_metadata);
// `with_metadata[i]` tells whether values[i] carries its plugin metadata.
void append_summary_event(std::string& out, double wall_time, int64_t step,
                          std::span<const EncodedValue> values,
                          std::span<const uint8_t> with_metadata);
// `session_log` is a serialized SessionLog message.
void append_session_log_event(std::string& out, double wall_time, int64_t step,
                              std::string_view session_log);

// `graph_def` is a serialized GraphDef message (Event.graph_def).
void append_graph_event(std::string& out, double wall_time, int64_t step,
                        std::string_view graph_def);

std::string serialize_session_log(SessionStatus status, std::string_view checkpoint_path,
                                  std::string_view msg);

// The Summary.Value bytes of `value` (without the Summary's field key).
void append_value(std::string& out, const EncodedValue& value, bool with_metadata);
size_t value_size(const EncodedValue& value, bool with_metadata);

}  // namespace trainhooks::summary
