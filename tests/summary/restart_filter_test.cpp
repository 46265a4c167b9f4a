#include "trainhooks/summary/restart_filter.h"

#include <gtest/gtest.h>

#include "summary_test_util.h"
#include "trainhooks/summary/event_writer.h"

namespace trainhooks::summary {
namespace restart_filter_test {

using testing::TempDir;

Event version(const std::string& v = "brain.Event:2") { return {.file_version = v}; }

Event start(int64_t step) {
  return {.step = step, .session_log = SessionLogValue{.status = SessionStatus::kStart}};
}

Event scalar(int64_t step, const std::string& tag = "loss", double value = 0) {
  return {.step = step,
          .values = {EventValue{.tag = tag, .kind = ValueKind::kScalar, .scalar = value}}};
}

// "tag@step" for every value kept, in order.
std::vector<std::string> kept(const RestartFilter& filter) {
  std::vector<std::string> out;
  for (const Event& e : filter.events()) {
    for (const EventValue& v : e.values) out.push_back(v.tag + "@" + std::to_string(e.step));
  }
  return out;
}

TEST(RestartFilterTest, RestartDiscardsEarlierValuesAtOrAfterItsStep) {
  RestartFilter f;
  f.add(version());
  f.add(start(1));
  for (int s = 1; s <= 9; ++s) f.add(scalar(s));
  f.add(start(6));
  for (int s = 6; s <= 7; ++s) f.add(scalar(s));
  EXPECT_EQ(kept(f), (std::vector<std::string>{"loss@1", "loss@2", "loss@3", "loss@4", "loss@5",
                                               "loss@6", "loss@7"}));
  ASSERT_EQ(f.purges().size(), 1u);
  EXPECT_TRUE(f.purges()[0].restart);
  EXPECT_EQ(f.purges()[0].step, 6);
  EXPECT_EQ(f.purges()[0].previous_step, 9);
  EXPECT_EQ(f.purges()[0].values, 4);
  EXPECT_EQ(describe_purge(f.purges()[0]),
            "restart at step 6 (SessionLog START): 4 earlier values with step >= 6 discarded");
  EXPECT_EQ(f.events().size(), 10u);  // version, two STARTs, seven scalars
}

TEST(RestartFilterTest, FirstStartOfARunIsItsBeginningNotARestart) {
  RestartFilter f;
  f.add(version());
  for (int s = 5; s <= 6; ++s) f.add(scalar(s));
  f.add(start(3));
  EXPECT_EQ(kept(f), (std::vector<std::string>{"loss@5", "loss@6"}));
  EXPECT_TRUE(f.purges().empty());
}

TEST(RestartFilterTest, WithFileVersionTwoOutOfOrderStepsAreKept) {
  RestartFilter f;
  f.add(version());
  f.add(scalar(5));
  f.add(scalar(3));
  EXPECT_EQ(kept(f), (std::vector<std::string>{"loss@5", "loss@3"}));
}

TEST(RestartFilterTest, WithoutFileVersionAnOutOfOrderStepPurgesOnlyItsOwnTags) {
  RestartFilter f;
  for (int s = 1; s <= 4; ++s) {
    f.add(scalar(s, "loss"));
    f.add(scalar(s, "acc"));
  }
  f.add(scalar(2, "loss"));
  EXPECT_EQ(kept(f),
            (std::vector<std::string>{"loss@1", "acc@1", "acc@2", "acc@3", "acc@4", "loss@2"}));
  ASSERT_EQ(f.purges().size(), 1u);
  EXPECT_FALSE(f.purges()[0].restart);
  EXPECT_EQ(f.purges()[0].tags, std::vector<std::string>{"loss"});
  EXPECT_EQ(describe_purge(f.purges()[0]),
            "step 2 after step 4 (loss): 3 earlier values of this tag with step >= 2 discarded");
}

TEST(RestartFilterTest, OldFileVersionUsesOutOfOrderSteps) {
  RestartFilter f;
  f.add(version("brain.Event:1"));
  f.add(start(1));
  f.add(scalar(3));
  f.add(start(2));  // ignored: version 1
  f.add(scalar(2));
  EXPECT_EQ(kept(f), std::vector<std::string>{"loss@2"});
}

TEST(RestartFilterTest, ParsesTheNumberOfAFileVersion) {
  EXPECT_EQ(parse_file_version("brain.Event:2"), 2);
  EXPECT_EQ(parse_file_version("brain.Event:1.5"), 1.5);
  EXPECT_EQ(parse_file_version("brain.Event:"), -1);
  EXPECT_EQ(parse_file_version("brain.Event:x"), -1);
  EXPECT_EQ(parse_file_version("nothing"), -1);
}

TEST(RestartFilterTest, ReadEventsPurgesAcrossTheFilesOfARunWhenAsked) {
  TempDir dir;
  auto clock = std::make_shared<FakeClock>(1700000000.0);
  auto log = std::make_shared<CapturingLogSink>();
  {
    EventWriter first(dir.path(), {.env = {.clock = clock, .log = log}});
    first.add_session_log(SessionStatus::kStart, "", "", 1);
    for (int s = 1; s <= 9; ++s) first.add_scalar("loss", static_cast<float>(s), s);
  }
  clock->advance(10);  // a later file name
  {
    EventWriter resumed(dir.path(), {.env = {.clock = clock, .log = log}});
    resumed.add_session_log(SessionStatus::kStart, "", "", 5);
    for (int s = 5; s <= 7; ++s) resumed.add_scalar("loss", 100.0f + s, s);
  }
  auto steps_and_values = [&](bool purge) {
    std::vector<std::pair<int64_t, double>> out;
    for (const Event& e : read_events(dir.path(), {.purge_orphaned_data = purge})) {
      if (!e.values.empty()) out.emplace_back(e.step, e.values[0].scalar);
    }
    return out;
  };
  using V = std::vector<std::pair<int64_t, double>>;
  EXPECT_EQ(steps_and_values(true),
            (V{{1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 105}, {6, 106}, {7, 107}}));
  EXPECT_EQ(steps_and_values(false).size(), 12u);
}

}  // namespace restart_filter_test
}  // namespace trainhooks::summary
