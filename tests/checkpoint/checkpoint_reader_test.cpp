#include "trainhooks/checkpoint/checkpoint_reader.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/optim/adam.h>
#include <torch/serialize/input-archive.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_test_model.h"
#include "test_util.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;
namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::Pair;
using th::testing::error_message;

namespace checkpoint_reader_test {

class CheckpointReaderTest : public th::testing::CheckpointTestDir {};

TEST_F(CheckpointReaderTest, ReadsVariablesInFileOrderWithShapesAndDtypes) {
  th::CheckpointReader reader(dir.file("model.ckpt-0"));
  EXPECT_EQ(reader.path(), dir.file("model.ckpt-0"));
  EXPECT_EQ(reader.trainstate_path(), dir.file("model.ckpt-0.trainstate"));
  EXPECT_THAT(reader.variable_names(), ElementsAre("net/weight", "net/bias", "scale"));
  EXPECT_TRUE(reader.has_tensor("net/bias"));
  EXPECT_FALSE(reader.has_tensor("net/kernel"));
  EXPECT_THAT(reader.variable_to_shape_map(),
              ElementsAre(Pair("net/bias", std::vector<int64_t>{2}),
                          Pair("net/weight", std::vector<int64_t>{2, 3}),
                          Pair("scale", std::vector<int64_t>{1})));
  EXPECT_THAT(reader.variable_to_dtype_map(),
              ElementsAre(Pair("net/bias", at::kFloat), Pair("net/weight", at::kFloat),
                          Pair("scale", at::kLong)));
  EXPECT_TRUE(
      at::equal(reader.get_tensor("net/weight"), at::arange(6, at::kFloat).reshape({2, 3}) * 0.25));
  EXPECT_TRUE(at::equal(reader.get_tensor("scale"), at::tensor({3}, at::kLong)));
}

TEST_F(CheckpointReaderTest, ReadsTheTrainingState) {
  th::CheckpointReader reader(dir.file("model.ckpt-2"));
  EXPECT_EQ(reader.global_step(), 2);
  EXPECT_EQ(reader.wall_time(), 1.0e9 + 10.5);
  const auto optimizers = reader.optimizers();
  ASSERT_EQ(optimizers.size(), 1u);
  EXPECT_EQ(optimizers[0].train_op, "train");
  EXPECT_THAT(optimizers[0].learning_rates, ElementsAre(0.05));
  EXPECT_EQ(optimizers[0].type, "adam");
  // Adam's two moments of net/weight [2, 3] and net/bias [2], in floats.
  EXPECT_EQ(optimizers[0].state_bytes, 2u * (6 + 2) * 4);
  std::vector<std::string> names;
  for (const auto& [name, t] : reader.optimizer_tensors("train")) names.push_back(name);
  EXPECT_THAT(names, ElementsAre("0/exp_avg", "0/exp_avg_sq", "1/exp_avg", "1/exp_avg_sq"));
  // An archive that Optimizer::load reads, made from those tensors.
  const std::string archive_bytes = reader.optimizer_archive("train");
  torch::serialize::InputArchive archive;
  archive.load_from(archive_bytes.data(), archive_bytes.size());
  torch::optim::Adam adam({at::zeros({2, 3}), at::zeros({2})}, torch::optim::AdamOptions(0.05));
  adam.load(archive);
  EXPECT_EQ(adam.state().size(), 2u);
  // Two batches of 3.
  EXPECT_THAT(reader.input_positions(), ElementsAre(Pair("data/x", th::InputPosition{0, 6})));
  EXPECT_THAT(reader.state_keys(), ElementsAre("test/counter"));
  EXPECT_EQ(reader.state("test/counter"), "7");
  ASSERT_TRUE(reader.cpu_rng_state().has_value());
  EXPECT_EQ(reader.cpu_rng_state()->scalar_type(), at::kByte);
  EXPECT_EQ(reader.variables_file_bytes(), fs::file_size(dir.file("model.ckpt-2")));
  EXPECT_EQ(reader.trainstate_file_bytes(), fs::file_size(dir.file("model.ckpt-2.trainstate")));
  EXPECT_EQ(reader.total_bytes(), reader.variables_file_bytes() + reader.trainstate_file_bytes());
}

TEST_F(CheckpointReaderTest, UnknownNamesAreNotFoundErrorsNamingNameAndCheckpoint) {
  th::CheckpointReader reader(dir.file("model.ckpt-2"));
  const std::string path = dir.file("model.ckpt-2");
  EXPECT_EQ(error_message<th::NotFoundError>([&] { reader.get_tensor("net/kernel"); }),
            "Variable 'net/kernel' not found in checkpoint '" + path + "'");
  EXPECT_EQ(error_message<th::NotFoundError>([&] { reader.optimizer_archive("eval"); }),
            "No optimizer state for train op 'eval' in checkpoint '" + path + "'");
  EXPECT_EQ(error_message<th::NotFoundError>([&] { reader.state("hook/none"); }),
            "No state for key 'hook/none' in checkpoint '" + path + "'");
}

TEST_F(CheckpointReaderTest, MissingOrCorruptFilesAreNamed) {
  const std::string missing = dir.file("model.ckpt-9");
  EXPECT_EQ(error_message<th::NotFoundError>([&] { th::CheckpointReader r(missing); }),
            "Checkpoint file '" + missing + ".trainstate' does not exist");
  const std::string path = dir.file("model.ckpt-2");
  th::testing::flip_byte(path, 100);
  EXPECT_EQ(error_message<th::DataLossError>([&] { th::CheckpointReader r(path); }),
            "Checkpoint file '" + path + "' is corrupt: its CRC32C does not match the one " +
                "recorded in '" + path + ".trainstate'");
}

TEST_F(CheckpointReaderTest, LoadCheckpointOfADirectoryReadsItsLatestCheckpoint) {
  EXPECT_EQ(th::resolve_checkpoint(dir.path()), dir.file("model.ckpt-2"));
  EXPECT_EQ(th::resolve_checkpoint(dir.file("model.ckpt-0")), dir.file("model.ckpt-0"));
  EXPECT_EQ(th::load_checkpoint(dir.path()).global_step(), 2);
  EXPECT_EQ(th::load_checkpoint(dir.file("model.ckpt-0")).global_step(), 0);
}

TEST_F(CheckpointReaderTest, ListsTheStateFilesCheckpointsOldestFirst) {
  const auto listed = th::list_checkpoints(dir.path());
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].path, dir.file("model.ckpt-0"));
  EXPECT_EQ(listed[0].step, 0);
  EXPECT_EQ(listed[0].timestamp, 1.0e9);
  EXPECT_TRUE(listed[0].exists());
  EXPECT_EQ(listed[0].bytes, fs::file_size(dir.file("model.ckpt-0")) +
                                 fs::file_size(dir.file("model.ckpt-0.trainstate")));
  EXPECT_FALSE(listed[0].latest);
  EXPECT_EQ(listed[1].path, dir.file("model.ckpt-2"));
  EXPECT_EQ(listed[1].step, 2);
  EXPECT_EQ(listed[1].timestamp, 1.0e9 + 10.5);
  EXPECT_TRUE(listed[1].latest);
}

