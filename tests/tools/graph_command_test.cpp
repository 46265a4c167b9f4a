// `trainhooks graph` as a user runs it: the built binary, its exact output and exit status.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "test_util.h"
#include "trainhooks/summary/event_writer.h"
#include "trainhooks/summary/graph_def.h"

namespace th = trainhooks;
namespace ths = trainhooks::summary;
namespace fs = std::filesystem;

namespace graph_command_test {

struct Result {
  std::string out;  // stdout
  std::string err;  // stderr
  int status = -1;
};

Result run_cli(const std::string& args, const th::testing::TempDir& dir) {
  const std::string err_file = dir.file("stderr.txt");
  const std::string command =
      std::string("timeout 60 ") + TRAINHOOKS_CLI + " " + args + " 2>" + err_file;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return {};
  Result r;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), pipe)) r.out.append(buf, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_file);
  r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return r;
}

ths::GraphDef graph(const std::string& op) {
  return {.nodes = {{.name = "x", .op = "Placeholder"}, {.name = "y", .op = op, .inputs = {"x"}}}};
}

class GraphCommandTest : public ::testing::Test {
 protected:
  th::testing::TempDir dir;  // the command's scratch (its stderr)
  th::testing::TempDir run;
};

TEST_F(GraphCommandTest, PrintsTheCheckpointDirectorysGraphPbtxt) {
  std::ofstream(run.file("graph.pbtxt")) << ths::to_text(graph("CppFunc"));
  const Result r = run_cli("graph " + run.path(), dir);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, ths::to_text(graph("CppFunc")));
  EXPECT_EQ(r.err, "");
  // The file itself, too.
  EXPECT_EQ(run_cli("graph " + run.file("graph.pbtxt"), dir).out, ths::to_text(graph("CppFunc")));
}

TEST_F(GraphCommandTest, PrintsTheLastGraphEventOfALogDirectoryOrEventFile) {
  fs::path file;
  {
    ths::EventWriter writer(run.path());
    writer.add_scalar("loss", 1.0f, 1);
    writer.add_graph(graph("First"));
    writer.add_graph(graph("Second"));
    file = writer.file_path();
  }
  Result r = run_cli("graph " + run.path(), dir);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, ths::to_text(graph("Second")));
  r = run_cli("graph " + file.string(), dir);
  EXPECT_EQ(r.out, ths::to_text(graph("Second")));
}

TEST_F(GraphCommandTest, ErrorsNameThePathAndExitWithOne) {
  Result r = run_cli("graph " + run.file("missing"), dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "trainhooks graph: No such file or directory: " + run.file("missing") + "\n");

  {
    ths::EventWriter writer(run.path());
    writer.add_scalar("loss", 1.0f, 1);
  }
  r = run_cli("graph " + run.path(), dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "trainhooks graph: No graph in " + run.path() +
                       ": no graph.pbtxt and no graph event in its event files\n");

  std::ofstream(run.file("graph.pbtxt")) << "node { nme: \"x\" }\n";
  r = run_cli("graph " + run.path(), dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, ::testing::StartsWith("trainhooks graph: " + run.file("graph.pbtxt") +
                                           ": Not a GraphDef in text format: line 1, column"));
  EXPECT_EQ(r.out, "");
}

TEST_F(GraphCommandTest, AMissingOrExtraArgumentIsAUsageError) {
  EXPECT_EQ(run_cli("graph", dir).status, 2);
  EXPECT_EQ(run_cli("graph a b", dir).status, 2);
}

}  // namespace graph_command_test
