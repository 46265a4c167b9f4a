// TensorBoard's HParams summaries (trainhooks/summary/hparams.h): the experiment, a session's
// start and end, each an HParamsPluginData in the metadata of a value whose tensor is empty.
#include "trainhooks/summary/hparams.h"

#include <cmath>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "trainhooks/errors.h"
#include "trainhooks/summary/summary.h"

#include "proto/hparams.pb.h"
#include "proto/summary.pb.h"
#include "summary/encoded_value.h"
#include "summary/event_encoding.h"
#include "summary/hparams_content.h"
#include "summary/wire.h"

namespace trainhooks::summary {
namespace {

namespace hp = proto::hparams;

// The TensorBoard writer's tensor for values that carry only metadata: an empty float vector
// (DT_FLOAT, shape [0]), 6 bytes.
const std::string& null_tensor_field() {
  static const std::string field = [] {
    proto::TensorProto tensor;
    tensor.set_dtype(proto::DT_FLOAT);
    tensor.mutable_tensor_shape()->add_dim()->set_size(0);
    std::string out;
    wire::put_bytes_field(out, 8, tensor.SerializeAsString());
    return out;
  }();
  return field;
}

// The start info's values are a map: in key order, so that the same values give the same bytes.
std::string deterministic(const google::protobuf::Message& message) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return out;
}

EncodedValue encode(std::string_view tag, const hp::HParamsPluginData& data) {
  proto::SummaryMetadata metadata;
  metadata.mutable_plugin_data()->set_plugin_name(plugin_name(Plugin::kHParams));
  metadata.mutable_plugin_data()->set_content(deterministic(data));
  return {.tag = std::string(tag),
          .plugin = Plugin::kHParams,
          .body = null_tensor_field(),
          .metadata = metadata.SerializeAsString()};
}

hp::DataType type_of(const HParamValue& v) {
  if (v.is_number()) return hp::DATA_TYPE_FLOAT64;
  if (v.is_string()) return hp::DATA_TYPE_STRING;
  return hp::DATA_TYPE_BOOL;
}

void to_proto(const HParamValue& v, google::protobuf::Value& out) {
  if (v.is_number()) {
    out.set_number_value(v.number());
  } else if (v.is_string()) {
    out.set_string_value(v.string());
  } else {
    out.set_bool_value(v.boolean());
  }
}

std::optional<HParamValue> from_proto(const google::protobuf::Value& v) {
  switch (v.kind_case()) {
    case google::protobuf::Value::kNumberValue:
      return HParamValue(v.number_value());
    case google::protobuf::Value::kStringValue:
      return HParamValue(v.string_value());
    case google::protobuf::Value::kBoolValue:
      return HParamValue(v.bool_value());
    default:
      return std::nullopt;  // null, a struct or a list: not a hyperparameter TensorBoard shows
  }
}

HParamValue zero_of(hp::DataType type) {
  switch (type) {
    case hp::DATA_TYPE_STRING:
      return HParamValue(std::string());
    case hp::DATA_TYPE_BOOL:
      return HParamValue(false);
    default:
      return HParamValue(0.0);
  }
}

}  // namespace

std::string HParamValue::to_string() const {
  if (is_number()) return fmt::format("{}", number());
  if (is_string()) return fmt::format("\"{}\"", string());
  return boolean() ? "true" : "false";
}

const char* hparams_status_name(HParamsStatus status) {
  switch (status) {
    case HParamsStatus::kUnknown:
      return "unknown";
    case HParamsStatus::kSuccess:
      return "success";
    case HParamsStatus::kFailure:
      return "failure";
    case HParamsStatus::kRunning:
      return "running";
  }
  return "unknown";
}

const char* hparams_kind_name(HParamsValue::Kind kind) {
  switch (kind) {
    case HParamsValue::Kind::kExperiment:
      return "experiment";
    case HParamsValue::Kind::kSessionStart:
      return "session start";
    case HParamsValue::Kind::kSessionEnd:
      return "session end";
  }
  return "?";
}

