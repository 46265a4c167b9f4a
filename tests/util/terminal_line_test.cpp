#include "util/terminal_line.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "trainhooks/env.h"

namespace th = trainhooks;

namespace terminal_line_test {

// Runs `fn` with stderr redirected into a pipe and returns what it wrote.
template <typename Fn>
std::string captured_stderr(Fn&& fn) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const int saved = ::dup(2);
  ::dup2(fds[1], 2);
  fn();
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  return out;
}

TEST(TerminalLineTest, TheMarkIsTakenOnce) {
  EXPECT_FALSE(th::internal::take_partial_line(2));
  th::internal::set_partial_line(2, true);
  EXPECT_TRUE(th::internal::take_partial_line(2));
  EXPECT_FALSE(th::internal::take_partial_line(2));
  th::internal::set_partial_line(2, true);
  th::internal::set_partial_line(2, false);
  EXPECT_FALSE(th::internal::take_partial_line(2));
  th::internal::set_partial_line(7, true);  // not tracked
  EXPECT_FALSE(th::internal::take_partial_line(7));
}

TEST(TerminalLineTest, TheStderrSinkErasesAPartialLineBeforeALogLine) {
  th::StderrLogSink sink;
  const std::string out = captured_stderr([&] {
    sink.log(th::LogLevel::kInfo, "first");
    th::internal::set_partial_line(2, true);
    sink.log(th::LogLevel::kInfo, "second");
    sink.log(th::LogLevel::kInfo, "third");
  });
  EXPECT_EQ(out, "INFO:trainhooks:first\n\r\x1b[KINFO:trainhooks:second\nINFO:trainhooks:third\n");
}

}  // namespace terminal_line_test
