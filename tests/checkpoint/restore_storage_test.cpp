// A restore without a copy of the variables' bytes: each variable takes the storage its record was
// read and verified into (checkpoint/adopt_storage.h), keeps its tensor object, and gets its own
// storage back, untouched, whenever the restore fails.
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/zeros.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/saver_test_model.h"
#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/errors.h"
#include "trainhooks/session.h"
#include "trainhooks/training_state.h"

namespace th = trainhooks;
namespace fs = std::filesystem;

namespace restore_storage_test {

using namespace th::testing::saver_fixture;

// Two float variables, one big enough for the read on a second thread into huge-page-backed
// memory (8 MiB), one small, trained by SGD with momentum; one that is not trained; a registered
// counter.
struct BigModel {
  // `state`: registered under "test/counter" in place of `counter`.
  explicit BigModel(int seed, th::StateProvider* state = nullptr) {
    at::manual_seed(seed);
    big = g.variable("big", at::rand({2 << 20}));
    small = g.variable("small", at::rand({3, 5}));
    frozen = g.variable("frozen", at::rand({4}), {.trainable = false});
    const th::Node b = big, s = small;
    loss = g.op("loss", [b, s](th::Run& r) { return r[b].square().sum() + r[s].square().sum(); });
    train = g.minimize("train", loss, th::sgd(0.01, {.momentum = 0.9}));
    g.register_state("test/counter", state ? state : &counter);
    g.initialize();
  }
  const at::Tensor& value(th::Node v) const { return g.variable_value(v); }
  // Bit for bit: at::equal would take -0.0 for 0.0.
  static bool same_bits(const at::Tensor& a, const at::Tensor& b) {
    return a.nbytes() == b.nbytes() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
  }

  th::Graph g;
  th::Node big, small, frozen, loss, train;
  Counter counter;
};

// Values and data pointers of the variables, to show that nothing changed.
struct Before {
  explicit Before(const BigModel& m)
      : big(m.value(m.big).clone()),
        small(m.value(m.small).clone()),
        big_data(m.value(m.big).data_ptr()),
        small_data(m.value(m.small).data_ptr()) {}
  void expect_untouched(const BigModel& m) const {
    EXPECT_TRUE(BigModel::same_bits(m.value(m.big), big));
    EXPECT_TRUE(BigModel::same_bits(m.value(m.small), small));
    EXPECT_EQ(m.value(m.big).data_ptr(), big_data);
    EXPECT_EQ(m.value(m.small).data_ptr(), small_data);
  }
  at::Tensor big, small;
  const void* big_data;
  const void* small_data;
};

class RestoreStorageTest : public SaverTest {
 protected:
  // A checkpoint of BigModel(1) after 3 steps, with its values then.
  std::string written() {
    BigModel a(1);
    th::Session sa(a.g);
    for (int i = 0; i < 3; ++i) sa.run({a.train});
    a.counter.value = 7;
    th::Saver(a.g, saver_options()).write(sa, dir.file("model.ckpt"));
    saved_big = a.value(a.big).clone();
    saved_small = a.value(a.small).clone();
    return dir.file("model.ckpt");
  }
  at::Tensor saved_big, saved_small;
};

TEST_F(RestoreStorageTest, VariablesTakeTheReadStorageAndKeepTheirTensorObjects) {
  const std::string path = written();
  BigModel b(2);
  th::Session sb(b.g);
  sb.run({b.train});  // the optimizer holds the variables and has state
  auto& opt = b.g.optimizer(b.train);
  const at::TensorImpl* big_impl = b.value(b.big).unsafeGetTensorImpl();
  const at::TensorImpl* small_impl = b.value(b.small).unsafeGetTensorImpl();
  const void* big_data = b.value(b.big).data_ptr();
  ASSERT_TRUE(b.value(b.big).requires_grad());

  th::Saver(b.g, saver_options()).restore(sb, path);

  EXPECT_TRUE(BigModel::same_bits(b.value(b.big), saved_big));
  EXPECT_TRUE(BigModel::same_bits(b.value(b.small), saved_small));
  EXPECT_EQ(b.counter.value, 7);
  // The same tensor objects, now on the storage their bytes were read into: not copied.
  EXPECT_EQ(b.value(b.big).unsafeGetTensorImpl(), big_impl);
  EXPECT_EQ(b.value(b.small).unsafeGetTensorImpl(), small_impl);
  EXPECT_NE(b.value(b.big).data_ptr(), big_data);
  EXPECT_TRUE(b.value(b.big).requires_grad());
  EXPECT_TRUE(b.value(b.big).is_leaf());
  // The optimizer's parameters are those objects.
  ASSERT_EQ(opt.param_groups().size(), 1u);
  const auto& params = opt.param_groups()[0].params();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].unsafeGetTensorImpl(), big_impl);
  EXPECT_EQ(params[1].unsafeGetTensorImpl(), small_impl);
  EXPECT_EQ(params[0].data_ptr(), b.value(b.big).data_ptr());
}

