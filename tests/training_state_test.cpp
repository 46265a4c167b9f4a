// The mapping between a graph and a checkpoint's contents (src/checkpoint/training_state.cpp),
// through Saver::save and Saver::restore: what is captured, what a restore checks before it
// changes anything, and what it applies.
#include "trainhooks/training_state.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "checkpoint/format/trainhooks/trainhooks_format.h"
#include "checkpoint/saver_test_model.h"
#include "trainhooks/checkpoint/checkpoint_reader.h"
#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/errors.h"
#include "util/crc32c.h"

namespace th = trainhooks;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace training_state_test {

using namespace th::testing::saver_fixture;

class TrainingStateTest : public SaverTest {};

TEST_F(TrainingStateTest, RestoreIntoAFreshGraphIsBitIdenticalAndTrainingContinuesIdentically) {
  Model a(1);
  th::Session sa(a.g);
  a.steps(sa, 5);  // Adam moments, global step 5, input mid-epoch
  a.counter.value = 42;
  V1Saver saver_a(a.g, options());
  const std::string path = saver_a.save(sa, dir.file("model.ckpt"), a.g.global_step_value());

  Model b(2);
  th::Session sb(b.g);
  ASSERT_FALSE(torch::equal(a.values()[0], b.values()[0]));
  V1Saver(b.g, options()).restore(sb, path);
  EXPECT_THAT(fe.log->messages(), ElementsAre("Restoring parameters from " + path));
  expect_same(a.values(), b.values());
  EXPECT_EQ(b.g.global_step_value(), 5);
  EXPECT_EQ(b.g.input_position(b.batch[0]), a.g.input_position(a.batch[0]));
  EXPECT_EQ(b.g.input_position(b.batch[0]), (th::InputPosition{0, 15}));
  EXPECT_EQ(b.counter.value, 42);

  // One more step in both: equal only if the Adam moments and step counts were restored too.
  a.steps(sa, 3);
  b.steps(sb, 3);
  expect_same(a.values(), b.values());
  EXPECT_EQ(b.g.global_step_value(), 8);
  EXPECT_TRUE(warnings().empty()) << ::testing::PrintToString(warnings());
}

// The input positions are global (all shards together) and the checkpoint records its world
// size: a checkpoint of 2 ranks continues the same order on 1, and says so once.
TEST_F(TrainingStateTest, ACheckpointOfTwoRanksResumesOnOneAtTheSameGlobalPosition) {
  Model a(1);
  a.g.shard_inputs(2, 0);
  th::Session sa(a.g);
  a.steps(sa, 2);  // 2 batches of 3 of this shard: 12 examples of the epoch's 16 for both
  EXPECT_EQ(a.g.input_position(a.batch[0]), (th::InputPosition{0, 12}));
  const std::string path = V1Saver(a.g, options()).save(sa, dir.file("model.ckpt"), 2);
  EXPECT_EQ(th::CheckpointReader(path).input_positions().at("data/x"), (th::InputPosition{0, 12}));

  Model b(2);
  th::Session sb(b.g);
  V1Saver(b.g, options()).restore(sb, path);
  EXPECT_EQ(b.g.input_position(b.batch[0]), (th::InputPosition{0, 12}));
  EXPECT_THAT(fe.log->messages(),
              ElementsAre("Restoring parameters from " + path,
                          "Resuming a 2-rank checkpoint on 1 rank: every input continues its "
                          "epoch's order where the 2 ranks left it ('data/x' at example 12 of "
                          "epoch 0), each example of the epoch read once; the global batch "
                          "changes with the number of ranks (each rank's batch stays; "
                          "InputOptions::global_batch_size keeps the global one instead)"));
  // The last 4 examples of epoch 0 (2 batches: 3 and 1), then epoch 1.
  b.steps(sb, 2);
  EXPECT_EQ(b.g.input_position(b.batch[0]), (th::InputPosition{0, 16}));
  b.steps(sb, 1);
  EXPECT_EQ(b.g.input_position(b.batch[0]), (th::InputPosition{1, 3}));
  EXPECT_TRUE(warnings().empty()) << ::testing::PrintToString(warnings());
}

// A checkpoint of an earlier version has no world size, and its offsets count one shard's
// examples: it was resumed on as many ranks as wrote it, and still is.
TEST_F(TrainingStateTest, ACheckpointWithoutAWorldSizeCountsOneShardsExamples) {
  Model a(1);
  a.g.shard_inputs(2, 1);
  th::Session sa(a.g);
  a.steps(sa, 2);
  th::internal::CheckpointContents c;
  static_cast<th::TrainingSnapshot&>(c) = th::capture_training_state(a.g, /*copy=*/true);
  c.path = dir.file("old.ckpt");
  c.world_size.reset();
  c.inputs.at("data/x").offset = 6;  // as an earlier version wrote it: 6 examples of this shard
  th::internal::write_checkpoint_files(c);
  EXPECT_FALSE(th::internal::decode_checkpoint(c.path).world_size.has_value());

  Model b(2);
  b.g.shard_inputs(2, 1);
  th::Session sb(b.g);
  V1Saver(b.g, options()).restore(sb, c.path);
  EXPECT_EQ(b.g.input_position(b.batch[0]), (th::InputPosition{0, 12}));
  EXPECT_THAT(fe.log->messages(), ElementsAre("Restoring parameters from " + c.path));
  // And the next batch is the one the writer would have read.
  a.steps(sa, 1);
  b.steps(sb, 1);
  expect_same(a.values(), b.values());
}

TEST_F(TrainingStateTest, RestoreOverTrainedStateResetsOptimizerStateAndLearningRate) {
  Model a;
  th::Session sa(a.g);
  V1Saver saver(a.g, options());
  const auto initial = a.values();
  const std::string path = saver.save(sa, dir.file("model.ckpt"), 0);  // no optimizer state yet
  a.steps(sa, 4);
  th::set_learning_rate(a.g.optimizer(a.train), 0.5);
  saver.restore(sa, path);
  expect_same(a.values(), initial);
  EXPECT_EQ(a.g.global_step_value(), 0);
  EXPECT_TRUE(a.g.optimizer(a.train).state().empty());
  EXPECT_DOUBLE_EQ(th::learning_rate(a.g.optimizer(a.train)), 0.05);
}

TEST_F(TrainingStateTest, RngStateIsSavedAndRestored) {
  Model m;
  th::Session s(m.g);
  V1Saver saver(m.g, options());
  torch::manual_seed(123);
  const std::string path = saver.save(s, dir.file("model.ckpt"), 0);
  const at::Tensor after_save = torch::rand({6});
  torch::rand({100});  // move the generator on
  saver.restore(s, path);
  EXPECT_TRUE(torch::equal(torch::rand({6}), after_save));
}

TEST_F(TrainingStateTest, StateProviderKeysMissingFromEitherSideAreHandled) {
  Model a;
  Counter gone;
  gone.value = 9;
  a.g.register_state("test/gone", &gone);
  a.counter.value = 3;
  th::Session sa(a.g);
  const std::string path = V1Saver(a.g, options()).save(sa, dir.file("model.ckpt"), 0);

  Model b;
  Counter added;
  added.value = 77;
  b.g.register_state("test/added", &added);
  th::Session sb(b.g);
  V1Saver(b.g, options()).restore(sb, path);
  EXPECT_EQ(b.counter.value, 3);
  EXPECT_EQ(added.value, 77);  // not in the file: left as it is
  EXPECT_THAT(warnings(), ElementsAre(HasSubstr("Ignoring state 'test/gone'")));
}

TEST_F(TrainingStateTest, AProviderThatRejectsItsBytesChangesNothing) {
  struct Picky : th::StateProvider {
    std::string save_state() const override { return "x"; }
    void load_state(std::string_view) override { throw th::InvalidArgument("picky refuses"); }
  } picky;
  Model m;
  m.g.register_state("test/z_picky", &picky);
  th::Session s(m.g);
  V1Saver saver(m.g, options());
  m.counter.value = 1;
  const std::string path = saver.save(s, dir.file("model.ckpt"), 0);
  m.steps(s, 2);
  m.counter.value = 2;
  const auto before = m.values();
  EXPECT_THAT(message_of<th::InvalidArgument>([&] { saver.restore(s, path); }),
              AllOf(HasSubstr("test/z_picky"), HasSubstr("picky refuses")));
  expect_same(m.values(), before);
  EXPECT_EQ(m.g.global_step_value(), 2);
  EXPECT_EQ(m.counter.value, 2);  // loaded, then rolled back
}

TEST_F(TrainingStateTest, MismatchedVariablesAreNamed) {
  th::Graph a;
  a.variable("w", torch::ones({2}));
  a.variable("v", torch::ones({1}));
  th::Session sa(a);
  const std::string path = V1Saver(a, options()).save(sa, dir.file("model.ckpt"), 0);

  th::Graph shape;
  shape.variable("w", torch::ones({3}));
  th::Session s1(shape);
  EXPECT_THAT(message_of<th::InvalidArgument>([&] { V1Saver(shape, options()).restore(s1, path); }),
              AllOf(HasSubstr("'w'"), HasSubstr("shape [2]"), HasSubstr("shape [3]")));

  th::Graph dtype;
  dtype.variable("w", torch::ones({2}, torch::kDouble));
  th::Session s2(dtype);
  EXPECT_THAT(message_of<th::InvalidArgument>([&] { V1Saver(dtype, options()).restore(s2, path); }),
              AllOf(HasSubstr("'w'"), HasSubstr("Double")));

  th::Graph missing;
  missing.variable("u", torch::ones({2}));
  th::Session s3(missing);
  EXPECT_THAT(message_of<th::NotFoundError>([&] { V1Saver(missing, options()).restore(s3, path); }),
              HasSubstr("Variable 'u'"));
  EXPECT_TRUE(torch::equal(missing.variable_value(missing.find("u")), torch::ones({2})));
}

TEST_F(TrainingStateTest, AnOptimizerStateOfAnotherKindIsRejected) {
  Model a;
  th::Session sa(a.g);
  a.steps(sa, 1);
  const std::string path = V1Saver(a.g, options()).save(sa, dir.file("model.ckpt"), 1);

  th::Graph b;
  auto net = torch::nn::Linear(3, 2);
  b.add_module("net", net);
  auto loss = b.op("loss", [=](th::Run& r) { return net->weight.sum(); });
  auto train = b.minimize("train", loss, th::sgd(0.1, {.momentum = 0.9}));
  th::Session sb(b);
  sb.run({train});
  const auto before = b.variable_value(b.find("net/weight")).clone();
  EXPECT_THAT(message_of<th::InvalidArgument>([&] { V1Saver(b, options()).restore(sb, path); }),
              AllOf(HasSubstr("train op 'train'"), HasSubstr("sgd")));
  EXPECT_TRUE(torch::equal(b.variable_value(b.find("net/weight")), before));
}

// A restore reads each file once: the decoded tensors point into that memory (64-byte aligned, one
// allocation per file), and the restored variables take it instead of a copy (the same tensor
// objects on the storages of their records: checkpoint/adopt_storage.h).
TEST_F(TrainingStateTest, DecodedTensorsShareTheFilesMemoryAndRestoredVariablesTakeIt) {
  Model a;
  th::Session sa(a.g);
  a.steps(sa, 2);
  const std::string path = V1Saver(a.g, options()).save(sa, dir.file("model.ckpt"), 2);

  Model b(2);
  th::Session sb(b.g);
  std::vector<const void*> before;
  for (th::Node v : b.g.variables()) before.push_back(b.g.variable_value(v).data_ptr());
  {
    const th::internal::CheckpointContents cp = th::internal::decode_checkpoint(path);
    ASSERT_EQ(cp.variables.size(), 2u);
    const auto* w = static_cast<const char*>(cp.variables[0].second.data_ptr());
    const auto* bias = static_cast<const char*>(cp.variables[1].second.data_ptr());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(w) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(bias) % 64, 0u);
    EXPECT_LT(static_cast<uint64_t>(std::abs(bias - w)), cp.variables_bytes);
    EXPECT_EQ(cp.variables[0].second.storage().data_ptr().get_deleter(),
              cp.variables[1].second.storage().data_ptr().get_deleter());
  }
  V1Saver(b.g, options()).restore(sb, path);
  expect_same(a.values(), b.values());
  std::vector<const void*> after;
  for (th::Node v : b.g.variables()) after.push_back(b.g.variable_value(v).data_ptr());
  ASSERT_EQ(after.size(), 2u);
  EXPECT_NE(after[0], before[0]);
  EXPECT_NE(after[1], before[1]);
  EXPECT_EQ(b.g.variable_value(b.g.variables()[0]).storage().data_ptr().get_deleter(),
            b.g.variable_value(b.g.variables()[1]).storage().data_ptr().get_deleter());
}

