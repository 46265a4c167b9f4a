// GraphDef: a model's graph in TensorFlow's format, which TensorBoard's Graphs dashboard reads from
// an event file (Event.graph_def, EventWriter::add_graph) and TensorFlow writes as text to
// `graph.pbtxt`.
//
// A plain value of named nodes: each has an op (its kind: "Placeholder", "VariableV2", ...), the
// names of the nodes it reads, a device ("/device:CPU:0", or "" when unknown) and attrs (dtype,
// shape, ...). The encodings are protobuf's, with TensorFlow's field numbers (graph.proto,
// node_def.proto, attr_value.proto): serialize_graph_def() for the binary form, to_text() for the
// text form (protobuf's text format, attrs in name order, as TensorFlow's write_graph writes
// it). Both are deterministic: the same GraphDef gives the same bytes. docs/formats.md lists
// what trainhooks puts into a graph's GraphDef (trainhooks/graph_export.h makes it).
//
//   trainhooks::summary::GraphDef def;
//   def.nodes.push_back({.name = "x", .op = "Placeholder",
//                        .attrs = {{"dtype", trainhooks::summary::DataType::kFloat}}});
//   def.nodes.push_back({.name = "y", .op = "CppFunc", .inputs = {"x"}});
//   std::string text = to_text(def);  // node { name: "x" op: "Placeholder" attr { ... } } ...
//
// Thread safety: plain values and free functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace trainhooks::summary {

// TensorFlow's DataType enum (types.proto), the values an attr of type "type" holds.
enum class DataType : int32_t {
  kInvalid = 0,
  kFloat = 1,
  kDouble = 2,
  kInt32 = 3,
  kUint8 = 4,
  kInt16 = 5,
  kInt8 = 6,
  kString = 7,
  kComplex64 = 8,
  kInt64 = 9,
  kBool = 10,
  kBfloat16 = 14,
  kUint16 = 17,
  kComplex128 = 18,
  kHalf = 19,
  kUint32 = 22,
  kUint64 = 23,
};
// "DT_FLOAT", ...: the name the text format uses.
const char* data_type_name(DataType type);

// A shape attr: the size of each dimension, -1 where unknown; unknown_rank when even the number
// of dimensions is not known (dims then empty).
struct TensorShape {
  std::vector<int64_t> dims{};
  bool unknown_rank = false;
  bool operator==(const TensorShape&) const = default;
};

// An attr's value: s (bytes), i, f (a float on the wire), b, type, shape, and the lists of types,
// shapes and strings.
using AttrValue =
    std::variant<std::string, int64_t, double, bool, DataType, TensorShape, std::vector<DataType>,
                 std::vector<TensorShape>, std::vector<std::string>>;

struct NodeDef {
  std::string name{};
  std::string op{};
  std::vector<std::string> inputs{};  // node names ("node:k" would be output k)
  std::string device{};
  std::map<std::string, AttrValue> attrs{};
  bool operator==(const NodeDef&) const = default;
};

struct GraphDef {
  std::vector<NodeDef> nodes{};
  // The node of that name, or null.
  const NodeDef* find(std::string_view name) const;
  bool operator==(const GraphDef&) const = default;
};

// The serialized GraphDef message.
std::string serialize_graph_def(const GraphDef& graph);
// DataLossError when `bytes` is not a GraphDef message.
GraphDef parse_graph_def(std::string_view bytes);

// protobuf's text format of the GraphDef message (what graph.pbtxt holds).
std::string to_text(const GraphDef& graph);
// The text format of a serialized GraphDef; DataLossError when it is not one.
std::string graph_def_bytes_to_text(std::string_view bytes);
// InvalidArgument naming the line and column of the first error when `text` is not a GraphDef
// in text format.
GraphDef parse_graph_def_text(std::string_view text);

}  // namespace trainhooks::summary
