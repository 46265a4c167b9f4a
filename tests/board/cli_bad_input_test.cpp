// The command line on input that is not what it should be: an empty or short file given to
// `trainhooks events`, a log directory of garbage given to `trainhooks report`, out-of-range
// options and an event file given to `trainhooks board`. Each exits non-zero with one line naming
// what is wrong; none exits 0.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "board/cli_test_util.h"
#include "summary/summary_test_util.h"
#include "trainhooks/summary/event_writer.h"

namespace trainhooks {
namespace cli_bad_input_test {

namespace fs = std::filesystem;
using board::testing::run_cli;
using trainhooks::summary::testing::TempDir;

class CliBadInputTest : public ::testing::Test {
 protected:
  fs::path write(const std::string& name, const std::string& bytes) {
    const fs::path path = dir_.path() / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  TempDir dir_;
};

// Each test runs the binary once or twice: it loads LibTorch, a second or two on a busy machine.

TEST_F(CliBadInputTest, EventsOnAnEmptyFileSaysSo) {
  const fs::path empty = write("events.out.tfevents.1700000000.host", "");
  const auto r = run_cli({"events", empty.string()}, dir_.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "trainhooks events: " + empty.string() + " is empty: not an event file\n");
}

TEST_F(CliBadInputTest, EventsOnAShortTextFileSaysItIsNoEventFile) {
  const fs::path notes = write("notes.txt", "not events\n");
  const auto r = run_cli({"events", notes.string(), "--csv"}, dir_.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "trainhooks events: " + notes.string() +
                       " is not an event file: 11 bytes, shorter than a record's 12-byte header\n");
}

TEST_F(CliBadInputTest, EventsOnAFileWithoutAWholeRecordSaysSo) {
  const fs::path real = dir_.path() / "run";
  {
    summary::EventWriter w(real);
    w.add_scalar("loss", 1, 1);
  }
  const std::string bytes = board::testing::read_text_file(fs::directory_iterator(real)->path());
  // The first record's header, and part of its data.
  const fs::path partial =
      write("partial/events.out.tfevents.1700000000.host", bytes.substr(0, 20));
  const auto r = run_cli({"events", partial.string()}, dir_.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "trainhooks events: " + partial.string() +
                       " holds no complete record: it is not an event file, or its writer has "
                       "not finished the first record\n");
}

TEST_F(CliBadInputTest, ReportOnALogDirectoryOfGarbageFails) {
  const fs::path garbage = dir_.path() / "garbage";
  write("garbage/events.out.tfevents.1700000000.host", "this is not a TFRecord file at all\n");
  write("garbage/run2/events.out.tfevents.1700000001.host", "");
  write("garbage/notes.txt", "hello\n");
  const fs::path out = dir_.path() / "r.html";
  const auto r = run_cli({"report", garbage.string(), "-o", out.string()}, dir_.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, ::testing::EndsWith("trainhooks report: no events in '" + garbage.string() +
                                         "': none of its 2 event files holds a readable "
                                         "record\n"));
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(CliBadInputTest, ReportOnALogDirectoryWithoutEventFilesFails) {
  const fs::path nothing = dir_.path() / "nothing";
  write("nothing/notes.txt", "hello\n");
  const fs::path out = dir_.path() / "r.html";
  const auto r = run_cli({"report", nothing.string(), "-o", out.string()}, dir_.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "trainhooks report: no event files in '" + nothing.string() +
                       "' (a run is a directory holding events.out.tfevents.* files)\n");
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(CliBadInputTest, ReloadIntervalOutOfRangeIsAUsageError) {
  const fs::path logdir = dir_.path() / "logs";
  fs::create_directories(logdir);
  for (const std::string value : {"0", "1e309"}) {
    SCOPED_TRACE(value);
    const auto r = run_cli({"board", logdir.string(), "--reload-interval", value}, dir_.path());
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err,
              "trainhooks board: --reload-interval: must be a number of seconds above 0 "
              "and at most 86400, got '" +
                  value + "' (see trainhooks board --help)\n");
  }
}

TEST_F(CliBadInputTest, BoardOnAnEventFileSaysToGiveItsDirectory) {
  const fs::path run = dir_.path() / "logs" / "train";
  {
    summary::EventWriter w(run);
    w.add_scalar("loss", 1, 1);
  }
  const fs::path file = fs::directory_iterator(run)->path();
  const auto r = run_cli({"board", file.string(), "--port", "0"}, dir_.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "trainhooks board: '" + file.string() +
                       "' is an event file; board reads a log directory, every run in it: give "
                       "its directory (trainhooks board " +
                       run.string() + ")\n");
}

TEST_F(CliBadInputTest, BadAllowedHostIsAUsageError) {
  const fs::path logdir = dir_.path() / "logs";
  fs::create_directories(logdir);
  const auto r =
      run_cli({"board", logdir.string(), "--allow-host", "evil.example:80"}, dir_.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err,
            "trainhooks board: --allow-host: allowed host 'evil.example:80' is not a host name "
            "(letters, digits, '-', '_' and '.', or an IPv6 address; no port) (see trainhooks "
            "board --help)\n");
}

}  // namespace cli_bad_input_test
}  // namespace trainhooks
