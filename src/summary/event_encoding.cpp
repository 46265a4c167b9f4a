#include "summary/event_encoding.h"

#include <array>

#include "proto/event.pb.h"
#include "proto/summary.pb.h"
#include "summary/record_io.h"
#include "summary/wire.h"

namespace trainhooks::summary {
namespace {

// Field numbers of the envelope messages.
constexpr uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventGraphDef = 4,
                   kEventSummary = 5, kEventSessionLog = 7;
constexpr uint32_t kSummaryValue = 1;
constexpr uint32_t kValueTag = 1, kValueSimpleValue = 2, kValueMetadata = 9;

void put_event_header(std::string& out, double wall_time, int64_t step) {
  // proto3 omits fields at their default; a double is default only as +0.0 (all bits zero).
  if (uint64_t bits = wire::double_bits(wall_time); bits != 0) {
    wire::put_varint(out, wire::key(kEventWallTime, wire::kFixed64));
    wire::put_fixed64(out, bits);
  }
  if (step != 0) {
    wire::put_varint(out, wire::key(kEventStep, wire::kVarint));
    wire::put_varint(out, static_cast<uint64_t>(step));
  }
}

std::string build_metadata(Plugin plugin) {
  proto::SummaryMetadata metadata;
  metadata.mutable_plugin_data()->set_plugin_name(plugin_name(plugin));
  switch (plugin) {
    case Plugin::kScalars:
      metadata.set_data_class(proto::DATA_CLASS_SCALAR);
      break;
    case Plugin::kHistograms:
    case Plugin::kText:
      metadata.set_data_class(proto::DATA_CLASS_TENSOR);
      break;
    case Plugin::kImages:
      metadata.set_data_class(proto::DATA_CLASS_BLOB_SEQUENCE);
      break;
    case Plugin::kHParams:  // TensorBoard's hparams summaries set no data class
      break;
  }
  return metadata.SerializeAsString();
}

}  // namespace

const char* plugin_name(Plugin plugin) {
  switch (plugin) {
    case Plugin::kScalars:
      return "scalars";
    case Plugin::kHistograms:
      return "histograms";
    case Plugin::kImages:
      return "images";
    case Plugin::kText:
      return "text";
    case Plugin::kHParams:
      return "hparams";
  }
  return "";
}

const std::string& plugin_metadata(Plugin plugin) {
  static const std::array<std::string, 5> all = {
      build_metadata(Plugin::kScalars), build_metadata(Plugin::kHistograms),
      build_metadata(Plugin::kImages), build_metadata(Plugin::kText),
      build_metadata(Plugin::kHParams)};
  return all[static_cast<size_t>(plugin)];
}

namespace {

// The value's own metadata on every occurrence, else the plugin's on a tag's first.
const std::string* metadata_of(const EncodedValue& value, bool with_metadata) {
  if (!value.metadata.empty()) return &value.metadata;
  return with_metadata ? &plugin_metadata(value.plugin) : nullptr;
}

}  // namespace

size_t value_size(const EncodedValue& value, bool with_metadata) {
  size_t size = value.tag.empty() ? 0 : wire::delimited_size(value.tag.size());
  size += value.body.empty() ? 1 + 4 : value.body.size();
  if (const std::string* metadata = metadata_of(value, with_metadata)) {
    size += wire::delimited_size(metadata->size());
  }
  return size;
}

void append_value(std::string& out, const EncodedValue& value, bool with_metadata) {
  if (!value.tag.empty()) wire::put_bytes_field(out, kValueTag, value.tag);
  if (value.body.empty()) {
    wire::put_varint(out, wire::key(kValueSimpleValue, wire::kFixed32));
    wire::put_fixed32(out, wire::float_bits(value.simple_value));
  } else {
    out.append(value.body);
  }
  if (const std::string* metadata = metadata_of(value, with_metadata)) {
    wire::put_bytes_field(out, kValueMetadata, *metadata);
  }
}

void append_file_version_event(std::string& out, double wall_time) {
  size_t start = begin_record(out);
  put_event_header(out, wall_time, 0);
  wire::put_bytes_field(out, kEventFileVersion, kFileVersion);
  finish_record(out, start);
}

void append_scalar_event(std::string& out, double wall_time, int64_t step, std::string_view tag,
                         float value, bool with_metadata) {
  const std::string* metadata = with_metadata ? &plugin_metadata(Plugin::kScalars) : nullptr;
  size_t value_len = (tag.empty() ? 0 : wire::delimited_size(tag.size())) + 1 + 4 +
                     (metadata ? wire::delimited_size(metadata->size()) : 0);
  size_t summary_len = wire::delimited_size(value_len);

  size_t start = begin_record(out);
  put_event_header(out, wall_time, step);
  wire::put_delimited_header(out, kEventSummary, summary_len);
  wire::put_delimited_header(out, kSummaryValue, value_len);
  if (!tag.empty()) wire::put_bytes_field(out, kValueTag, tag);
  wire::put_varint(out, wire::key(kValueSimpleValue, wire::kFixed32));
  wire::put_fixed32(out, wire::float_bits(value));
  if (metadata) wire::put_bytes_field(out, kValueMetadata, *metadata);
  finish_record(out, start);
}

void append_summary_event(std::string& out, double wall_time, int64_t step,
                          std::span<const EncodedValue> values,
                          std::span<const uint8_t> with_metadata) {
  size_t summary_len = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    summary_len += wire::delimited_size(value_size(values[i], with_metadata[i]));
  }
  size_t start = begin_record(out);
  put_event_header(out, wall_time, step);
  wire::put_delimited_header(out, kEventSummary, summary_len);
  for (size_t i = 0; i < values.size(); ++i) {
    wire::put_delimited_header(out, kSummaryValue, value_size(values[i], with_metadata[i]));
    append_value(out, values[i], with_metadata[i]);
  }
  finish_record(out, start);
}

void append_session_log_event(std::string& out, double wall_time, int64_t step,
                              std::string_view session_log) {
  size_t start = begin_record(out);
  put_event_header(out, wall_time, step);
  wire::put_bytes_field(out, kEventSessionLog, session_log);
  finish_record(out, start);
}

void append_graph_event(std::string& out, double wall_time, int64_t step,
                        std::string_view graph_def) {
  size_t start = begin_record(out);
  put_event_header(out, wall_time, step);
  wire::put_bytes_field(out, kEventGraphDef, graph_def);
  finish_record(out, start);
}

std::string serialize_session_log(SessionStatus status, std::string_view checkpoint_path,
                                  std::string_view msg) {
  proto::SessionLog log;
  log.set_status(static_cast<proto::SessionLog::SessionStatus>(status));
  log.set_checkpoint_path(std::string(checkpoint_path));
  log.set_msg(std::string(msg));
  return log.SerializeAsString();
}

}  // namespace trainhooks::summary
