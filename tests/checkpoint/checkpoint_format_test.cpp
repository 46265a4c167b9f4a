#include "trainhooks/checkpoint/checkpoint_format.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/zeros.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "checkpoint/saver_test_model.h"
#include "test_util.h"
#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/errors.h"
#include "trainhooks/session.h"
#include "trainhooks/training_state.h"

namespace th = trainhooks;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace checkpoint_format_test {

using namespace th::testing::saver_fixture;

class CheckpointFormatTest : public SaverTest {};

TEST_F(CheckpointFormatTest, TheFormatsAreRegisteredByNameTheDefaultFirst) {
  EXPECT_THAT(th::checkpoint_format_names(), ElementsAre("trainhooks", "safetensors"));
  EXPECT_EQ(th::default_checkpoint_format().name(), "trainhooks");
  EXPECT_TRUE(th::default_checkpoint_format().holds_training_state());
  EXPECT_FALSE(th::checkpoint_format("safetensors").holds_training_state());
  EXPECT_EQ(message_of<th::NotFoundError>([] { th::checkpoint_format("onnx"); }),
            "Unknown checkpoint format 'onnx' (known: trainhooks, safetensors)");
  EXPECT_EQ(th::checkpoint_format_of("out/model.safetensors").name(), "safetensors");
  EXPECT_EQ(th::checkpoint_format_of("runs/model.ckpt-300").name(), "trainhooks");
}

// Only the format knows the two-file layout; everything else asks it.
TEST_F(CheckpointFormatTest, TheDefaultFormatsFilesAreTheVariablesAndTheTrainingState) {
  const auto& f = th::default_checkpoint_format();
  EXPECT_THAT(f.files("runs/model.ckpt-3"),
              ElementsAre("runs/model.ckpt-3", "runs/model.ckpt-3.trainstate"));
  EXPECT_EQ(f.checkpoint_of("runs/model.ckpt-3.trainstate"), "runs/model.ckpt-3");
  EXPECT_EQ(f.checkpoint_of("runs/model.ckpt-3"), "runs/model.ckpt-3");
  const auto& st = th::checkpoint_format("safetensors");
  EXPECT_THAT(st.files("m.safetensors"), ElementsAre("m.safetensors"));
  EXPECT_EQ(st.checkpoint_of("runs/model.ckpt-3"), "");
}

// The default format's bytes carry the whole snapshot: another graph restored from them trains on
// exactly as the original does.
TEST_F(CheckpointFormatTest, ToBytesAndFromBytesCarryTheWholeTrainingState) {
  Model a(1);
  th::Session sa(a.g);
  a.steps(sa, 3);
  a.counter.value = 5;
  const th::TrainingSnapshot snap = th::capture_training_state(a.g);
  const std::string bytes = th::default_checkpoint_format().to_bytes(snap);

  Model b(2);
  th::Session sb(b.g);
  const th::TrainingSnapshot back = th::default_checkpoint_format().from_bytes(bytes, "a buffer");
  EXPECT_EQ(back.global_step, 3);
  EXPECT_EQ(back.world_size, 1);
  th::restore_training_state(b.g, back, "a buffer", fe.env());
  expect_same(b.values(), a.values());
  EXPECT_EQ(b.counter.value, 5);
  a.steps(sa, 2);
  b.steps(sb, 2);
  expect_same(b.values(), a.values());
  EXPECT_THAT(warnings(), ElementsAre());
}

TEST_F(CheckpointFormatTest, BytesThatAreNoSnapshotAreDataLossNamingTheirSource) {
  EXPECT_THAT(message_of<th::DataLossError>([] {
                th::default_checkpoint_format().from_bytes("not a pickle",
                                                           "the broadcast of rank 0");
              }),
              HasSubstr("The training state from the broadcast of rank 0 cannot be unpickled"));
  EXPECT_THAT(message_of<th::DataLossError>(
                  [] { th::checkpoint_format("safetensors").from_bytes("\x02", "a message"); }),
              HasSubstr("a message"));
}

TEST_F(CheckpointFormatTest, ASnapshotThatDoesNotFitIsRefusedBeforeAnythingChanges) {
  Model a(1);
  th::Session sa(a.g);
  th::TrainingSnapshot snap = th::capture_training_state(a.g);
  snap.variables[0].second = at::zeros({7});
  Model b(2);
  th::Session sb(b.g);
  const auto before = b.values();
  EXPECT_THAT(
      message_of<th::InvalidArgument>([&] { th::check_training_state(b.g, snap, "a snapshot"); }),
      HasSubstr("in the checkpoint 'a snapshot' has shape [7] and dtype Float"));
  EXPECT_THROW(th::restore_training_state(b.g, snap, "a snapshot", fe.env()), th::InvalidArgument);
  expect_same(b.values(), before);
}

// `trainhooks checkpoint export --format safetensors` and import_variables(): the variables go
// over, bit for bit; the importing graph's global step and optimizer state stay its own.
TEST_F(CheckpointFormatTest, VariablesExportedAsSafetensorsImportIntoAnotherGraph) {
  Model a(1);
  th::Session sa(a.g);
  a.steps(sa, 4);
  const std::string ckpt = th::Saver(a.g, saver_options()).write(sa, dir.file("model.ckpt-4"));
  th::export_checkpoint(ckpt, dir.file("model.safetensors"), "safetensors");

  Model b(2);
  th::Session sb(b.g, fe.env());
  b.steps(sb, 1);
  th::import_variables(sb, dir.file("model.safetensors"));
  expect_same(b.values(), a.values());
  EXPECT_EQ(b.g.global_step_value(), 1);
  EXPECT_THAT(fe.log->messages(th::LogLevel::kInfo),
              ElementsAre("Restoring parameters from " + dir.file("model.safetensors")));
  EXPECT_THAT(warnings(), ElementsAre());

  // A trainhooks checkpoint imports the same way (a warm start from another run's weights).
  Model c(3);
  th::Session sc(c.g);
  th::import_variables(sc, ckpt);
  expect_same(c.values(), a.values());
  EXPECT_EQ(c.g.global_step_value(), 0);
}

TEST_F(CheckpointFormatTest, AnImportNamesTheVariableTheFileLacks) {
  th::Graph g;
  g.variable("w", at::zeros({2}));
  th::Session s(g);
  const std::string path = dir.file("other.safetensors");
  {
    Model a(1);
    th::Session sa(a.g);
    th::TrainingSnapshot snap = th::capture_training_state(a.g);
    th::checkpoint_format("safetensors").write(snap, path);
  }
  EXPECT_EQ(message_of<th::NotFoundError>([&] { th::import_variables(s, path); }),
            "Variable 'w' is not in the checkpoint '" + path + "'");
  EXPECT_EQ(
      message_of<th::NotFoundError>([&] { th::import_variables(s, dir.file("none.safetensors")); }),
      "Safetensors file '" + dir.file("none.safetensors") + "' does not exist");
}

// A FIFO in a file's place is refused at once by every format (an open would wait for a writer).
TEST_F(CheckpointFormatTest, AFifoInPlaceOfAFileIsRefusedNotWaitedOn) {
  const std::string fifo = dir.file("model.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(message_of<th::FileError>([&] { th::checkpoint_format("safetensors").read(fifo); }),
            "Cannot read safetensors file '" + fifo + "': not a regular file");
  const std::string ckpt = dir.file("model.ckpt-1");
  ASSERT_EQ(::mkfifo(ckpt.c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((ckpt + ".trainstate").c_str(), 0600), 0);
  EXPECT_EQ(message_of<th::FileError>([&] { th::default_checkpoint_format().read(ckpt); }),
            "Cannot read checkpoint file '" + ckpt + ".trainstate': not a regular file");
}

// An independent reader, by the published layout (8-byte little-endian header length, the JSON
// header, the raw little-endian data): Python's json and torch.frombuffer read our file and find
// what torch.load finds in the checkpoint.
TEST_F(CheckpointFormatTest, PythonReadsTheExportedSafetensorsFileByItsLayout) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 with torch is not available";
  Model a(1);
  th::Session sa(a.g);
  a.steps(sa, 2);
  const std::string ckpt = th::Saver(a.g, saver_options()).write(sa, dir.file("model.ckpt-2"));
  const std::string out = dir.file("model.safetensors");
  int status = -1;
  const std::string cli = th::testing::run_command(std::string("timeout 60 ") + TRAINHOOKS_CLI +
                                                       " checkpoint export --format safetensors " +
                                                       ckpt + " -o " + out + " 2>&1",
                                                   status);
  ASSERT_EQ(status, 0) << cli;
  EXPECT_EQ(cli, "Wrote the variables of " + ckpt + " to " + out + " (safetensors)\n");
  const std::string script = dir.file("check.py");
  write_bytes(script,
              "import json, struct, sys, torch\n"
              "raw = open(sys.argv[1], 'rb').read()\n"
              "n = struct.unpack('<Q', raw[:8])[0]\n"
              "head = json.loads(raw[8:8 + n])\n"
              "meta = head.pop('__metadata__')\n"
              "dt = {'F32': torch.float32, 'I64': torch.int64}\n"
              "ref = torch.load(sys.argv[2])\n"
              "ok = sorted(head) == sorted(ref)\n"
              "for k, v in head.items():\n"
              "  b, e = v['data_offsets']\n"
              "  t = torch.frombuffer(bytearray(raw[8 + n + b:8 + n + e]), dtype=dt[v['dtype']])\n"
              "  ok = ok and torch.equal(t.reshape(v['shape']), ref[k])\n"
              "print(ok, meta, n % 8)\n");
  const std::string py = th::testing::run_command(
      "timeout 120 /usr/bin/python3 " + script + " " + out + " " + ckpt + " 2>&1", status);
  EXPECT_EQ(status, 0) << py;
  EXPECT_EQ(py, "True {'format': 'pt', 'global_step': '2'} 0\n");
}

TEST_F(CheckpointFormatTest, TheCommandNamesAnUnknownFormat) {
  Model a(1);
  th::Session sa(a.g);
  const std::string ckpt = th::Saver(a.g, saver_options()).write(sa, dir.file("model.ckpt-0"));
  int status = -1;
  const std::string out = th::testing::run_command(std::string("timeout 60 ") + TRAINHOOKS_CLI +
                                                       " checkpoint export --format onnx " + ckpt +
                                                       " -o " + dir.file("m.onnx") + " 2>&1",
                                                   status);
  EXPECT_NE(status, 0);
  EXPECT_EQ(out,
            "trainhooks checkpoint: Unknown checkpoint format 'onnx' (known: trainhooks, "
            "safetensors)\n");
}

}  // namespace checkpoint_format_test
