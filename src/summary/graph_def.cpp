#include "trainhooks/summary/graph_def.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include <algorithm>

#include <fmt/format.h>

#include "trainhooks/errors.h"

#include "proto/graph.pb.h"

namespace trainhooks::summary {
namespace {

void to_proto(const TensorShape& shape, proto::TensorShapeProto& out) {
  if (shape.unknown_rank) {
    out.set_unknown_rank(true);
    return;
  }
  for (int64_t d : shape.dims) out.add_dim()->set_size(d);
}

TensorShape from_proto(const proto::TensorShapeProto& shape) {
  TensorShape out;
  out.unknown_rank = shape.unknown_rank();
  for (const auto& d : shape.dim()) out.dims.push_back(d.size());
  return out;
}

void to_proto(const AttrValue& value, proto::AttrValue& out) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          out.set_s(v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          out.set_i(v);
        } else if constexpr (std::is_same_v<T, double>) {
          out.set_f(static_cast<float>(v));
        } else if constexpr (std::is_same_v<T, bool>) {
          out.set_b(v);
        } else if constexpr (std::is_same_v<T, DataType>) {
          out.set_type(static_cast<proto::DataType>(v));
        } else if constexpr (std::is_same_v<T, TensorShape>) {
          to_proto(v, *out.mutable_shape());
        } else if constexpr (std::is_same_v<T, std::vector<DataType>>) {
          auto* list = out.mutable_list();
          for (DataType t : v) list->add_type(static_cast<proto::DataType>(t));
        } else if constexpr (std::is_same_v<T, std::vector<TensorShape>>) {
          auto* list = out.mutable_list();
          for (const TensorShape& s : v) to_proto(s, *list->add_shape());
        } else {
          static_assert(std::is_same_v<T, std::vector<std::string>>);
          auto* list = out.mutable_list();
          for (const std::string& s : v) list->add_s(s);
        }
      },
      value);
}

AttrValue from_proto(const proto::AttrValue& value) {
  switch (value.value_case()) {
    case proto::AttrValue::kS:
      return value.s();
    case proto::AttrValue::kI:
      return value.i();
    case proto::AttrValue::kF:
      return static_cast<double>(value.f());
    case proto::AttrValue::kB:
      return value.b();
    case proto::AttrValue::kType:
      return static_cast<DataType>(value.type());
    case proto::AttrValue::kShape:
      return from_proto(value.shape());
    case proto::AttrValue::kList: {
      // A list holds one kind of element; an empty list reads as an empty list of strings.
      const auto& list = value.list();
      if (list.type_size() > 0) {
        std::vector<DataType> types;
        for (int t : list.type()) types.push_back(static_cast<DataType>(t));
        return types;
      }
      if (list.shape_size() > 0) {
        std::vector<TensorShape> shapes;
        for (const auto& s : list.shape()) shapes.push_back(from_proto(s));
        return shapes;
      }
      return std::vector<std::string>(list.s().begin(), list.s().end());
    }
    case proto::AttrValue::kTensor:  // a Const's value: not kept (trainhooks writes none)
    case proto::AttrValue::VALUE_NOT_SET:
      break;
  }
  return std::string();
}

proto::GraphDef to_proto(const GraphDef& graph) {
  proto::GraphDef out;
  for (const NodeDef& node : graph.nodes) {
    proto::NodeDef* n = out.add_node();
    n->set_name(node.name);
    n->set_op(node.op);
    for (const std::string& input : node.inputs) n->add_input(input);
    n->set_device(node.device);
    for (const auto& [name, value] : node.attrs) to_proto(value, (*n->mutable_attr())[name]);
  }
  return out;
}

GraphDef from_proto(const proto::GraphDef& graph) {
  GraphDef out;
  out.nodes.reserve(static_cast<size_t>(graph.node_size()));
  for (const proto::NodeDef& n : graph.node()) {
    NodeDef node{.name = n.name(),
                 .op = n.op(),
                 .inputs = {n.input().begin(), n.input().end()},
                 .device = n.device()};
    for (const auto& [name, value] : n.attr()) node.attrs.emplace(name, from_proto(value));
    out.nodes.push_back(std::move(node));
  }
  return out;
}

proto::GraphDef parse_proto(std::string_view bytes) {
  proto::GraphDef graph;
  if (!graph.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    throw DataLossError(fmt::format("Not a GraphDef: {} bytes that do not parse", bytes.size()));
  }
  return graph;
}

std::string print(const proto::GraphDef& graph) {
  std::string text;
  // The printer writes map entries (the attrs) in key order: the same graph, the same text.
  google::protobuf::TextFormat::PrintToString(graph, &text);
  return text;
}

// The parser's first error, with its place.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (error.empty()) error = fmt::format("line {}, column {}: {}", line + 1, column + 1, message);
  }
  std::string error;
};

}  // namespace

const char* data_type_name(DataType type) {
  const std::string& name = proto::DataType_Name(static_cast<proto::DataType>(type));
  return name.empty() ? "DT_INVALID" : name.c_str();
}

const NodeDef* GraphDef::find(std::string_view name) const {
  auto it =
      std::find_if(nodes.begin(), nodes.end(), [&](const NodeDef& n) { return n.name == name; });
  return it == nodes.end() ? nullptr : &*it;
}

std::string serialize_graph_def(const GraphDef& graph) {
  const proto::GraphDef message = to_proto(graph);
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    // Maps (the attrs) in key order: the same graph, the same bytes.
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return out;
}

GraphDef parse_graph_def(std::string_view bytes) { return from_proto(parse_proto(bytes)); }

std::string to_text(const GraphDef& graph) { return print(to_proto(graph)); }

std::string graph_def_bytes_to_text(std::string_view bytes) { return print(parse_proto(bytes)); }

GraphDef parse_graph_def_text(std::string_view text) {
  proto::GraphDef graph;
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  const std::string copy(text);
  if (!parser.ParseFromString(copy, &graph)) {
    throw InvalidArgument(fmt::format("Not a GraphDef in text format: {}",
                                      errors.error.empty() ? "parse error" : errors.error));
  }
  return from_proto(graph);
}

}  // namespace trainhooks::summary
