// `trainhooks events` as a user runs it: the built binary, its exact output and exit status.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "summary/record_io.h"
#include "test_util.h"
#include "trainhooks/summary/event_reader.h"
#include "trainhooks/summary/event_writer.h"

namespace th = trainhooks;
namespace ths = trainhooks::summary;
namespace fs = std::filesystem;

namespace events_command_test {

struct Result {
  std::string output;  // stdout and stderr, as a terminal shows them
  int status = -1;
};

Result run_cli(const std::string& args) {
  const std::string command = std::string("timeout 60 ") + TRAINHOOKS_CLI + " " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return {};
  Result r;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), pipe)) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::string framed(const std::string& event) {
  std::string out;
  ths::append_record(out, event);
  return out;
}

std::string delimited(int field, const std::string& payload) {
  return std::string{static_cast<char>(field << 3 | 2), static_cast<char>(payload.size())} +
         payload;
}

ths::EventWriterOptions at_time(double secs) {
  return {.env = {.clock = std::make_shared<th::FakeClock>(secs),
                  .log = std::make_shared<th::CapturingLogSink>()}};
}

// One file: loss at steps 1..3 (0.5, 0.25, 0.125), written at 1700000000.
class EventsCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ths::EventWriter w(dir.path(), at_time(1700000000));
    w.add_scalar("loss", 0.5f, 1);
    w.add_scalar("loss", 0.25f, 2);
    w.add_scalar("loss", 0.125f, 3);
    w.close();
    file = w.file_path();
  }
  std::string table(const std::string& events, const std::string& rows) const {
    return "run . (" + dir.path() + ", 1 file, " + events + ")\n" + rows;
  }
  th::testing::TempDir dir;
  fs::path file;
};

TEST_F(EventsCommandTest, ListsTheRunsTagsAndExitsZero) {
  Result r = run_cli("events " + dir.path());
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output, table("4 events",
                            "  tag   kind    count  steps  last\n"
                            "  loss  scalar      3  1..3   0.125\n"));
}

TEST_F(EventsCommandTest, FileThatIsNotAnEventFileIsAnError) {
  write_file(dir.file("notes.txt"), "These are not events.\n");
  Result r = run_cli("events " + dir.file("notes.txt"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "trainhooks events: " + dir.file("notes.txt") +
                          " is not an event file: its first record fails its checks (length CRC "
                          "mismatch)\n");
}

TEST_F(EventsCommandTest, MissingPathIsAnError) {
  Result r = run_cli("events " + dir.file("nope"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "trainhooks events: No such directory: " + dir.file("nope") + "\n");
}

TEST_F(EventsCommandTest, TagThatMatchesNothingSaysSoAndExitsOne) {
  Result r = run_cli("events " + dir.path() + " --tag acc");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "trainhooks events: No values with tag 'acc' in " + dir.path() + "\n");
  r = run_cli("events " + dir.path() + " --csv --tag acc");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "trainhooks events: No scalar values with tag 'acc' in " + dir.path() + "\n");
  r = run_cli("events " + dir.path() + " --csv --tag loss");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output,
            "run,tag,step,wall_time,value\n.,loss,1,1700000000,0.5\n.,loss,2,1700000000,0.25\n"
            ".,loss,3,1700000000,0.125\n");
}

TEST_F(EventsCommandTest, TornTailIsANoteNotAnError) {
  const std::string whole = read_file(file);
  const std::string next = framed(std::string{0x10, 0x04});  // Event{step: 4}
  write_file(file, whole + next.substr(0, 7));
  Result r = run_cli("events " + dir.path());
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output, table("4 events",
                            "  tag   kind    count  steps  last\n"
                            "  loss  scalar      3  1..3   0.125\n") +
                          "trainhooks events: note: " + file.string() +
                          " ends in a partial record at byte " + "offset " +
                          std::to_string(whole.size()) + " (7 bytes): a writer is still " +
                          "writing it or stopped mid-record; the events before it were read\n");
}

