// Golden files: a checkpoint directory written by an earlier build of the library (the files under
// tests/checkpoint/golden/) is read into a graph bit for bit, and the same run writes the same
// bytes today. A change of the checkpoint code that alters a byte of the files fails here; a
// deliberate format change regenerates them (TRAINHOOKS_UPDATE_GOLDEN=1, docs/testing.md) and
// says so in docs/formats.md.
#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/saver_test_model.h"
#include "test_util.h"
#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/checkpoint/saver.h"
#include "trainhooks/session.h"

namespace th = trainhooks;
namespace fs = std::filesystem;

namespace golden_checkpoint_test {

using namespace th::testing::saver_fixture;

const std::string kGolden = TRAINHOOKS_SOURCE_DIR "/tests/checkpoint/golden/v2";
// The files of the golden directory, as CheckpointManager writes them.
const std::vector<std::string> kFiles = {"model.ckpt-4", "model.ckpt-4.trainstate", "checkpoint"};

// Four Adam steps of the fixture's model (a shuffled input mid-epoch, a registered counter),
// saved at step 4 by a CheckpointManager on a fake clock.
void write_run(const std::string& dir, Model& m, th::Session& s, th::testing::FakeEnv& fe) {
  m.steps(s, 4);
  m.counter.value = 7;
  th::CheckpointManager manager(dir, {.env = fe.env()});
  fe.clock->advance(12.25);
  manager.save(s, m.g.global_step_value());
}

TEST(GoldenCheckpointTest, TheSameRunWritesTheSameBytes) {
  th::testing::FakeEnv fe;
  th::testing::TempDir dir;
  Model m;
  th::Session s(m.g);
  write_run(dir.path(), m, s, fe);
  if (std::getenv("TRAINHOOKS_UPDATE_GOLDEN")) {
    fs::create_directories(kGolden);
    for (const auto& f : kFiles)
      fs::copy_file(dir.file(f), kGolden + "/" + f, fs::copy_options::overwrite_existing);
    GTEST_SKIP() << "wrote " << kGolden;
  }
  for (const auto& f : kFiles) {
    const std::string want = read_bytes(kGolden + "/" + f);
    const std::string got = read_bytes(dir.file(f));
    EXPECT_EQ(got.size(), want.size()) << f;
    EXPECT_TRUE(got == want) << f << " differs from the golden file";
  }
}

TEST(GoldenCheckpointTest, AnEarlierBuildsCheckpointIsReadBitForBit) {
  // What the golden run trained, computed again here.
  th::testing::FakeEnv fe;
  th::testing::TempDir scratch;
  Model trained;
  th::Session ts(trained.g);
  write_run(scratch.path(), trained, ts, fe);

  Model fresh(/*seed=*/2);
  th::Session s(fresh.g);
  th::CheckpointManager manager(kGolden, {.max_to_keep = 0, .env = fe.env()});
  ASSERT_EQ(manager.latest(), kGolden + "/model.ckpt-4");
  th::Saver(fresh.g).restore(s, kGolden + "/model.ckpt-4");
  expect_same(fresh.values(), trained.values());
  EXPECT_EQ(fresh.g.global_step_value(), 4);
  EXPECT_EQ(fresh.counter.value, 7);
  EXPECT_EQ(fresh.g.input_position(fresh.batch[0]).epoch,
            trained.g.input_position(trained.batch[0]).epoch);
  EXPECT_EQ(fresh.g.input_position(fresh.batch[0]).offset,
            trained.g.input_position(trained.batch[0]).offset);
  // The optimizer, the RNG and the input continue as the original run does.
  fresh.steps(s, 3);
  trained.steps(ts, 3);
  expect_same(fresh.values(), trained.values());
}

}  // namespace golden_checkpoint_test
