// Recording runs (Session::record_trace), the Graph as a GraphDef (graph_export.h), and
// MonitoredTrainingSession writing it as TF does: graph.pbtxt and one graph event per model.
#include "trainhooks/graph_export.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "test_util.h"
#include "trainhooks/session.h"
#include "trainhooks/summary/event_reader.h"
#include "trainhooks/summary/event_writer.h"
#include "trainhooks/training_session.h"

namespace th = trainhooks;
namespace ths = trainhooks::summary;
namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

namespace graph_export_test {

// The seed's model, and a module applied inside an op (its parameters are not read through the
// Run): y_pred = x * W + b, loss = mean((y_pred - y)^2), out = lin(x).
struct Model {
  Model() {
    x = g.placeholder("x", {.dtype = torch::kFloat, .shape = {-1}});
    y = g.placeholder("y", {.dtype = torch::kFloat, .shape = {-1}});
    W = g.variable("W", torch::zeros({1}));
    b = g.variable("b", torch::zeros({1}));
    // One read per statement: the operands of `r[x] * r[W]` are evaluated in an unspecified
    // order, and the recorded inputs follow the order of the reads.
    y_pred = g.op("y_pred", [this](th::Run& r) {
      ++y_pred_calls;
      const at::Tensor& xv = r[x];
      const at::Tensor& wv = r[W];
      return xv * wv + r[b];
    });
    loss = g.op("loss", [this](th::Run& r) {
      const at::Tensor& prediction = r[y_pred];
      return (prediction - r[y]).square().mean();
    });
    lin = torch::nn::Linear(1, 2);
    g.add_module("lin", lin);
    out = g.op("out", [this](th::Run& r) { return lin->forward(r[x].unsqueeze(1)); });
    train = g.minimize("train", loss, th::sgd(0.01));
  }
  th::Feeds feeds() const { return {{x, torch::ones({4})}, {y, torch::full({4}, 2.0f)}}; }
  std::vector<th::Node> names(std::initializer_list<const char*> list) const {
    std::vector<th::Node> out;
    for (const char* n : list) out.push_back(g.find(n));
    return out;
  }

