// GraphDef's bytes, written out by hand from TensorFlow's field numbers (graph.proto GraphDef.node
// = 1; node_def.proto NodeDef{name = 1, op = 2, input = 3, device = 4, attr = 5}; attr_value.proto
// AttrValue{list = 1, s = 2, i = 3, f = 4, b = 5, type = 6, shape = 7}), its text form, and graph
// events through the writer and the reader.
#include "trainhooks/summary/graph_def.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "summary/event_encoding.h"
#include "summary/record_io.h"
#include "summary_test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/summary/event_reader.h"
#include "trainhooks/summary/event_writer.h"

namespace trainhooks::summary {
namespace graph_def_test {

using testing::bytes;

GraphDef two_nodes() {
  return {.nodes = {{.name = "x", .op = "Placeholder", .attrs = {{"dtype", DataType::kFloat}}},
                    {.name = "y", .op = "CppFunc", .inputs = {"x"}}}};
}

TEST(GraphDefTest, SerializesWithTensorFlowsFieldNumbers) {
  // attr map entry {key = 1: "dtype", value = 2: AttrValue{type = 6: DT_FLOAT (1)}}
  const std::string entry = bytes({0x0a, 0x05}) + "dtype" + bytes({0x12, 0x02, 0x30, 0x01});
  const std::string x = bytes({0x0a, 0x01}) + "x" + bytes({0x12, 0x0b}) + "Placeholder" +
                        bytes({0x2a, static_cast<int>(entry.size())}) + entry;
  const std::string y =
      bytes({0x0a, 0x01}) + "y" + bytes({0x12, 0x07}) + "CppFunc" + bytes({0x1a, 0x01}) + "x";
  EXPECT_EQ(serialize_graph_def(two_nodes()), bytes({0x0a, static_cast<int>(x.size())}) + x +
                                                  bytes({0x0a, static_cast<int>(y.size())}) + y);
}

TEST(GraphDefTest, ShapesListsAndDevicesRoundTripThroughBothForms) {
  GraphDef g{
      .nodes = {{.name = "net/fc/weight",
                 .op = "VariableV2",
                 .device = "/device:CPU:0",
                 .attrs = {{"dtype", DataType::kFloat},
                           {"shape", TensorShape{.dims = {10, 1600}}},
                           {"_trainable", true},
                           {"_output_shapes",
                            std::vector<TensorShape>{{.dims = {-1, 3}}, {.unknown_rank = true}}},
                           {"output_types", std::vector<DataType>{DataType::kInt64}},
                           {"optimizer", std::string("adam")},
                           {"n", int64_t{3}},
                           {"f", 0.5}}}}};
  EXPECT_EQ(parse_graph_def(serialize_graph_def(g)), g);
  EXPECT_EQ(parse_graph_def_text(to_text(g)), g);
  // The same graph, the same bytes (attrs are a map: in key order).
  EXPECT_EQ(serialize_graph_def(g), serialize_graph_def(parse_graph_def(serialize_graph_def(g))));
}

TEST(GraphDefTest, TextIsProtobufsTextFormatAsInGraphPbtxt) {
  EXPECT_EQ(to_text(two_nodes()),
            "node {\n"
            "  name: \"x\"\n"
            "  op: \"Placeholder\"\n"
            "  attr {\n"
            "    key: \"dtype\"\n"
            "    value {\n"
            "      type: DT_FLOAT\n"
            "    }\n"
            "  }\n"
            "}\n"
            "node {\n"
            "  name: \"y\"\n"
            "  op: \"CppFunc\"\n"
            "  input: \"x\"\n"
            "}\n");
  EXPECT_EQ(graph_def_bytes_to_text(serialize_graph_def(two_nodes())), to_text(two_nodes()));
  EXPECT_STREQ(data_type_name(DataType::kBfloat16), "DT_BFLOAT16");
}

TEST(GraphDefTest, BytesOrTextThatAreNoGraphDefAreErrors) {
  EXPECT_THROW(parse_graph_def(bytes({0x0a, 0x7f, 0x01})), DataLossError);
  try {
    parse_graph_def_text("node {\n  name: \"x\"\n  colour: 3\n}\n");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), ::testing::StartsWith("Not a GraphDef in text format: line 3, column"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("colour"));
  }
}

TEST(GraphDefTest, AGraphEventIsEventFieldFourAndTheReaderKeepsItsBytes) {
  std::string out;
  append_graph_event(out, 0.0, 0, "abc");
  const std::string payload = out.substr(kRecordHeaderSize, 5);
  EXPECT_EQ(payload, bytes({0x22, 0x03}) + "abc");

  testing::TempDir dir;
  {
    EventWriter writer(dir.path());
    writer.add_graph(two_nodes());
  }
  const auto events = read_events(dir.path());
  ASSERT_EQ(events.size(), 2u);  // file_version, graph
  EXPECT_TRUE(events[1].graph_def);
  EXPECT_EQ(events[1].step, 0);
  EXPECT_EQ(parse_graph_def(events[1].graph_def_data), two_nodes());
}

}  // namespace graph_def_test
}  // namespace trainhooks::summary
