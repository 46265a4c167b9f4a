// What the event writer leaves in its file when writes fail: a short write followed by ENOSPC,
// a file that cannot be cut back, a disk that stays full, and a real full tmpfs.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>

#include "summary_test_util.h"
#include "trainhooks/summary/event_file_io.h"
#include "trainhooks/summary/event_reader.h"
#include "trainhooks/summary/event_writer.h"

namespace trainhooks::summary {
namespace event_writer_failure_test {

using testing::TempDir;

// The real calls, except that writes stop after `space` more bytes (ENOSPC) when space >= 0,
// and truncation fails when asked to.
class FullDiskIo : public EventFileIo {
 public:
  ssize_t write(int fd, const char* data, size_t size) override {
    std::lock_guard lock(mu_);
    ++writes_;
    if (space_ < 0) return EventFileIo::write(fd, data, size);
    if (space_ == 0) {
      errno = ENOSPC;
      return -1;
    }
    const ssize_t n = EventFileIo::write(fd, data, std::min<size_t>(size, space_));
    if (n > 0) space_ -= n;
    return n;
  }
  int truncate(int fd, uint64_t size) override {
    std::lock_guard lock(mu_);
    ++truncates_;
    if (truncate_fails_) {
      errno = EIO;
      return -1;
    }
    return EventFileIo::truncate(fd, size);
  }
  void set_space(int64_t bytes) {
    std::lock_guard lock(mu_);
    space_ = bytes;
  }
  void set_truncate_fails(bool fails) {
    std::lock_guard lock(mu_);
    truncate_fails_ = fails;
  }
  int truncates() const {
    std::lock_guard lock(mu_);
    return truncates_;
  }

 private:
  mutable std::mutex mu_;
  int64_t space_ = -1;
  bool truncate_fails_ = false;
  int writes_ = 0;
  int truncates_ = 0;
};

// The steps of the scalar events in `path`, read strictly: a torn record in the middle of the
// file would throw.
std::vector<int64_t> scalar_steps(const std::filesystem::path& path) {
  std::vector<int64_t> steps;
  for (const Event& e : read_events(path)) {
    if (!e.values.empty() && e.values[0].kind == ValueKind::kScalar) steps.push_back(e.step);
  }
  return steps;
}

std::vector<int64_t> range(int64_t from, int64_t to) {
  std::vector<int64_t> v;
  for (int64_t s = from; s < to; ++s) v.push_back(s);
  return v;
}

class EventWriterFailureTest : public ::testing::Test {
 protected:
  EventWriterOptions options() {
    return {.env = {.clock = std::make_shared<FakeClock>(1700000000.0), .log = log_},
            .file_io = io_};
  }
  std::vector<std::string> logged(LogLevel level) const { return log_->messages(level); }

