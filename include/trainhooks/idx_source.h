// IDX files (MNIST, Fashion-MNIST) as an InputSource with components {"data", "target"}:
// images as float32 [B, 1, rows, cols], labels as int64 [B].
//
// The whole file pair is read and validated when the source is built; the pixels then stay in
// memory as bytes (47 MB for the 60000 Fashion-MNIST training images) and get_batch converts only
// the requested examples, through a 256-entry table, to (x / 255 - mean) / stddev (or x / 255).
// Files may be gzip-compressed or plain; the gzip magic bytes decide, not the file name.
//
//   auto train = th::fashion_mnist_source(th::kFashionMnistDefaultDir,
//   th::FashionMnistSplit::kTrain); auto batch = g.input("train", train, {.batch_size = 64,
//   .shuffle = true, .seed = 1});
//   // batch.data(): images [64, 1, 28, 28] float, batch.target(): labels [64] int64
//
// The components are named as dataset_source's (trainhooks/data.h), so replacing
// torch::data::datasets::MNIST by this source keeps the node names ("train/data").
//
// Validation (every failure is a trainhooks error naming the file; nothing is allocated for
// sizes the file cannot hold):
//   - a missing file: NotFoundError;
//   - anything but a regular file (a directory, a FIFO, a device; a symlink is followed):
//     FailedPreconditionError, without opening it for reading, so a FIFO never blocks;
//   - a wrong magic number, data type or number of dimensions, a truncated header or data, bytes
//     after the data (inside the file or after the end of its gzip stream), a corrupt gzip stream:
//     DataLossError naming the byte offset in the uncompressed stream where the file goes wrong
//     (a damaged gzip stream is always reported as such, with zlib's message, even when the
//     damage makes it inflate to more bytes than the header describes);
//   - a header claiming more data than the file can hold: DataLossError before any allocation;
//   - images and labels of different counts: DataLossError naming both files and counts;
//   - a label >= IdxOptions::num_classes (10 by default): DataLossError naming the labels file,
//     the first such label's index and its value, instead of a failure in the loss at the first
//     step that draws it.
//
// get_batch only reads the source, so concurrent calls are safe.
#pragma once

#include <memory>
#include <string>

#include "trainhooks/input.h"

namespace trainhooks {

// The Fashion-MNIST training set's pixel mean and standard deviation (of x / 255).
inline constexpr double kFashionMnistMean = 0.2860;
inline constexpr double kFashionMnistStddev = 0.3530;

// Where Debian's dataset-fashion-mnist package installs the four .gz files.
inline constexpr const char* kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";

struct IdxOptions {
  // Pixels become (x / 255 - mean) / stddev; with normalize = false, plain x / 255.
  // For MNIST use {.mean = 0.1307, .stddev = 0.3081}.
  bool normalize = true;
  double mean = kFashionMnistMean;
  double stddev = kFashionMnistStddev;
  // Labels must be 0 to num_classes - 1 (MNIST's and Fashion-MNIST's ten classes by default);
  // 1 to 256, and 256 accepts every byte.
  int num_classes = 10;
};

// Images from an IDX3 file of unsigned bytes (magic 0x00000803: count, rows, cols) and labels
// from an IDX1 file of unsigned bytes (magic 0x00000801: count).
std::shared_ptr<InputSource> idx_source(const std::string& images_path,
                                        const std::string& labels_path, IdxOptions options = {});

enum class FashionMnistSplit { kTrain, kTest };

// <dir>/train-images-idx3-ubyte and train-labels-idx1-ubyte (kTrain, 60000 examples) or
// t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (kTest, 10000), each as the plain file or,
// when there is none, with a .gz suffix. A missing file is a NotFoundError that names the paths
// and the Debian package dataset-fashion-mnist.
std::shared_ptr<InputSource> fashion_mnist_source(const std::string& dir, FashionMnistSplit split,
                                                  IdxOptions options = {});

}  // namespace trainhooks
