#include "trainhooks/hooks/profiler_hook.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/optimizers.h"

namespace th = trainhooks;
namespace fs = std::filesystem;

namespace profiler_hook_test {

// The timeline files in `dir`, sorted.
std::vector<std::string> timelines(const std::string& dir) {
  std::vector<std::string> names;
  if (!fs::exists(dir)) return names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// loss = mean((x W)^2) with x [4, 3] and W [3, 2]: a matrix product forward and backward.
struct MatmulModel {
  MatmulModel() {
    x = g.placeholder("x", {.dtype = at::kFloat, .shape = {4, 3}});
    w = g.variable("W", at::full({3, 2}, 0.5, at::kFloat));
    const th::Node xn = x, wn = w;
    loss = g.op("loss", [=](th::Run& r) { return at::mm(r[xn], r[wn]).square().mean(); });
    train = g.minimize("train", loss, th::sgd(0.1));
  }
  th::Feeds feed() const { return {{x, at::ones({4, 3}, at::kFloat)}}; }
  th::Graph g;
  th::Node x, w, loss, train;
};

class ProfilerHookTest : public ::testing::Test {
 protected:
  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
  th::testing::TempDir tmp;
};

TEST_F(ProfilerHookTest, SaveStepsTracesTheStepsTheTimerTriggersFor) {
  const std::string dir = tmp.file("profile");
  auto hook = std::make_shared<th::ProfilerHook>(
      th::ProfilerHookOptions{.save_steps = 2, .output_dir = dir});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  for (int i = 0; i < 5; ++i) sess->run(m.train, m.feed());
  EXPECT_EQ(timelines(dir), (std::vector<std::string>{"timeline-2.json", "timeline-4.json"}));
  EXPECT_EQ(hook->timeline_path(2), dir + "/timeline-2.json");
}

TEST_F(ProfilerHookTest, SaveSecsTracesOnTheFakeClock) {
  const std::string dir = tmp.file("profile");
  auto hook = std::make_shared<th::ProfilerHook>(
      th::ProfilerHookOptions{.save_secs = 2, .output_dir = dir});
  auto sess = th::testing::chief_session(m.g, {hook}, fe.env());
  auto count_after = [&](double advance) {
    fe.clock->advance(advance);
    sess->run(m.train, m.feed());
    return timelines(dir).size();
  };
  EXPECT_EQ(count_after(0), 0u);    // the first run: never
  EXPECT_EQ(count_after(2.5), 1u);  // 2.5 s
  EXPECT_EQ(count_after(0.1), 1u);  // 2.6 s
  EXPECT_EQ(count_after(1.8), 1u);  // 4.4 s: 1.9 s since the last trace
  EXPECT_EQ(count_after(0.1), 2u);  // 4.5 s
  EXPECT_EQ(timelines(dir), (std::vector<std::string>{"timeline-2.json", "timeline-5.json"}));
}

TEST_F(ProfilerHookTest, TheTraceHoldsTheStepsOperatorsAndBackwardNodes) {
  MatmulModel model;
  const std::string dir = tmp.file("profile");
  auto hook = std::make_shared<th::ProfilerHook>(th::ProfilerHookOptions{
      .save_steps = 1, .output_dir = dir, .show_dataflow = true, .show_memory = true});
  auto sess = th::testing::chief_session(model.g, {hook}, fe.env());
  for (int i = 0; i < 2; ++i) sess->run(model.train, model.feed());
  ASSERT_EQ(timelines(dir), (std::vector<std::string>{"timeline-2.json"}));
  const auto trace = read_json(dir + "/timeline-2.json");
  ASSERT_TRUE(trace.contains("traceEvents"));
  std::set<std::string> names;
  bool mm_dims = false, backward = false, flow = false, memory = false;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "X") {
      EXPECT_GE(e["dur"].get<double>(), 0);
      names.insert(e["name"].get<std::string>());
      if (e["name"] == "aten::mm" && e["args"].contains("Input Dims"))
        mm_dims = mm_dims || e["args"]["Input Dims"] == nlohmann::json({{4, 3}, {3, 2}});
      if (e["cat"] == "backward") backward = true;
    }
    if (ph == "s") flow = true;
    if (ph == "C") memory = true;
  }
  EXPECT_TRUE(names.contains("aten::mm"));
  EXPECT_TRUE(std::any_of(names.begin(), names.end(), [](const std::string& n) {
    return n.find("MmBackward0") != std::string::npos;
  })) << ::testing::PrintToString(names);
  EXPECT_TRUE(mm_dims);
  EXPECT_TRUE(backward);
  EXPECT_TRUE(flow);
  EXPECT_TRUE(memory);
}

TEST_F(ProfilerHookTest, WithoutDataflowOrMemoryTheTraceHasOperatorsOnly) {
  MatmulModel model;
  const std::string dir = tmp.file("profile");
  auto hook = std::make_shared<th::ProfilerHook>(
      th::ProfilerHookOptions{.save_steps = 1, .output_dir = dir, .show_dataflow = false});
  auto sess = th::testing::chief_session(model.g, {hook}, fe.env());
  for (int i = 0; i < 2; ++i) sess->run(model.train, model.feed());
  const auto trace = read_json(dir + "/timeline-2.json");
  bool mm = false;
  for (const auto& e : trace["traceEvents"]) {
    EXPECT_NE(e["ph"], "s");
    EXPECT_NE(e["ph"], "C");
    EXPECT_FALSE(e.contains("args") && e["ph"] == "X");
    mm = mm || e["name"] == "aten::mm";
  }
  EXPECT_TRUE(mm);
}

TEST_F(ProfilerHookTest, RejectsBothOrNeitherPeriodNamingThem) {
  auto message = [](th::ProfilerHookOptions o) {
    return th::testing::error_message<th::InvalidArgument>([&] { th::ProfilerHook h(o); });
  };
  EXPECT_EQ(message({.save_steps = 2, .save_secs = 1, .output_dir = "d"}),
            "Can not provide both save_secs and save_steps.");
  EXPECT_EQ(message({.output_dir = "d"}), "Either save_secs or save_steps should be provided.");
  EXPECT_EQ(message({.save_steps = 0, .output_dir = "d"}),
            "ProfilerHook: save_steps must be positive, got 0");
  EXPECT_EQ(message({.save_steps = 2}), "ProfilerHook: output_dir must name a directory");
  EXPECT_EQ(message({.save_steps = 2, .output_dir = "d"}), "");
}

}  // namespace profiler_hook_test