void validate_hparams(const HParams& hparams) {
  for (const auto& [name, value] : hparams.values) {
    if (name.empty()) throw InvalidArgument("hparams: a hyperparameter has an empty name");
    if (value.is_number() && !std::isfinite(value.number())) {
      throw InvalidArgument(
          fmt::format("hparams: '{}' is {}, not a finite number", name, value.number()));
    }
  }
  std::set<std::pair<std::string, std::string>> seen;
  for (size_t i = 0; i < hparams.metrics.size(); ++i) {
    const HParamsMetric& m = hparams.metrics[i];
    if (m.tag.empty()) throw InvalidArgument(fmt::format("hparams: metrics[{}] has no tag", i));
    if (!seen.emplace(m.group, m.tag).second) {
      throw InvalidArgument(
          fmt::format("hparams: metric '{}' of group '{}' is listed twice", m.tag, m.group));
    }
  }
}

Summary& Summary::add_hparams_experiment(const HParams& hparams, double time_created_secs) {
  validate_hparams(hparams);
  hp::HParamsPluginData data;
  hp::Experiment* e = data.mutable_experiment();
  e->set_description(hparams.description);
  e->set_time_created_secs(time_created_secs);
  // No domain: runs with other values (another optimizer) must not fall outside a declared one.
  for (const auto& [name, value] : hparams.values) {
    hp::HParamInfo* info = e->add_hparam_infos();
    info->set_name(name);
    info->set_type(type_of(value));
  }
  for (const HParamsMetric& m : hparams.metrics) {
    hp::MetricInfo* info = e->add_metric_infos();
    info->mutable_name()->set_group(m.group);
    info->mutable_name()->set_tag(m.tag);
    info->set_display_name(m.display_name);
    info->set_description(m.description);
    info->set_dataset_type(static_cast<hp::DatasetType>(m.dataset));
  }
  values_.push_back(encode(kHParamsExperimentTag, data));
  return *this;
}

Summary& Summary::add_hparams_session_start(const HParams& hparams, double start_time_secs) {
  validate_hparams(hparams);
  hp::HParamsPluginData data;
  hp::SessionStartInfo* s = data.mutable_session_start_info();
  for (const auto& [name, value] : hparams.values) to_proto(value, (*s->mutable_hparams())[name]);
  s->set_model_uri(hparams.model_uri);
  s->set_group_name(hparams.group_name);
  s->set_start_time_secs(start_time_secs);
  values_.push_back(encode(kHParamsSessionStartTag, data));
  return *this;
}

Summary& Summary::add_hparams_session_end(HParamsStatus status, double end_time_secs) {
  hp::HParamsPluginData data;
  hp::SessionEndInfo* s = data.mutable_session_end_info();
  s->set_status(static_cast<hp::Status>(status));
  s->set_end_time_secs(end_time_secs);
  values_.push_back(encode(kHParamsSessionEndTag, data));
  return *this;
}

std::optional<HParamsValue> decode_hparams_content(std::string_view content) {
  hp::HParamsPluginData data;
  if (!data.ParseFromArray(content.data(), static_cast<int>(content.size())) ||
      data.version() != 0) {
    return std::nullopt;
  }
  HParamsValue out;
  switch (data.data_case()) {
    case hp::HParamsPluginData::kExperiment: {
      const hp::Experiment& e = data.experiment();
      out.kind = HParamsValue::Kind::kExperiment;
      out.description = e.description();
      out.time_secs = e.time_created_secs();
      for (const hp::HParamInfo& info : e.hparam_infos()) {
        out.values.emplace(info.name(), zero_of(info.type()));
      }
      for (const hp::MetricInfo& info : e.metric_infos()) {
        out.metrics.push_back({.tag = info.name().tag(),
                               .group = info.name().group(),
                               .display_name = info.display_name(),
                               .description = info.description(),
                               .dataset = static_cast<MetricDataset>(info.dataset_type())});
      }
      return out;
    }
    case hp::HParamsPluginData::kSessionStartInfo: {
      const hp::SessionStartInfo& s = data.session_start_info();
      out.kind = HParamsValue::Kind::kSessionStart;
      for (const auto& [name, value] : s.hparams()) {
        if (auto v = from_proto(value)) out.values.emplace(name, std::move(*v));
      }
      out.group_name = s.group_name();
      out.model_uri = s.model_uri();
      out.time_secs = s.start_time_secs();
      return out;
    }
    case hp::HParamsPluginData::kSessionEndInfo: {
      const hp::SessionEndInfo& s = data.session_end_info();
      out.kind = HParamsValue::Kind::kSessionEnd;
      out.status = static_cast<HParamsStatus>(s.status());
      out.time_secs = s.end_time_secs();
      return out;
    }
    case hp::HParamsPluginData::DATA_NOT_SET:
      break;
  }
  return std::nullopt;
}

}  // namespace trainhooks::summary
