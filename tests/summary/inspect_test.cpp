#include "trainhooks/summary/inspect.h"

#include <gtest/gtest.h>

#include <sstream>

#include "summary_test_util.h"
#include "trainhooks/summary/event_writer.h"

namespace trainhooks::summary {
namespace inspect_test {

using testing::TempDir;

EventWriterOptions fixed_clock(double now) {
  return {.env = {.clock = std::make_shared<FakeClock>(now),
                  .log = std::make_shared<CapturingLogSink>()}};
}

// logdir/       loss at steps 0..4 (value step / 4) and a text note
// logdir/train  acc at steps 10 and 20
// logdir/eval/deep  acc at step 20
class InspectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      EventWriter root(dir_.path(), fixed_clock(1700000000.5));
      for (int s = 0; s < 5; ++s) root.add_scalar("loss", s / 4.0f, s);
      root.add_text("note", "hello", 4);
      root.add_session_log(SessionStatus::kStart, "", "", 0);
    }
    {
      EventWriter train(dir_.path() / "train", fixed_clock(1700000001.0));
      train.add_scalar("acc", 0.1f, 10);
      train.add_scalar("acc", 0.2f, 20);
    }
    {
      EventWriter eval(dir_.path() / "eval" / "deep", fixed_clock(1700000002.0));
      eval.add_scalar("acc", 0.3f, 20);
    }
  }
  TempDir dir_;
};

TEST_F(InspectTest, FindsTheLogdirAndEverySubdirectoryWithEventFiles) {
  auto runs = find_run_directories(dir_.path());
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0], dir_.path());
  EXPECT_EQ(runs[1], dir_.path() / "eval" / "deep");
  EXPECT_EQ(runs[2], dir_.path() / "train");
}

TEST_F(InspectTest, ReportsKindCountStepRangeAndLastValuePerTag) {
  auto runs = inspect_logdir(dir_.path());
  ASSERT_EQ(runs.size(), 3u);
  const RunStats& root = runs[0];
  EXPECT_EQ(root.name, ".");
  EXPECT_EQ(root.events, 8);  // version, 5 scalars, text, session log
  EXPECT_EQ(root.session_starts, 1);
  ASSERT_EQ(root.tags.size(), 2u);
  EXPECT_EQ(root.tags[0].tag, "loss");
  EXPECT_EQ(root.tags[0].kind, ValueKind::kScalar);
  EXPECT_EQ(root.tags[0].count, 5);
  EXPECT_EQ(root.tags[0].min_step, 0);
  EXPECT_EQ(root.tags[0].max_step, 4);
  EXPECT_EQ(root.tags[0].last_value, 1.0);
  EXPECT_EQ(root.tags[1].tag, "note");
  EXPECT_EQ(root.tags[1].kind, ValueKind::kText);
  EXPECT_FALSE(root.tags[1].last_value.has_value());
  EXPECT_EQ(runs[1].name, "eval/deep");
  EXPECT_EQ(runs[2].name, "train");
  EXPECT_EQ(runs[2].tags.at(0).count, 2);
}

TEST_F(InspectTest, PrintsOneTablePerRun) {
  std::ostringstream out;
  print_runs(out, inspect_logdir(dir_.path() / "train"));
  EXPECT_EQ(out.str(), "run . (" + (dir_.path() / "train").string() +
                           ", 1 file, 3 events)\n"
                           "  tag  kind    count  steps   last\n"
                           "  acc  scalar      2  10..20  0.2\n");
}

TEST_F(InspectTest, CsvHasOneRowPerScalarWithShortestValues) {
  std::ostringstream out;
  write_scalars_csv(out, dir_.path(), {.tag = "acc"});
  EXPECT_EQ(out.str(),
            "run,tag,step,wall_time,value\n"
            "eval/deep,acc,20,1700000002,0.3\n"
            "train,acc,10,1700000001,0.1\n"
            "train,acc,20,1700000001,0.2\n");
}

TEST_F(InspectTest, TagFilterKeepsOnlyThatTag) {
  auto runs = inspect_logdir(dir_.path(), {.tag = "note"});
  ASSERT_EQ(runs.size(), 3u);
  ASSERT_EQ(runs[0].tags.size(), 1u);
  EXPECT_EQ(runs[0].tags[0].tag, "note");
  EXPECT_TRUE(runs[1].tags.empty());
}

TEST_F(InspectTest, CsvQuotesFieldsWithCommas) {
  {
    EventWriter w(dir_.path() / "a,b", fixed_clock(1.5));
    w.add_scalar("x\"y", 2.0f, 1);
  }
  std::ostringstream out;
  write_scalars_csv(out, dir_.path() / "a,b");
  EXPECT_EQ(out.str(), "run,tag,step,wall_time,value\n.,\"x\"\"y\",1,1.5,2\n");
}

