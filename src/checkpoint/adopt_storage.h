// Restoring variables without copying their bytes: a snapshot read from a file is owned by the
// restore, so its tensors' storages (each the size of its record, read and verified) can become
// the variables' storages instead of being copied into them.
#pragma once

#include <functional>

namespace trainhooks {

class Graph;
struct TrainingSnapshot;

namespace internal {

// Runs `apply` (which applies `snapshot` to `graph`, all or nothing, e.g. Saver::apply) with every
// variable that can take it holding its saved storage, so that apply's copy of it is a copy onto
// itself, which LibTorch skips. A variable takes the saved storage (Tensor::set_, so optimizers,
// modules and the graph keep the same tensor object) when both are CPU tensors of the same dtype
// and shape, each contiguous and alone on a storage of exactly its bytes; the others (another
// device, a view, tied to another tensor) are copied by `apply` as before. If `apply` throws,
// every variable gets its own storage back, untouched, and the snapshot its tensors; when it
// returns, the snapshot's entries for the variables that took their storage are those variables.
void apply_adopting_storage(Graph& graph, TrainingSnapshot& snapshot,
                            const std::function<void()>& apply);

}  // namespace internal
}  // namespace trainhooks