  th::Graph g;
  th::Node x, y, W, b, y_pred, loss, out, train;
  torch::nn::Linear lin{nullptr};
  int y_pred_calls = 0;
};

TEST(SessionTraceTest, RecordsEachNodesReadsInTheOrderOfTheirFirstRead) {
  Model m;
  th::Session sess(m.g);
  sess.record_trace(true);
  auto r = sess.run({m.train, m.out, m.y_pred}, m.feeds());
  // Evaluated once each, memoised as in a plain run: y_pred read by loss and fetched.
  EXPECT_EQ(m.y_pred_calls, 1);
  ASSERT_NE(m.g.trace(m.y_pred), nullptr);
  EXPECT_EQ(m.g.trace(m.y_pred)->inputs, m.names({"x", "W", "b"}));
  EXPECT_EQ(m.g.trace(m.loss)->inputs, m.names({"y_pred", "y"}));
  EXPECT_EQ(m.g.trace(m.train)->inputs, m.names({"loss"}));
  // The module's parameters reach the op through its autograd graph.
  EXPECT_EQ(m.g.trace(m.out)->inputs, m.names({"x", "lin/weight", "lin/bias"}));
  EXPECT_THAT(m.g.trace(m.x)->inputs, IsEmpty());
  // Values: dtype, sizes, device.
  EXPECT_EQ(m.g.trace(m.out)->dtype, torch::kFloat);
  EXPECT_EQ(m.g.trace(m.out)->shape, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(m.g.trace(m.loss)->shape, std::vector<int64_t>{});
  EXPECT_EQ(m.g.trace(m.x)->shape, std::vector<int64_t>{4});
  EXPECT_EQ(m.g.trace(m.x)->device, "cpu");
  EXPECT_FALSE(m.g.trace(m.train)->dtype);  // a train op's value is undefined
  // The step ran: W moved, the global step counted.
  EXPECT_EQ(m.g.global_step_value(), 1);
  EXPECT_NE(m.g.variable_value(m.W).item<float>(), 0.0f);
  EXPECT_EQ(r[m.out].sizes(), (std::vector<int64_t>{4, 2}));
}

TEST(SessionTraceTest, PlainRunsRecordNothingAndStopWhenAsked) {
  Model m;
  th::Session sess(m.g);
  sess.run(m.y_pred, m.feeds());
  EXPECT_EQ(m.g.trace(m.y_pred), nullptr);
  sess.record_trace(true);
  EXPECT_TRUE(sess.recording_trace());
  sess.run(m.y_pred, m.feeds());
  sess.record_trace(false);
  sess.run(m.loss, m.feeds());
  // loss ran only after the recording ended; nodes no recording run reached have no trace.
  EXPECT_NE(m.g.trace(m.y_pred), nullptr);
  EXPECT_EQ(m.g.trace(m.loss), nullptr);
  EXPECT_EQ(m.g.trace(m.train), nullptr);
  // A plain run after the recording still memoises and computes the same values.
  m.y_pred_calls = 0;
  auto r = sess.run({m.loss, m.y_pred}, m.feeds());
  EXPECT_EQ(m.y_pred_calls, 1);
  EXPECT_FLOAT_EQ(r[m.loss].item<float>(), 4.0f);
  m.g.clear_traces();
  EXPECT_EQ(m.g.trace(m.y_pred), nullptr);
}

TEST(SessionTraceTest, RecordingRunsAddUpAndKeepErrorsAndCycles) {
  th::Graph g;
  auto x = g.placeholder("x");
  th::Node a_node, b_node;
  auto a = g.op("a", [&](th::Run& r) { return r[b_node]; });
  auto bb = g.op("b", [&](th::Run& r) { return r[a_node]; });
  a_node = a;
  b_node = bb;
  auto twice = g.op("twice", [=](th::Run& r) { return r[x] * 2; });
  th::Session sess(g);
  sess.record_trace(true);
  EXPECT_THAT(th::testing::error_message<th::InvalidArgument>([&] { sess.run(a); }),
              ::testing::HasSubstr("Cycle detected: node 'a' depends on itself"));
  EXPECT_THAT(th::testing::error_message<th::InvalidArgument>([&] { sess.run(twice); }),
              ::testing::HasSubstr("You must feed a value for placeholder 'x'"));
  sess.run(twice, {{x, torch::ones({2})}});
  EXPECT_EQ(g.trace(twice)->inputs, std::vector<th::Node>{x});
  EXPECT_EQ(g.trace(a)->inputs, std::vector<th::Node>{bb});
  EXPECT_EQ(g.trace(bb)->inputs, std::vector<th::Node>{a});
}

TEST(GraphExportTest, EveryNodeWithItsTensorFlowOpInputsAndAttrs) {
  Model m;
  th::Session sess(m.g);
  sess.record_trace(true);
  sess.run({m.train, m.out}, m.feeds());
  const ths::GraphDef def = th::graph_def(m.g);
  std::vector<std::string> names, ops;
  for (const auto& n : def.nodes) {
    names.push_back(n.name);
    ops.push_back(n.op);
  }
  EXPECT_THAT(names, ElementsAre("x", "y", "W", "b", "y_pred", "loss", "lin/weight", "lin/bias",
                                 "out", "global_step", "train"));
  EXPECT_THAT(ops, ElementsAre("Placeholder", "Placeholder", "VariableV2", "VariableV2", "CppFunc",
                               "CppFunc", "VariableV2", "VariableV2", "CppFunc", "VariableV2",
                               "ApplyGradients"));
  const ths::NodeDef& x = *def.find("x");
  EXPECT_EQ(x.device, "/device:CPU:0");
  EXPECT_EQ(x.attrs.at("dtype"), ths::AttrValue(ths::DataType::kFloat));
  EXPECT_EQ(x.attrs.at("shape"), ths::AttrValue(ths::TensorShape{.dims = {-1}}));
  EXPECT_EQ(x.attrs.at("_output_shapes"),
            ths::AttrValue(std::vector<ths::TensorShape>{{.dims = {4}}}));
  const ths::NodeDef& w = *def.find("lin/weight");
  EXPECT_EQ(w.attrs.at("shape"), ths::AttrValue(ths::TensorShape{.dims = {2, 1}}));
  EXPECT_EQ(w.attrs.at("_trainable"), ths::AttrValue(true));
  const ths::NodeDef& out = *def.find("out");
  EXPECT_THAT(out.inputs, ElementsAre("x", "lin/weight", "lin/bias"));
  EXPECT_EQ(out.attrs.at("T"), ths::AttrValue(ths::DataType::kFloat));
  EXPECT_THAT(def.find("loss")->inputs, ElementsAre("y_pred", "y"));
  const ths::NodeDef& train = *def.find("train");
  EXPECT_THAT(train.inputs, ElementsAre("loss", "W", "b", "lin/weight", "lin/bias", "global_step"));
  EXPECT_EQ(train.attrs.at("optimizer"), ths::AttrValue(std::string("sgd")));
  const ths::NodeDef& step = *def.find("global_step");
  EXPECT_EQ(step.attrs.at("dtype"), ths::AttrValue(ths::DataType::kInt64));
  EXPECT_EQ(step.attrs.at("shape"), ths::AttrValue(ths::TensorShape{}));
}

TEST(GraphExportTest, UntracedNodesHaveNoInputsAndNamesAreMadeTensorFlowSafe) {
  th::Graph g;
  auto x = g.placeholder("in put:0");
  g.placeholder("in_put_0");
  g.op("f(x)", [=](th::Run& r) { return r[x]; });
  const ths::GraphDef def = th::graph_def(g);
  ASSERT_EQ(def.nodes.size(), 3u);
  EXPECT_EQ(def.nodes[0].name, "in_put_0");
  EXPECT_EQ(def.nodes[1].name, "in_put_0_1");
  EXPECT_EQ(def.nodes[2].name, "f_x_");
  EXPECT_THAT(def.nodes[2].inputs, IsEmpty());
  EXPECT_EQ(def.nodes[0].attrs.at("shape"), ths::AttrValue(ths::TensorShape{.unknown_rank = true}));
  EXPECT_EQ(def.nodes[0].attrs.count("dtype"), 0u);
  EXPECT_EQ(def.nodes[2].device, "");
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> graph_events(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : ths::read_events(dir))
    if (e.graph_def) out.push_back(e.graph_def_data);
  return out;
}

void train(Model& m, const std::string& dir, int steps) {
  th::testing::FakeEnv fake;  // the default hooks' log lines stay out of the test's output
  th::MonitoredTrainingSession sess(
      m.g, {.checkpoint_dir = dir, .checkpoints = {.save_steps = 100}, .env = fake.env()});
  for (int i = 0; i < steps && !sess.should_stop(); ++i) sess.run(m.train, m.feeds());
  sess.close();
  ths::EventWriter::clear_cache();
}

TEST(MonitoredTrainingSessionGraphTest, WritesGraphPbtxtAndOneGraphEventAfterTheFirstRun) {
  th::testing::TempDir dir;
  Model m;
  train(m, dir.path(), 3);
  const std::string text = read_file(dir.file("graph.pbtxt"));
  const ths::GraphDef from_file = ths::parse_graph_def_text(text);
  EXPECT_THAT(from_file.find("loss")->inputs, ElementsAre("y_pred", "y"));
  EXPECT_THAT(from_file.find("y_pred")->inputs, ElementsAre("x", "W", "b"));
  // Not fetched by the training runs: no edges known.
  EXPECT_THAT(from_file.find("out")->inputs, IsEmpty());
  const auto events = graph_events(dir.path());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(ths::parse_graph_def(events[0]), from_file);
  EXPECT_EQ(ths::to_text(from_file), text);
}

TEST(MonitoredTrainingSessionGraphTest, AResumeOfTheSameGraphWritesNoSecondGraphEvent) {
  th::testing::TempDir dir;
  {
    Model m;
    train(m, dir.path(), 2);
  }
  {
    Model m;
    train(m, dir.path(), 2);
    EXPECT_EQ(m.g.global_step_value(), 4);  // resumed
  }
  EXPECT_EQ(graph_events(dir.path()).size(), 1u);
  {
    // Another model in the same directory: its graph is written anew.
    Model m;
    m.g.op("extra", [&m](th::Run& r) { return r[m.loss] * 2; });
    train(m, dir.path(), 1);
  }
  const auto events = graph_events(dir.path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_NE(ths::parse_graph_def(events[1]).find("extra"), nullptr);
  EXPECT_NE(ths::parse_graph_def_text(read_file(dir.file("graph.pbtxt"))).find("extra"), nullptr);
}

TEST(MonitoredTrainingSessionGraphTest, ASeparateSummaryDirGetsTheGraphEventToo) {
  th::testing::TempDir dir;
  th::testing::FakeEnv fake;
  Model m;
  {
    th::MonitoredTrainingSession sess(m.g, {.checkpoint_dir = dir.file("ckpt"),
                                            .summary_dir = dir.file("logs"),
                                            .checkpoints = {.save_steps = 100},
                                            .env = fake.env()});
    sess.run(m.train, m.feeds());
    sess.close();
  }
  ths::EventWriter::clear_cache();
  EXPECT_EQ(graph_events(dir.file("ckpt")).size(), 1u);
  EXPECT_EQ(graph_events(dir.file("logs")).size(), 1u);
}

}  // namespace graph_export_test
