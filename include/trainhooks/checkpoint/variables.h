// Saving and loading a graph's variables as one file that Python reads with torch.load(path)
// (a dict name -> tensor in LibTorch's pickle format).
//
//   th::save_variables(g, "model.pt");   // crash-safe: temp file, fsync, rename, fsync dir
//   th::load_variables(g, "model.pt");   // every variable of g must be in the file
//
// Full training checkpoints (optimizer state, global step, inputs, retention) are the Saver's.
#pragma once

#include <string>

namespace trainhooks {

class Graph;

void save_variables(const Graph& graph, const std::string& path);
// Throws NotFoundError for a missing file or variable, DataLossError for an unreadable file,
// InvalidArgument for a shape or dtype that does not match the graph's variable.
void load_variables(Graph& graph, const std::string& path);

}  // namespace trainhooks
