#include "trainhooks/summary_ops.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>

#include <fmt/format.h>

#include <map>

#include "trainhooks/errors.h"
#include "trainhooks/session.h"

namespace trainhooks::summary {

namespace {

struct SummaryCollection {
  std::vector<SummarySpec> specs;
  std::map<int32_t, size_t> by_node;
};

Node add_summary_node(Graph& g, std::string tag, ValueKind kind, OpFn fn, ImageOptions image = {}) {
  if (tag.empty())
    throw InvalidArgument(fmt::format("summary {}: tag must not be empty", value_kind_name(kind)));
  Node n = g.op("summaries/" + tag, std::move(fn));
  auto& c = g.extension<SummaryCollection>();
  c.by_node[n.index] = c.specs.size();
  c.specs.push_back({n, std::move(tag), kind, image});
  return n;
}

at::Tensor text_tensor(const std::string& s) {
  return at::from_blob(const_cast<char*>(s.data()), {static_cast<int64_t>(s.size())}, at::kByte)
      .clone();
}

}  // namespace

Node scalar(Graph& g, std::string tag, NodeRef value) {
  Node v = g.resolve(value);
  return add_summary_node(g, std::move(tag), ValueKind::kScalar, [v](Run& r) { return r[v]; });
}

Node histogram(Graph& g, std::string tag, NodeRef values) {
  Node v = g.resolve(values);
  return add_summary_node(g, std::move(tag), ValueKind::kHistogram, [v](Run& r) { return r[v]; });
}

Node image(Graph& g, std::string tag, NodeRef images, ImageOptions options) {
  Node v = g.resolve(images);
  if (options.max_outputs <= 0) {
    throw InvalidArgument(
        fmt::format("summary image '{}': invalid max_outputs {}", tag, options.max_outputs));
  }
  return add_summary_node(
      g, std::move(tag), ValueKind::kImage, [v](Run& r) { return r[v]; }, options);
}

Node text(Graph& g, std::string tag, std::function<std::string(Run&)> fn) {
  if (!fn) throw InvalidArgument(fmt::format("summary text '{}': fn is empty", tag));
  // The text travels through the run as its UTF-8 bytes.
  return add_summary_node(g, std::move(tag), ValueKind::kText,
                          [fn = std::move(fn)](Run& r) { return text_tensor(fn(r)); });
}

Node text(Graph& g, std::string tag, std::string constant_text) {
  at::Tensor bytes = text_tensor(constant_text);
  return add_summary_node(g, std::move(tag), ValueKind::kText, [bytes](Run&) { return bytes; });
}

std::vector<Node> merge_all(Graph& g) {
  std::vector<Node> out;
  for (const auto& s : g.extension<SummaryCollection>().specs) out.push_back(s.node);
  return out;
}

const SummarySpec& spec(Graph& g, Node node) {
  auto& c = g.extension<SummaryCollection>();
  auto it = c.by_node.find(node.index);
  if (it == c.by_node.end()) {
    throw InvalidArgument(fmt::format("Node '{}' is not a summary node", g.name(node)));
  }
  return c.specs[it->second];
}

void add_value(Graph& g, Node node, const at::Tensor& value, Summary& out) {
  const SummarySpec& s = spec(g, node);
  switch (s.kind) {
    case ValueKind::kScalar:
      if (!value.defined() || value.numel() != 1) {
        throw InvalidArgument(
            fmt::format("summary scalar '{}': the value must have one element, got {}", s.tag,
                        value.defined() ? value.numel() : 0));
      }
      out.add_scalar(s.tag, value.item<float>());
      break;
    case ValueKind::kHistogram:
      out.add_histogram(s.tag, value);
      break;
    case ValueKind::kImage:
      out.add_image(s.tag, value, s.image);
      break;
    case ValueKind::kText: {
      at::Tensor bytes = value.contiguous();
      out.add_text(s.tag, std::string_view(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()),
                                           static_cast<size_t>(bytes.numel())));
      break;
    }
    default:
      throw InternalError(fmt::format("summary '{}': unsupported kind", s.tag));
  }
}

}  // namespace trainhooks::summary