TEST(InspectErrorsTest, MissingDirectoryNamesThePath) {
  TempDir dir;
  try {
    inspect_logdir(dir.path() / "absent");
    FAIL();
  } catch (const EventFileError& e) {
    EXPECT_EQ(std::string(e.what()), "No such directory: " + (dir.path() / "absent").string());
  }
}

TEST(InspectErrorsTest, CorruptFileNamesFileAndOffset) {
  TempDir dir;
  std::filesystem::path file;
  {
    EventWriter w(dir.path(), fixed_clock(1.0));
    w.add_scalar("x", 1.0f, 1);
    file = w.file_path();
  }
  std::string data = testing::read_bytes(file);
  data[data.size() - 1] ^= 1;
  testing::write_bytes(file, data);
  try {
    inspect_logdir(dir.path());
    FAIL();
  } catch (const EventFileError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string() + " at byte offset 40"), std::string::npos)
        << e.what();
  }
}

TEST(InspectErrorsTest, RunKeepsWhatWasReadBeforeTheError) {
  TempDir dir;
  std::filesystem::path file;
  {
    EventWriter w(dir.path(), fixed_clock(1.0));
    for (int s = 1; s <= 3; ++s) w.add_scalar("x", 1.0f, s);
    file = w.file_path();
  }
  std::string data = testing::read_bytes(file);
  data[data.size() - 1] ^= 1;  // the last record's data CRC
  testing::write_bytes(file, data);
  for (bool purge : {false, true}) {
    RunStats run;
    InspectOptions options;
    options.read.purge_orphaned_data = purge;
    EXPECT_THROW(inspect_run(dir.path(), dir.path(), options, run), EventFileError);
    EXPECT_EQ(run.events, 3);  // the version record and steps 1 and 2
    ASSERT_EQ(run.tags.size(), 1u);
    EXPECT_EQ(run.tags[0].count, 2);
    EXPECT_EQ(run.tags[0].max_step, 2);
  }
}

TEST(InspectPurgeTest, RestartLeavesOutOrphanedValuesAndPrintsThePurge) {
  TempDir dir;
  {
    EventWriter w(dir.path(), fixed_clock(1.0));
    w.add_session_log(SessionStatus::kStart, "", "", 1);
    for (int s = 1; s <= 5; ++s) w.add_scalar("x", static_cast<float>(s), s);
    w.add_session_log(SessionStatus::kStart, "", "", 3);
    w.add_scalar("x", 30.0f, 3);
  }
  InspectOptions options;
  options.read.purge_orphaned_data = true;
  std::ostringstream out;
  print_runs(out, inspect_logdir(dir.path(), options));
  EXPECT_EQ(out.str(), "run . (" + dir.path().string() +
                           ", 1 file, 9 events)\n"
                           "  tag  kind    count  steps  last\n"
                           "  x    scalar      3  1..3   30\n"
                           "  restart at step 3 (SessionLog START): 3 earlier values with step "
                           ">= 3 discarded\n");
  std::ostringstream csv;
  EXPECT_EQ(write_scalars_csv(csv, dir.path(), options), 3);
  EXPECT_EQ(csv.str(), "run,tag,step,wall_time,value\n.,x,1,1,1\n.,x,2,1,2\n.,x,3,1,30\n");
}

TEST(InspectSharedTestdataTest, ListsEveryTagOfTheForeignFiles) {
  if (!std::filesystem::is_directory(testing::shared_tfevents_dir())) {
    GTEST_SKIP() << "shared test data not found at " << testing::shared_tfevents_dir();
  }
  auto runs = inspect_logdir(testing::shared_tfevents_dir());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].files.size(), 4u);
  std::map<std::string, TagStats> tags;
  for (const auto& t : runs[0].tags) tags[t.tag] = t;
  ASSERT_EQ(tags.size(), 4u);
  EXPECT_EQ(tags["my_metric"].count, 100);
  EXPECT_EQ(tags["my_metric"].last_value, 49.5);
  EXPECT_EQ(tags["tag"].max_step, 9);
  EXPECT_EQ(tags["hello"].last_value, 1.0);
  EXPECT_EQ(tags["strict/foo"].min_step, 0);
  EXPECT_EQ(tags["strict/foo"].max_step, 495);
  EXPECT_EQ(tags["strict/foo"].count, 100);
}

}  // namespace inspect_test
}  // namespace trainhooks::summary
