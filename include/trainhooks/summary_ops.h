// Summary nodes: what to write to TensorBoard, declared in the graph (TF's tf.summary.* ops and
// merge_all).
//
// Each function adds an op node `summaries/<tag>` that evaluates the value to summarise, and
// records it in the graph's summary collection. A SummarySaverHook fetches these nodes only on
// the steps where it writes, so summaries cost nothing on the other steps.
//
//   th::summary::scalar(g, "loss", loss);
//   th::summary::histogram(g, "fc/weight", "net/fc.weight");
//   th::summary::image(g, "inputs", batch.data(), {.max_outputs = 4});
//   th::summary::text(g, "config", "lr = 0.1, batch = 64");
//   auto all = th::summary::merge_all(g);   // what MonitoredTrainingSession writes
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

#include "trainhooks/graph.h"
#include "trainhooks/node.h"
#include "trainhooks/summary/summary.h"

namespace trainhooks::summary {

struct SummarySpec {
  Node node;
  std::string tag;
  ValueKind kind = ValueKind::kNone;
  ImageOptions image;
};

// `value` must evaluate to one element (checked when written).
Node scalar(Graph& graph, std::string tag, NodeRef value);
// Any shape; NaN or infinity is an InvalidArgument naming the tag when written, as in TF.
Node histogram(Graph& graph, std::string tag, NodeRef values);
// A batch of images (see ImageOptions for layouts and value ranges).
Node image(Graph& graph, std::string tag, NodeRef images, ImageOptions options = {});
// Text computed per written step, or a constant.
Node text(Graph& graph, std::string tag, std::function<std::string(Run&)> fn);
Node text(Graph& graph, std::string tag, std::string constant_text);

// Every summary node of the graph, in creation order.
std::vector<Node> merge_all(Graph& graph);
// The spec of a summary node; InvalidArgument if `node` is not one.
const SummarySpec& spec(Graph& graph, Node node);
// Adds the value fetched for summary node `node` to `out`.
void add_value(Graph& graph, Node node, const at::Tensor& value, Summary& out);

}  // namespace trainhooks::summary
