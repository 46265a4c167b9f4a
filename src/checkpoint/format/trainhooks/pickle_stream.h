// Writing LibTorch pickles in torch::pickle_save's container (a zip that torch.load reads) as a
// stream: the tensors' bytes go from their storage to the sink, each read once.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <vector>

#include "checkpoint/format/trainhooks/torch_zip_writer.h"

namespace c10 {
struct StorageImpl;
}

namespace trainhooks::internal {

// torch::pickle_save's container (a zip that torch.load reads), streamed instead of built in
// memory: the tensors' bytes go from their storage to the sink, each read once. The records come
// in torch::jit::writeArchiveAndTensors' order, the storages before the pickle, so the small
// values of the pickled object may still change while its tensors are being written.
class PickleStream {
 public:
  // Pickles `value` to learn its tensors; writes nothing yet.
  PickleStream(const c10::IValue& value, const std::function<void(const void*, size_t)>& sink);
  // The tensors' records.
  void write_tensors();
  // The pickle of `value` as it is now (it holds the same tensors), and the end of the archive.
  void finish(const c10::IValue& value);

 private:
  TorchZipWriter writer_;
  std::vector<at::Tensor> tensors_;
  std::vector<const c10::StorageImpl*> storages_;
};

// The pickle of `value` in its container, to `sink`.
void pickle_to(const c10::IValue& value, const std::function<void(const void*, size_t)>& sink);

// What torch::pickle_save(value) returns, built the same way.
std::vector<char> pickle_bytes(const c10::IValue& value);

}  // namespace trainhooks::internal