TEST_F(EventsCommandTest, CorruptRecordStopsAfterPrintingWhatCameBeforeItUnlessSkipped) {
  // After steps 1..3: Event{step: 4} with a bit of its data flipped, then Event{step: 5}.
  std::string bytes = read_file(file);
  const size_t offset = bytes.size();
  bytes += framed(std::string{0x10, 0x04});
  bytes[offset + ths::kRecordHeaderSize] ^= 0x01;
  bytes += framed(std::string{0x10, 0x05});
  write_file(file, bytes);
  const std::string error = "Corrupt record in " + file.string() + " at byte offset " +
                            std::to_string(offset) + ": data CRC mismatch";

  Result r = run_cli("events " + dir.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, table("4 events",
                            "  tag   kind    count  steps  last\n"
                            "  loss  scalar      3  1..3   0.125\n") +
                          "trainhooks events: " + error + "\n");
  r = run_cli("events " + dir.path() + " --csv");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output,
            "run,tag,step,wall_time,value\n.,loss,1,1700000000,0.5\n"
            ".,loss,2,1700000000,0.25\n.,loss,3,1700000000,0.125\n"
            "trainhooks events: " +
                error + "\n");

  r = run_cli("events " + dir.path() + " --skip-corrupt");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output, "WARNING:trainhooks:" + error + "; skipped\n" +
                          table("5 events, 1 corrupt record skipped",
                                "  tag   kind    count  steps  last\n"
                                "  loss  scalar      3  1..3   0.125\n"));
  r = run_cli("events " + dir.path() + " --skip-corrupt --csv");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output, "WARNING:trainhooks:" + error + "; skipped\n" +
                          "run,tag,step,wall_time,value\n.,loss,1,1700000000,0.5\n"
                          ".,loss,2,1700000000,0.25\n.,loss,3,1700000000,0.125\n"
                          "trainhooks events: note: run .: 1 corrupt record skipped\n");
}

TEST_F(EventsCommandTest, CustomScalarsLayoutIsShownAsALayoutAndGraphsAreCounted) {
  const std::string chart = delimited(1, "loss");
  const std::string layout =
      delimited(1, delimited(1, "training") + delimited(2, chart)) +
      delimited(1, delimited(1, "eval") + delimited(2, chart) + delimited(2, chart));
  const std::string tensor = std::string{0x08, 0x07} + delimited(8, layout);
  const std::string metadata = delimited(1, delimited(1, "custom_scalars"));
  const std::string value = delimited(1, "custom_scalars__config__") +
                            std::string{0x42, static_cast<char>(tensor.size())} + tensor +
                            std::string{0x4a, static_cast<char>(metadata.size())} + metadata;
  std::string bytes = read_file(file);
  bytes += framed(delimited(4, "a GraphDef"));
  bytes += framed(delimited(5, delimited(1, value)));  // Event{summary: {value}} at step 0
  write_file(file, bytes);
  Result r = run_cli("events " + dir.path());
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output,
            table("6 events, 1 graph",
                  "  tag                       kind    count  steps  last\n"
                  "  custom_scalars__config__  layout      1  0      2 categories, 3 charts\n"
                  "  loss                      scalar      3  1..3   0.125\n"));
}

TEST_F(EventsCommandTest, RestartDiscardsOrphanedStepsAsTensorBoardDoesUnlessNoPurge) {
  const std::string run = dir.file("train");
  {
    ths::EventWriter first(run, at_time(1700000100));
    first.add_session_log(ths::SessionStatus::kStart, "", "", 1);
    for (int s = 1; s <= 6; ++s) first.add_scalar("acc", s / 10.0f, s);
  }
  {
    ths::EventWriter resumed(run, at_time(1700000200));
    resumed.add_session_log(ths::SessionStatus::kStart, "", "", 4);
    resumed.add_scalar("acc", 0.75f, 4);
  }
  const std::string root_rows =
      "  tag   kind    count  steps  last\n"
      "  loss  scalar      3  1..3   0.125\n";
  Result r = run_cli("events " + dir.path() + " --tag acc");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output, table("4 events", "  no summary values\n") + "\nrun train (" + run +
                          ", 2 files, 11 events)\n"
                          "  tag  kind    count  steps  last\n"
                          "  acc  scalar      4  1..4   0.75\n"
                          "  restart at step 4 (SessionLog START): 3 earlier values with step >= 4 "
                          "discarded\n");
  r = run_cli("events " + dir.path() + " --tag acc --csv");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output,
            "run,tag,step,wall_time,value\ntrain,acc,1,1700000100,0.1\ntrain,acc,2,1700000100,0.2\n"
            "train,acc,3,1700000100,0.3\ntrain,acc,4,1700000200,0.75\n"
            "trainhooks events: note: run train: restart at step 4 (SessionLog START): 3 earlier "
            "values with step >= 4 discarded\n");
  r = run_cli("events " + dir.path() + " --tag acc --no-purge --csv");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output,
            "run,tag,step,wall_time,value\ntrain,acc,1,1700000100,0.1\ntrain,acc,2,1700000100,0.2\n"
            "train,acc,3,1700000100,0.3\ntrain,acc,4,1700000100,0.4\ntrain,acc,5,1700000100,0.5\n"
            "train,acc,6,1700000100,0.6\ntrain,acc,4,1700000200,0.75\n");
}

