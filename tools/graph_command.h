// `trainhooks graph PATH`: the graph a training run wrote, as TensorFlow's GraphDef in text
// format (what `graph.pbtxt` holds).
//
// PATH is a checkpoint directory (its `graph.pbtxt`, which CheckpointSaverHook writes), a log
// directory (the last graph event of its event files, in name order), a `.pbtxt` file or one
// event file. A directory with both prints graph.pbtxt. The text goes to stdout; every error
// (a missing path, no graph there, a graph.pbtxt or graph event that does not parse, a corrupt
// event file) is one line on stderr, `trainhooks graph: <message>` naming the file, and the exit
// status is 1.
//
//   CLI::App app{"trainhooks"};
//   trainhooks::add_graph_command(app);
#pragma once

#include <CLI/CLI.hpp>

namespace trainhooks {

void add_graph_command(CLI::App& app);

}  // namespace trainhooks
