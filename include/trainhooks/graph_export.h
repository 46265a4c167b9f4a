// A Graph as TensorFlow's GraphDef (summary/graph_def.h), for TensorBoard's Graphs dashboard and
// `graph.pbtxt`.
//
// Every node becomes a NodeDef of the same name, in graph order, with a TensorFlow-like op:
//   placeholder  "Placeholder"      dtype, shape (its spec: -1 any size, unknown rank if unset)
//   variable     "VariableV2"       dtype, shape, _trainable (module parameters are `net/<path>`)
//   constant     "Const"            dtype
//   op           "CppFunc"          T (its value's dtype)
//   input        "IteratorGetNext"  output_types (one component per node: `train/data`, ...)
//   global step  "VariableV2"       dtype DT_INT64, shape [] (a scalar)
//   train op     "ApplyGradients"   optimizer ("adam", ...); inputs: its loss, the variables it
//                                   updates and the global step
// Inputs and devices come from the graph's traces (Graph::trace, made by recording runs:
// Session::record_trace): a node that no recording run evaluated has no inputs (and no device,
// unless it is a variable or a constant). Where a trace knows a value's shape it is the node's
// `_output_shapes`, which TensorBoard writes on the edges. Devices are TensorFlow's spelling
// ("/device:CPU:0", "/device:GPU:1" for "cuda:1"). A character that TensorFlow does not allow in a
// node name (anything but letters, digits and `_ . / -`) becomes '_', and a name that then
// clashes gets a suffix `_1`, `_2`, ...: names reach TensorBoard as TensorFlow's would.
//
//   th::Session sess(g);
//   sess.record_trace(true);
//   sess.run(train_op, {{x, xs}, {y, ys}});
//   sess.record_trace(false);
//   writer.add_graph(th::graph_def(g));
//
// Reads the graph only; not thread-safe with a run of it.
#pragma once

#include "trainhooks/graph.h"
#include "trainhooks/summary/graph_def.h"

namespace trainhooks {

summary::GraphDef graph_def(const Graph& graph);

}  // namespace trainhooks