// The steps of the `tag` rows of `trainhooks events --csv` output.
std::vector<int64_t> csv_steps(const std::string& csv, const std::string& tag) {
  std::vector<int64_t> steps;
  std::istringstream in(csv);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string run, t, step;
    std::getline(fields, run, ',');
    std::getline(fields, t, ',');
    std::getline(fields, step, ',');
    if (t == tag) steps.push_back(std::stoll(step));
  }
  return steps;
}

// The scenario with the seed program: 100 steps (summaries every 10 steps from step 1,
// checkpoints every 50), the newest checkpoint deleted, 30 more steps from step 50 into the same
// log directory. TensorBoard shows loss at 1..41 of the first run and 51..71 of the second; the
// first run's 51..91 are orphaned.
TEST(EventsRestartTest, ResumedRunShowsEveryStepOnceAsTensorBoardDoes) {
  th::testing::TempDir dir;
  const std::string binary = TRAINHOOKS_BINARY_DIR "/examples/seed_linear_regression";
  ASSERT_TRUE(fs::exists(binary)) << binary << " is not built";
  const std::string logdir = dir.file("logs"), ckpt = dir.file("ckpt");
  auto train = [&](int steps) {
    int status = 0;
    th::testing::run_command(binary + " --steps " + std::to_string(steps) + " --model " +
                                 dir.file("model.pt") + " --logdir " + logdir +
                                 " --checkpoint_dir " + ckpt + " --save_steps 50 2>>" +
                                 dir.file("stderr.txt"),
                             status);
    return status;
  };
  int ignored = 0;
  ASSERT_EQ(train(100), 0) << th::testing::run_command("cat " + dir.file("stderr.txt"), ignored);
  ASSERT_TRUE(fs::exists(ckpt + "/model.ckpt-50.trainstate"));
  ASSERT_TRUE(fs::exists(ckpt + "/model.ckpt-100.trainstate"));
  for (const auto& e : fs::directory_iterator(ckpt)) {
    if (e.path().filename().string().starts_with("model.ckpt-100")) fs::remove(e.path());
  }
  ASSERT_EQ(train(30), 0);

  Result r = run_cli("events " + logdir + " --csv --tag loss");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(csv_steps(r.output, "loss"), (std::vector<int64_t>{1, 11, 21, 31, 41, 51, 61, 71}));
  EXPECT_NE(r.output.find("trainhooks events: note: run .: restart at step 51 (SessionLog "
                          "START): "),
            std::string::npos)
      << r.output;
  r = run_cli("events " + logdir + " --csv --tag loss --no-purge");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(csv_steps(r.output, "loss"),
            (std::vector<int64_t>{1, 11, 21, 31, 41, 51, 61, 71, 81, 91, 51, 61, 71}));

  // The resumed session wrote START at its first step, restored step + 1, as TF's hook does.
  std::vector<int64_t> starts;
  for (const auto& e : ths::read_events(logdir)) {
    if (e.session_log && e.session_log->status == ths::SessionStatus::kStart) {
      starts.push_back(e.step);
    }
  }
  EXPECT_EQ(starts, (std::vector<int64_t>{1, 51}));
}

}  // namespace events_command_test
