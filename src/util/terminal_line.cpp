#include "util/terminal_line.h"

#include <atomic>

namespace trainhooks::internal {

namespace {
std::atomic<bool> partial[3];
}

void set_partial_line(int fd, bool open) noexcept {
  if (fd == 1 || fd == 2) partial[fd].store(open, std::memory_order_relaxed);
}

bool take_partial_line(int fd) noexcept {
  if (fd != 1 && fd != 2) return false;
  return partial[fd].exchange(false, std::memory_order_relaxed);
}

}  // namespace trainhooks::internal