TEST_F(RestoreStorageTest, TrainingContinuesAsFromTheSavedModel) {
  const std::string path = written();
  BigModel a(1), b(2);
  th::Session sa(a.g), sb(b.g);
  for (int i = 0; i < 3; ++i) sa.run({a.train});  // a is where the checkpoint was written
  sb.run({b.train});
  th::Saver(b.g, saver_options()).restore(sb, path);
  for (int i = 0; i < 2; ++i) {
    sa.run({a.train});
    sb.run({b.train});
  }
  EXPECT_TRUE(BigModel::same_bits(b.value(b.big), a.value(a.big)));
  EXPECT_TRUE(BigModel::same_bits(b.value(b.small), a.value(a.small)));
  EXPECT_EQ(b.g.global_step_value(), 5);
}

// The module's own parameters are the graph's variables: they see the restored values.
TEST_F(RestoreStorageTest, AModuleSeesTheRestoredParameters) {
  Model a(1);
  th::Session sa(a.g);
  a.steps(sa, 2);
  th::Saver(a.g, saver_options()).write(sa, dir.file("model.ckpt"));
  Model b(2);
  th::Session sb(b.g);
  th::Saver(b.g, saver_options()).restore(sb, dir.file("model.ckpt"));
  const auto params = b.net->parameters();
  const auto expected = a.net->parameters();
  ASSERT_EQ(params.size(), expected.size());
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(at::equal(params[i], expected[i]));
  b.steps(sb, 1);  // and it trains on
  EXPECT_FALSE(at::equal(b.net->parameters()[0], expected[0]));
}

TEST_F(RestoreStorageTest, ACorruptRecordChangesNoVariable) {
  const std::string path = written();
  const std::string bytes = read_bytes(path);
  BigModel b(2);
  th::Session sb(b.g);
  const Before before(b);
  th::testing::flip_byte(path, bytes.size() / 2);  // inside the big record
  EXPECT_EQ(message_of<th::DataLossError>([&] { th::Saver(b.g).restore(sb, path); }),
            "Checkpoint file '" + path + "' is corrupt: its CRC32C does not match the one " +
                "recorded in '" + path + ".trainstate'");
  before.expect_untouched(b);

  write_bytes(path, bytes.substr(0, bytes.size() - 1000));
  EXPECT_EQ(message_of<th::DataLossError>([&] { th::Saver(b.g).restore(sb, path); }),
            "Checkpoint file '" + path + "' is truncated: " + std::to_string(bytes.size() - 1000) +
                " bytes, " + std::to_string(bytes.size()) + " were written");
  before.expect_untouched(b);
  EXPECT_EQ(b.counter.value, 0);
}

// A failure after the variables took their new storage (a StateProvider that rejects its bytes)
// gives every variable its own storage back.
TEST_F(RestoreStorageTest, AFailureWhileApplyingGivesTheVariablesTheirStorageBack) {
  const std::string path = written();
  struct Refusing : Counter {
    void load_state(std::string_view) override { throw th::InvalidArgument("refused"); }
  } refusing;
  BigModel b(2, &refusing);
  th::Session sb(b.g);
  sb.run({b.train});
  const Before before(b);
  EXPECT_EQ(message_of<th::InvalidArgument>([&] { th::Saver(b.g).restore(sb, path); }),
            "Cannot restore state 'test/counter' from the checkpoint '" + path + "': refused");
  before.expect_untouched(b);
  EXPECT_EQ(b.g.global_step_value(), 1);
  // The variables still train, on their own storage.
  sb.run({b.train});
  EXPECT_EQ(b.value(b.big).data_ptr(), before.big_data);
  EXPECT_FALSE(BigModel::same_bits(b.value(b.big), before.big));
}

TEST_F(RestoreStorageTest, AMismatchFoundAfterTheSwapChangesNoVariable) {
  const std::string path = written();
  // The same names, the small one with another shape: the big one is swapped first, then the
  // check of the small one fails.
  at::manual_seed(2);
  th::Graph g;
  const th::Node big = g.variable("big", at::rand({2 << 20}));
  const th::Node small = g.variable("small", at::rand({5, 3}));
  const th::Node loss =
      g.op("loss", [big, small](th::Run& r) { return r[big].sum() + r[small].sum(); });
  g.minimize("train", loss, th::sgd(0.01, {.momentum = 0.9}));
  g.initialize();
  th::Session s(g);
  const at::Tensor big_before = g.variable_value(big).clone();
  const void* big_data = g.variable_value(big).data_ptr();
  EXPECT_THAT(message_of<th::InvalidArgument>([&] { th::Saver(g).restore(s, path); }),
              ::testing::HasSubstr("Variable 'small' in the checkpoint '" + path + "' has"));
  EXPECT_EQ(g.variable_value(big).data_ptr(), big_data);
  EXPECT_TRUE(BigModel::same_bits(g.variable_value(big), big_before));
}

