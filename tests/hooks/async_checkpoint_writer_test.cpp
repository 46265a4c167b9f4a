#include "trainhooks/hooks/async_checkpoint_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "checkpoint/saver_test_model.h"
#include "test_util.h"
#include "trainhooks/checkpoint/checkpoint_manager.h"
#include "trainhooks/coordinator.h"
#include "trainhooks/errors.h"
#include "trainhooks/session.h"

namespace th = trainhooks;
namespace fs = std::filesystem;
using ::testing::HasSubstr;

namespace async_checkpoint_writer_test {

using namespace th::testing::saver_fixture;

class AsyncCheckpointWriterTest : public SaverTest {
 protected:
  AsyncCheckpointWriterTest()
      : manager(std::make_shared<th::CheckpointManager>(
            dir.path(), th::CheckpointManagerOptions{.max_to_keep = 10, .env = fe.env()})) {}
  ~AsyncCheckpointWriterTest() override {
    coord.request_stop();
    coord.join(10);
  }

  Model m;
  th::Session s{m.g};
  std::shared_ptr<th::CheckpointManager> manager;
  th::Coordinator coord;
};

TEST_F(AsyncCheckpointWriterTest, WritesOneSnapshotAtATimeAndReportsItWhenCollected) {
  th::AsyncCheckpointWriter writer(manager, coord);
  EXPECT_EQ(coord.num_threads(), 1u);
  EXPECT_FALSE(writer.collect(/*wait=*/false));
  for (int64_t step : {1, 2}) {
    m.steps(s, 1);
    th::SaverSnapshot snap = manager->snapshot(s, step);
    const auto values = m.values();
    ASSERT_TRUE(writer.submit(snap, step));
    EXPECT_TRUE(snap.empty());  // handed over
    m.steps(s, 1);              // training goes on during the write
    auto done = writer.collect(/*wait=*/true);
    ASSERT_TRUE(done);
    EXPECT_EQ(done->step, step);
    EXPECT_EQ(done->path, manager->path_for(step));
    EXPECT_FALSE(done->error);
    EXPECT_FALSE(writer.busy());
    EXPECT_FALSE(writer.collect(/*wait=*/true));  // reported once
    Model restored(2);
    th::Session rs(restored.g);
    th::Saver(restored.g, saver_options()).restore(rs, done->path);
    expect_same(restored.values(), values);
  }
  EXPECT_EQ(manager->checkpoints().size(), 2u);  // listed by the writer's thread
}

TEST_F(AsyncCheckpointWriterTest, ASecondSubmitBeforeTheFirstIsCollectedIsRefused) {
  th::AsyncCheckpointWriter writer(manager, coord);
  th::SaverSnapshot first = manager->snapshot(s, 1);
  ASSERT_TRUE(writer.submit(first, 1));
  th::SaverSnapshot second = manager->snapshot(s, 2);
  EXPECT_THROW(writer.submit(second, 2), th::FailedPreconditionError);
  EXPECT_FALSE(second.empty());
  ASSERT_TRUE(writer.collect(/*wait=*/true));
  EXPECT_TRUE(writer.submit(second, 2));
}

TEST_F(AsyncCheckpointWriterTest, AWriteErrorIsReportedWithItsType) {
  fs::create_directories(manager->path_for(3));  // a directory where the variables file goes
  th::AsyncCheckpointWriter writer(manager, coord);
  th::SaverSnapshot snap = manager->snapshot(s, 3);
  ASSERT_TRUE(writer.submit(snap, 3));
  auto done = writer.collect(/*wait=*/true);
  ASSERT_TRUE(done && done->error);
  EXPECT_THAT(th::testing::error_message<th::Error>([&] { std::rethrow_exception(done->error); }),
              HasSubstr("Cannot write checkpoint file '" + manager->path_for(3) + "'"));
  EXPECT_TRUE(manager->checkpoints().empty());
}

TEST_F(AsyncCheckpointWriterTest, OnceTheCoordinatorStopsTheCallerWritesItself) {
  th::AsyncCheckpointWriter writer(manager, coord);
  coord.request_stop();
  coord.join(10);  // the writer's thread has ended
  th::SaverSnapshot snap = manager->snapshot(s, 4);
  EXPECT_FALSE(writer.submit(snap, 4));
  ASSERT_FALSE(snap.empty());                   // still the caller's
  EXPECT_FALSE(writer.collect(/*wait=*/true));  // nothing to wait for
  EXPECT_EQ(manager->write(std::move(snap)), manager->path_for(4));
}

TEST_F(AsyncCheckpointWriterTest, ShutdownEndsTheThreadAfterTheWriteInFlight) {
  auto writer = std::make_unique<th::AsyncCheckpointWriter>(manager, coord);
  th::SaverSnapshot snap = manager->snapshot(s, 5);
  ASSERT_TRUE(writer->submit(snap, 5));
  writer->shutdown();
  writer->shutdown();
  writer.reset();
  coord.request_stop();
  coord.join(10);
  EXPECT_EQ(manager->latest(), manager->path_for(5));
  EXPECT_THROW(th::AsyncCheckpointWriter(nullptr, coord), th::InvalidArgument);
}

}  // namespace async_checkpoint_writer_test
