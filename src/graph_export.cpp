#include "trainhooks/graph_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string>
#include <vector>

namespace trainhooks {
namespace {

using summary::AttrValue;
using summary::DataType;
using summary::NodeDef;
using summary::TensorShape;

DataType data_type(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float:
      return DataType::kFloat;
    case c10::ScalarType::Double:
      return DataType::kDouble;
    case c10::ScalarType::Int:
      return DataType::kInt32;
    case c10::ScalarType::Byte:
      return DataType::kUint8;
    case c10::ScalarType::Short:
      return DataType::kInt16;
    case c10::ScalarType::Char:
      return DataType::kInt8;
    case c10::ScalarType::Long:
      return DataType::kInt64;
    case c10::ScalarType::Bool:
      return DataType::kBool;
    case c10::ScalarType::BFloat16:
      return DataType::kBfloat16;
    case c10::ScalarType::Half:
      return DataType::kHalf;
    case c10::ScalarType::ComplexFloat:
      return DataType::kComplex64;
    case c10::ScalarType::ComplexDouble:
      return DataType::kComplex128;
    default:
      return DataType::kInvalid;
  }
}

TensorShape shape_of(at::IntArrayRef sizes) { return {.dims = {sizes.begin(), sizes.end()}}; }

// LibTorch's "cpu", "cuda:1" as TensorFlow's "/device:CPU:0", "/device:GPU:1".
std::string tf_device(const std::string& device) {
  if (device.empty()) return "";
  const size_t colon = device.find(':');
  std::string type = device.substr(0, colon);
  const std::string index = colon == std::string::npos ? "0" : device.substr(colon + 1);
  if (type == "cuda") type = "gpu";
  std::transform(type.begin(), type.end(), type.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return fmt::format("/device:{}:{}", type, index);
}

bool allowed(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' ||
         c == '-';
}

// The graph's names as TensorFlow allows them, unique.
std::vector<std::string> tf_names(const Graph& graph) {
  std::vector<std::string> names;
  std::set<std::string> used;
  for (Node n : graph.nodes()) {
    std::string name = graph.name(n);
    std::replace_if(
        name.begin(), name.end(), [](char c) { return !allowed(c); }, '_');
    std::string unique = name;
    for (int k = 1; used.count(unique); ++k) unique = fmt::format("{}_{}", name, k);
    used.insert(unique);
    names.push_back(std::move(unique));
  }
  return names;
}

void add_unique(std::vector<std::string>& inputs, const std::string& name) {
  if (std::find(inputs.begin(), inputs.end(), name) == inputs.end()) inputs.push_back(name);
}

}  // namespace

summary::GraphDef graph_def(const Graph& graph) {
  const std::vector<std::string> names = tf_names(graph);
  summary::GraphDef out;
  out.nodes.reserve(graph.size());
  for (Node n : graph.nodes()) {
    NodeDef node{.name = names[static_cast<size_t>(n.index)]};
    const NodeTrace* trace = graph.trace(n);
    if (trace) {
      for (Node input : trace->inputs)
        node.inputs.push_back(names[static_cast<size_t>(input.index)]);
      node.device = tf_device(trace->device);
    }
    const bool traced_value = trace && trace->dtype;
    auto& attrs = node.attrs;
    switch (graph.kind(n)) {
      case NodeKind::kPlaceholder: {
        node.op = "Placeholder";
        const PlaceholderOptions& spec = graph.placeholder_options(n);
        if (spec.dtype) {
          attrs["dtype"] = data_type(*spec.dtype);
        } else if (traced_value) {
          attrs["dtype"] = data_type(*trace->dtype);
        }
        attrs["shape"] = spec.shape.known() ? TensorShape{.dims = spec.shape.dims()}
                                            : TensorShape{.unknown_rank = true};
        break;
      }
      case NodeKind::kVariable: {
        node.op = "VariableV2";
        const at::Tensor& value = graph.variable_value(n);
        attrs["dtype"] = data_type(value.scalar_type());
        attrs["shape"] = shape_of(value.sizes());
        attrs["_trainable"] = graph.is_trainable(n);
        node.device = tf_device(value.device().str());
        break;
      }
      case NodeKind::kConstant:
        node.op = "Const";
        if (traced_value) attrs["dtype"] = data_type(*trace->dtype);
        break;
      case NodeKind::kOp:
        node.op = "CppFunc";
        if (traced_value) attrs["T"] = data_type(*trace->dtype);
        break;
      case NodeKind::kInput:
        node.op = "IteratorGetNext";
        if (traced_value) attrs["output_types"] = std::vector<DataType>{data_type(*trace->dtype)};
        break;
      case NodeKind::kGlobalStep:
        node.op = "VariableV2";
        attrs["dtype"] = DataType::kInt64;
        attrs["shape"] = TensorShape{};
        attrs["_trainable"] = false;
        break;
      case NodeKind::kTrainOp: {
        node.op = "ApplyGradients";
        attrs["optimizer"] = graph.optimizer_name(n);
        // What the step reads besides its loss: the variables it updates and the global step.
        add_unique(node.inputs, names[static_cast<size_t>(graph.train_op_loss(n).index)]);
        for (Node v : graph.train_op_variables(n)) {
          add_unique(node.inputs, names[static_cast<size_t>(v.index)]);
        }
        for (Node step : graph.nodes(NodeKind::kGlobalStep)) {
          add_unique(node.inputs, names[static_cast<size_t>(step.index)]);
        }
        break;
      }
    }
    if (traced_value) attrs["_output_shapes"] = std::vector<TensorShape>{shape_of(trace->shape)};
    out.nodes.push_back(std::move(node));
  }
  return out;
}

}  // namespace trainhooks
