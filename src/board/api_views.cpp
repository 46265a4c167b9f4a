#include "board/api_views.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "trainhooks/errors.h"
#include "util/json_writer.h"

namespace trainhooks::board::internal {
namespace {

using summary::HParamValue;
using trainhooks::internal::append_json_number;
using trainhooks::internal::append_json_string;
using trainhooks::internal::JsonArray;
using trainhooks::internal::JsonObject;

// "[?, 784]": an unknown size is a '?', as TensorBoard writes it on the edges.
std::string shape_text(const summary::TensorShape& shape) {
  if (shape.unknown_rank) return "<unknown rank>";
  std::string out = "[";
  for (size_t i = 0; i < shape.dims.size(); ++i) {
    if (i > 0) out += ", ";
    out += shape.dims[i] < 0 ? std::string("?") : std::to_string(shape.dims[i]);
  }
  return out + "]";
}

template <typename T, typename Text>
std::string list_text(const std::vector<T>& items, Text text) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += text(items[i]);
  }
  return out + "]";
}

const char* type_name(const HParamValue& v) {
  return v.is_number() ? "number" : v.is_bool() ? "bool" : "string";
}

void append_value(std::string& out, const HParamValue& v) {
  if (v.is_number()) {
    append_json_number(out, v.number());
  } else if (v.is_bool()) {
    out += v.boolean() ? "true" : "false";
  } else {
    append_json_string(out, v.string());
  }
}

std::string metric_run(const std::string& run, const std::string& group) {
  if (group.empty()) return run;
  return run == "." ? group : run + "/" + group;
}

}  // namespace

std::string attr_text(const summary::AttrValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return v;
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) {
          return fmt::format("{}", v);
        } else if constexpr (std::is_same_v<T, summary::DataType>) {
          return summary::data_type_name(v);
        } else if constexpr (std::is_same_v<T, summary::TensorShape>) {
          return shape_text(v);
        } else if constexpr (std::is_same_v<T, std::vector<summary::DataType>>) {
          return list_text(v, [](summary::DataType t) { return std::string(data_type_name(t)); });
        } else if constexpr (std::is_same_v<T, std::vector<summary::TensorShape>>) {
          return list_text(v, shape_text);
        } else {
          return list_text(v, [](const std::string& s) { return '"' + s + '"'; });
        }
      },
      value);
}

std::string graph_json(const std::string& run, const RunGraph& graph,
                       const summary::GraphDef& def) {
  std::string out;
  out.reserve(256 + def.nodes.size() * 160);
  {
    JsonObject o(out);
    o.text("run", run).number("step", graph.step).number("wall_time", graph.wall_time);
    JsonArray nodes(o.key("nodes"), ",\n");
    for (const summary::NodeDef& node : def.nodes) {
      JsonObject n(nodes.next());
      n.text("name", node.name).text("op", node.op).text("device", node.device);
      {
        JsonArray inputs(n.key("inputs"));
        for (const std::string& input : node.inputs) append_json_string(inputs.next(), input);
      }
      JsonArray attrs(n.key("attrs"));
      for (const auto& [name, value] : node.attrs) {
        JsonObject(attrs.next()).text("name", name).text("value", attr_text(value));
      }
    }
  }
  return out;
}

std::string hparams_json(const LogdirIndex& index) {
  struct Session {
    std::string run;
    RunHParams hparams;
  };
  std::vector<Session> sessions;
  std::map<std::string, const char*> columns;  // name -> type
  std::vector<summary::HParamsMetric> metrics;
  auto add_metrics = [&](const std::vector<summary::HParamsMetric>& declared) {
    for (const summary::HParamsMetric& m : declared) {
      const bool known = std::any_of(metrics.begin(), metrics.end(), [&](const auto& k) {
        return k.tag == m.tag && k.group == m.group;
      });
      if (!known) metrics.push_back(m);
    }
  };
  for (const RunInfo& run : index.runs()) {
    RunHParams h = index.hparams(run.name);
    if (h.experiment) {
      for (const auto& [name, v] : h.experiment->values) columns.try_emplace(name, type_name(v));
      add_metrics(h.experiment->metrics);
    }
    if (!h.session_start) continue;
    for (const auto& [name, v] : h.session_start->values) columns.try_emplace(name, type_name(v));
    sessions.push_back({run.name, std::move(h)});
  }

  std::string out;
  {
    JsonObject o(out);
    {
      JsonArray list(o.key("hparams"));
      for (const auto& [name, type] : columns) {
        JsonObject(list.next()).text("name", name).text("type", type);
      }
    }
    {
      JsonArray list(o.key("metrics"));
      for (const summary::HParamsMetric& m : metrics) {
        JsonObject(list.next())
            .text("tag", m.tag)
            .text("group", m.group)
            .text("display_name", m.display_name);
      }
    }
    JsonArray list(o.key("sessions"), ",\n");
    for (const Session& s : sessions) {
      const summary::HParamsValue& start = *s.hparams.session_start;
      const std::optional<summary::HParamsValue>& end = s.hparams.session_end;
      JsonObject row(list.next());
      row.text("run", s.run).text("group_name", start.group_name);
      if (end) {
        row.text("status", summary::hparams_status_name(end->status))
            .number("start_time", start.time_secs)
            .number("end_time", end->time_secs);
      } else {
        row.key("status") += "null";
        row.number("start_time", start.time_secs);
        row.key("end_time") += "null";
      }
      {
        JsonArray values(row.key("values"));
        for (const auto& [name, type] : columns) {
          const auto it = start.values.find(name);
          if (it == start.values.end()) {
            values.next() += "null";
          } else {
            append_value(values.next(), it->second);
          }
        }
      }
      JsonArray finals(row.key("metrics"));
      for (const summary::HParamsMetric& m : metrics) {
        std::string& item = finals.next();
        ScalarSeries series;
        try {
          series = index.scalars(metric_run(s.run, m.group), m.tag);
        } catch (const NotFoundError&) {
          // Not written (yet): an empty cell.
        }
        if (series.values.empty()) {
          item += "null";
          continue;
        }
        JsonObject(item).number("value", series.values.back()).number("step", series.steps.back());
      }
    }
  }
  return out;
}

}  // namespace trainhooks::board::internal
