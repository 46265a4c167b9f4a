// GraphInternal: the library's access to a Graph's representation (graph_state.h), kept out of
// Graph's public interface as leveldb keeps WriteBatch's behind WriteBatchInternal.
//
// For the units that evaluate the graph (session.cpp and what it calls). Everything else, the
// checkpoint code included, goes through Graph's public methods, which check their arguments.
//
//   internal::GraphState& gs = internal::GraphInternal::state(session.graph());
//
// Not thread-safe, as Graph.
#pragma once

#include "graph_state.h"
#include "trainhooks/graph.h"

namespace trainhooks::internal {

class GraphInternal {
 public:
  static GraphState& state(Graph& graph) { return *graph.state_; }
  static const GraphState& state(const Graph& graph) { return *graph.state_; }
};

}  // namespace trainhooks::internal
