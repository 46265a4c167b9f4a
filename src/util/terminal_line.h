// A line redrawn in place on a terminal (a progress bar) that has not been ended yet.
//
// Whole lines written to the same terminal by someone else (the stderr log sink) would otherwise
// be appended to it. The owner of the partial line marks it; a writer of whole lines takes the
// mark, erases the line first ("\r\x1b[K") and writes its own; the owner redraws on its next turn.
// Only fds 1 and 2 are tracked; lock-free.
#pragma once

namespace trainhooks::internal {

void set_partial_line(int fd, bool open) noexcept;
// True at most once per set_partial_line(fd, true).
bool take_partial_line(int fd) noexcept;

}  // namespace trainhooks::internal
