// The JSON of the board's graph and hyperparameter views (board_api.cpp checks the requests):
//
//   /api/graph?run=R   {"run", "step", "wall_time", "nodes": [{"name", "op", "device",
//                      "inputs": [...], "attrs": [{"name", "value"}]}]}: the run's GraphDef, each
//                      attr's value as text ("DT_FLOAT", "[?, 784]", "adam")
//   /api/hparams       {"hparams": [{"name", "type"}], "metrics": [{"tag", "group",
//                      "display_name"}], "sessions": [{"run", "group_name", "status",
//                      "start_time", "end_time", "values": [...], "metrics": [{"value", "step"}
//                      or null]}]}: one session per run with a session start info, its values
//                      and final metrics in the order of the "hparams" and "metrics" columns
//
// Names from the logs are JSON strings, never object keys: a name is data, whatever it holds.
#pragma once
#include <string>

#include "trainhooks/board/logdir_index.h"
#include "trainhooks/summary/graph_def.h"

namespace trainhooks::board::internal {

// An attr's value as the graph view shows it.
std::string attr_text(const summary::AttrValue& value);

std::string graph_json(const std::string& run, const RunGraph& graph, const summary::GraphDef& def);

// Over every run of the index: the hyperparameters' and metrics' columns are the union of the
// runs' experiments (and start infos), hyperparameters by name, metrics in the order the runs
// (by name) declare them. A metric's value is the last point, in step order, of its tag in the
// run `<run>/<group>` (the run itself for an empty group); null when there is none.
std::string hparams_json(const LogdirIndex& index);

}  // namespace trainhooks::board::internal