  TempDir dir_;
  std::shared_ptr<FullDiskIo> io_ = std::make_shared<FullDiskIo>();
  std::shared_ptr<CapturingLogSink> log_ = std::make_shared<CapturingLogSink>();
};

TEST_F(EventWriterFailureTest, ShortWriteThenFullDiskIsCutBackAndEveryLaterRecordReads) {
  EventWriter writer(dir_.path(), options());
  const auto path = writer.file_path();
  for (int s = 0; s < 10; ++s) writer.add_scalar("loss", 0.5f, s);
  writer.flush();
  const auto whole = std::filesystem::file_size(path);

  io_->set_space(30);  // the next write stops inside the first record, then ENOSPC
  for (int s = 10; s < 20; ++s) writer.add_scalar("loss", 0.5f, s);
  writer.flush();
  EXPECT_EQ(io_->truncates(), 1);
  EXPECT_EQ(std::filesystem::file_size(path), whole);  // no torn record left in the file
  EXPECT_EQ(scalar_steps(path), range(0, 10));
  for (int s = 20; s < 30; ++s) writer.add_scalar("loss", 0.5f, s);
  writer.flush();  // still full: kept, not logged again

  io_->set_space(-1);
  for (int s = 30; s < 40; ++s) writer.add_scalar("loss", 0.5f, s);
  writer.flush();
  EXPECT_EQ(scalar_steps(path), range(0, 40));
  writer.close();
  EXPECT_EQ(writer.dropped_events(), 0);
  EXPECT_EQ(
      logged(LogLevel::kWarning),
      std::vector<std::string>{"Cannot write events to " + path.string() +
                               ": No space left on device; keeping them in memory to retry."});
  EXPECT_EQ(logged(LogLevel::kInfo),
            std::vector<std::string>{"Writing events to " + path.string() +
                                     " again; 0 events were dropped while writes failed."});
  EventReader reader(path);
  while (reader.next()) {
  }
  EXPECT_TRUE(reader.partial_records().empty());
}

TEST_F(EventWriterFailureTest, FileThatCannotBeCutIsCompletedByTheNextWrite) {
  EventWriter writer(dir_.path(), options());
  const auto path = writer.file_path();
  writer.add_scalar("loss", 1.0f, 1);
  writer.flush();
  io_->set_truncate_fails(true);
  io_->set_space(30);
  writer.add_scalar("loss", 1.0f, 2);
  writer.add_scalar("loss", 1.0f, 3);
  writer.flush();
  {
    EventReader reader(path);  // the file ends in the head of step 2's record
    while (reader.next()) {
    }
    ASSERT_EQ(reader.partial_records().size(), 1u);
    EXPECT_EQ(reader.partial_records()[0].bytes, 30u);
  }
  io_->set_space(-1);
  writer.add_scalar("loss", 1.0f, 4);
  writer.close();
  EXPECT_EQ(scalar_steps(path), range(1, 5));
  EXPECT_EQ(writer.dropped_events(), 0);
}

TEST_F(EventWriterFailureTest, DiskThatStaysFullDropsPastFourMebibytesAndSaysHowMany) {
  EventWriter writer(dir_.path(), options());
  const auto path = writer.file_path();
  io_->set_space(0);
  const std::string text(1 << 20, 'x');
  for (int s = 1; s <= 4; ++s) {
    writer.add_text("notes", text, s);
    writer.flush();  // one write attempt per MiB; the fourth holds more than 4 MiB: all dropped
  }
  writer.add_text("notes", text, 5);
  writer.add_scalar("loss", 1.0f, 6);
  writer.flush();
  io_->set_space(-1);
  writer.add_scalar("loss", 1.0f, 7);
  writer.close();
  std::vector<int64_t> steps;
  for (const Event& e : read_events(path)) {
    if (!e.values.empty()) steps.push_back(e.step);
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{5, 6, 7}));
  EXPECT_EQ(writer.dropped_events(), 4);
  const std::string p = path.string();
  EXPECT_EQ(logged(LogLevel::kWarning),
            (std::vector<std::string>{
                "Cannot write events to " + p +
                    ": No space left on device; keeping them in memory to retry.",
                "Dropped 4 events for " + p +
                    ": writes keep failing (No space left on device); later drops are counted "
                    "until a write succeeds.",
                "Writing events to " + p + " again; 4 events were dropped while writes failed."}));
}

TEST_F(EventWriterFailureTest, CloseWhileTheDiskIsFullLogsTheDroppedCountAtError) {
  EventWriter writer(dir_.path(), options());
  const auto path = writer.file_path();
  writer.add_scalar("loss", 1.0f, 1);
  writer.flush();
  io_->set_space(0);
  for (int s = 2; s <= 4; ++s) writer.add_scalar("loss", 1.0f, s);
  writer.close();
  EXPECT_EQ(writer.dropped_events(), 3);
  EXPECT_EQ(logged(LogLevel::kError),
            std::vector<std::string>{"Closed " + path.string() +
                                     " while writes were failing (No space left on device): 3 "
                                     "events dropped."});
  EXPECT_EQ(scalar_steps(path), range(1, 2));
}

// A small tmpfs mounted for the test (needs CAP_SYS_ADMIN), unmounted at the end.
class TmpfsMount {
 public:
  TmpfsMount(const std::filesystem::path& dir, const std::string& size) : dir_(dir) {
    std::filesystem::create_directories(dir);
    const std::string data = "size=" + size;
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, data.c_str()) == 0) {
      mounted_ = true;
    } else {
      error_ = std::strerror(errno);
    }
  }
  ~TmpfsMount() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }

 private:
  std::filesystem::path dir_;
  bool mounted_ = false;
  std::string error_;
};

// Writes to `path` until the file system has no space left.
void fill(const std::filesystem::path& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  const std::string chunk(4096, 'f');
  while (std::fwrite(chunk.data(), 1, chunk.size(), f) == chunk.size() && std::fflush(f) == 0) {
  }
  std::fclose(f);
}

TEST_F(EventWriterFailureTest, FullTmpfsBrieflyThenFreedLosesNoRecordAndTearsNone) {
  TmpfsMount mount(dir_.path() / "small", "64k");
  if (!mount.mounted()) {
    GTEST_SKIP() << "cannot mount a tmpfs here (" << mount.error()
                 << "); mounting needs root with CAP_SYS_ADMIN";
  }
  // io_ makes the real calls (it has no limit of its own) and counts the truncations.
  EventWriter writer(dir_.path() / "small" / "logs", options());
  const auto path = writer.file_path();
  for (int s = 0; s < 50; ++s) writer.add_scalar("loss", 0.25f, s);
  writer.flush();

  fill(dir_.path() / "small" / "filler");
  for (int s = 50; s < 150; ++s) writer.add_scalar("loss", 0.25f, s);  // more than a page
  writer.flush();
  {
    EventReader reader(path);  // strict: a torn record would throw
    int64_t n = 0;
    while (reader.next()) ++n;
    EXPECT_GE(n, 51);
    EXPECT_TRUE(reader.partial_records().empty());
  }
  // The write filled the file's last page and stopped part-way: it was cut back.
  EXPECT_EQ(io_->truncates(), 1);
  for (int s = 150; s < 160; ++s) writer.add_scalar("loss", 0.25f, s);
  writer.flush();
  ASSERT_EQ(logged(LogLevel::kWarning).size(), 1u);  // once for the whole time it was full

  std::filesystem::remove(dir_.path() / "small" / "filler");
  for (int s = 160; s < 200; ++s) writer.add_scalar("loss", 0.25f, s);
  writer.close();
  EXPECT_EQ(scalar_steps(path), range(0, 200));
  EXPECT_EQ(writer.dropped_events(), 0);
  EXPECT_EQ(
      logged(LogLevel::kWarning),
      std::vector<std::string>{"Cannot write events to " + path.string() +
                               ": No space left on device; keeping them in memory to retry."});
}

}  // namespace event_writer_failure_test
}  // namespace trainhooks::summary