TEST_F(CheckpointReaderTest, ListReportsMissingFilesWithoutReadingThem) {
  fs::remove(dir.file("model.ckpt-0.trainstate"));
  th::testing::flip_byte(dir.file("model.ckpt-2"), 100);  // not read: listed as it is
  const auto listed = th::list_checkpoints(dir.path());
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_TRUE(listed[0].variables_file_exists);
  EXPECT_FALSE(listed[0].trainstate_file_exists);
  EXPECT_FALSE(listed[0].exists());
  EXPECT_EQ(listed[0].bytes, fs::file_size(dir.file("model.ckpt-0")));
  EXPECT_TRUE(listed[1].exists());
}

TEST_F(CheckpointReaderTest, StepOfAPathWithoutSuffixComesFromTheTrainingState) {
  th::testing::CheckpointTestModel m;
  th::Session s(m.g);
  m.steps(s, 1);
  th::compat::v1::Saver(m.g, {.env = fe.env()}).save(s, dir.file("final"));
  const auto listed = th::list_checkpoints(dir.path());
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(listed[2].path, dir.file("final"));
  EXPECT_EQ(listed[2].step, 1);
  EXPECT_TRUE(listed[2].latest);
}

TEST(CheckpointDirectoryErrorsTest, NameTheDirectoryAndWhatIsWrong) {
  th::testing::TempDir dir;
  const std::string missing = dir.file("nope");
  EXPECT_EQ(error_message<th::NotFoundError>([&] { th::list_checkpoints(missing); }),
            "Checkpoint directory '" + missing + "' does not exist");
  EXPECT_EQ(error_message<th::NotFoundError>([&] { th::list_checkpoints(dir.path()); }),
            "No checkpoint state file in '" + dir.path() + "'");
  EXPECT_EQ(error_message<th::NotFoundError>([&] { th::load_checkpoint(dir.path()); }),
            "No checkpoint state file in '" + dir.path() + "'");
  std::ofstream(dir.file("file")) << "x";
  EXPECT_EQ(error_message<th::InvalidArgument>([&] { th::list_checkpoints(dir.file("file")); }),
            "'" + dir.file("file") + "' is not a checkpoint directory");
  std::ofstream(dir.file("checkpoint")) << "model_checkpoint_path: \"a\"\nbogus: 1\n";
  EXPECT_THAT(error_message<th::DataLossError>([&] { th::list_checkpoints(dir.path()); }),
              ::testing::HasSubstr(dir.file("checkpoint")));
}

}  // namespace checkpoint_reader_test