// Format 1 held every optimizer's state as an Optimizer::save archive (format 2 still does for
// optimizers other than LibTorch's built-in ones): such a checkpoint restores the same state.
TEST_F(TrainingStateTest, OptimizerStateHeldAsAnArchiveRestoresTheSame) {
  Model a;
  th::Session sa(a.g);
  a.steps(sa, 3);
  V1Saver saver(a.g, options());
  const std::string path = saver.save(sa, dir.file("model.ckpt"), 3);

  th::internal::CheckpointContents cp = th::internal::decode_checkpoint(path);
  auto& opt = cp.optimizers.at("train");
  ASSERT_TRUE(opt.is_encoded());
  opt.archive = th::CheckpointReader(path).optimizer_archive("train");
  opt.encoded = c10::IValue();
  cp.path = dir.file("v1.ckpt-3");
  th::internal::write_checkpoint_files(cp);
  // The header of a format 1 file: version 1, and the header CRC over it.
  std::string side = read_bytes(cp.path + ".trainstate");
  side[8] = 1;
  const uint32_t crc = th::crc32c::mask(th::crc32c::value(side.data(), 24));
  for (int i = 0; i < 4; ++i) side[24 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  write_bytes(cp.path + ".trainstate", side);
  EXPECT_EQ(th::CheckpointReader(cp.path).optimizers()[0].type, "");

  Model b(2), c(3);
  th::Session sb(b.g), sc(c.g);
  V1Saver(b.g, options()).restore(sb, path);
  V1Saver(c.g, options()).restore(sc, cp.path);
  b.steps(sb, 2);
  c.steps(sc, 2);
  expect_same(b.values(), c.values());
}

TEST_F(TrainingStateTest, RestoringAnotherOptimizersStateSaysSoAndChangesNothing) {
  Model a;
  th::Session sa(a.g);
  a.steps(sa, 1);
  const std::string path = V1Saver(a.g, options()).save(sa, dir.file("model.ckpt"), 1);
  Model b(2, th::sgd(0.1, {.momentum = 0.9}));
  th::Session sb(b.g);
  const auto before = b.values();
  EXPECT_EQ(message_of<th::InvalidArgument>([&] { V1Saver(b.g, options()).restore(sb, path); }),
            "The optimizer state of train op 'train' in the checkpoint '" + path +
                "' does not fit its sgd optimizer: the checkpoint holds the state of an optimizer "
                "of type 'adam'");
  expect_same(b.values(), before);
}

}  // namespace training_state_test