// A variable restored into its record's storage is saved as that record alone, and a storage
// shared with another tensor (a view) is copied into instead, as before.
TEST_F(RestoreStorageTest, ARestoredVariableSavesAsItsRecordAndAViewIsCopiedInto) {
  const std::string path = written();
  BigModel b(2);
  th::Session sb(b.g);
  th::Saver saver(b.g, saver_options());
  saver.restore(sb, path);
  saver.write(sb, dir.file("again.ckpt"));
  EXPECT_EQ(fs::file_size(dir.file("again.ckpt")), fs::file_size(path));
  EXPECT_EQ(read_bytes(dir.file("again.ckpt")), read_bytes(path));

  // Another tensor on the small variable's storage: it must see what the restore puts there.
  const at::Tensor alias = b.value(b.small).detach().view({15});
  const void* small_data = b.value(b.small).data_ptr();
  {
    at::NoGradGuard no_grad;
    b.g.variable_value(b.small).zero_();
  }
  saver.restore(sb, path);
  EXPECT_EQ(b.value(b.small).data_ptr(), small_data);
  EXPECT_TRUE(at::equal(alias.view({3, 5}), saved_small));
}

// Python's torch.load reads what is saved after a restore: the values that were restored, each
// variable on a storage of its own elements (the records of one file were read into one
// allocation).
TEST_F(RestoreStorageTest, PythonTorchLoadReadsWhatIsSavedAfterARestore) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 with torch is not available; skipping the Python "
                    "interoperability check";
  }
  const std::string path = written();
  BigModel b(2);
  th::Session sb(b.g);
  th::Saver saver(b.g, saver_options());
  saver.restore(sb, path);
  saver.write(sb, dir.file("again.ckpt"));
  const std::string script = dir.file("check.py");
  write_bytes(script,
              "import sys, torch\n"
              "a, d = torch.load(sys.argv[1]), torch.load(sys.argv[2])\n"
              "print(sorted((k, v.numel(), v.storage().size()) for k, v in d.items()))\n"
              "print(sorted(a) == sorted(d) and all(torch.equal(a[k], d[k]) for k in a))\n");
  const std::string command = fmt::format("timeout 120 /usr/bin/python3 {} {} {} 2>&1", script,
                                          path, dir.file("again.ckpt"));
  int status = -1;
  const std::string out = th::testing::run_command(command, status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out,
            "[('big', 2097152, 2097152), ('frozen', 4, 4), ('small', 15, 15)]\n"
            "True\n");
}

// The storages a restore hands to the variables can be resized like those LibTorch makes (a
// variable that is not trained may be).
TEST_F(RestoreStorageTest, ARestoredVariableCanBeResized) {
  const std::string path = written();
  BigModel b(2);
  th::Session sb(b.g);
  const at::Tensor saved = th::Saver(b.g).read(sb, path).find_variable("frozen")->clone();
  th::Saver(b.g, saver_options()).restore(sb, path);
  at::Tensor frozen = b.g.variable_value(b.frozen);
  ASSERT_FALSE(frozen.requires_grad());
  frozen.resize_({6});
  EXPECT_TRUE(at::equal(frozen.slice(0, 0, 4), saved));
}

// CheckpointManager's restore takes the same path.
TEST_F(RestoreStorageTest, RestoreLatestAlsoTakesTheReadStorage) {
  BigModel a(1);
  th::Session sa(a.g);
  sa.run({a.train});
  th::CheckpointManager manager(dir.path(), {.env = fe.env()});
  manager.save(sa, 1);
  BigModel b(2);
  th::Session sb(b.g);
  const void* big_data = b.value(b.big).data_ptr();
  const at::TensorImpl* big_impl = b.value(b.big).unsafeGetTensorImpl();
  ASSERT_TRUE(th::CheckpointManager(dir.path(), {.env = fe.env()}).restore_latest(sb));
  EXPECT_TRUE(BigModel::same_bits(b.value(b.big), a.value(a.big)));
  EXPECT_EQ(b.value(b.big).unsafeGetTensorImpl(), big_impl);
  EXPECT_NE(b.value(b.big).data_ptr(), big_data);
}

}  // namespace restore_storage_test
