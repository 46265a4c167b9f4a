// The board page's files (src/board/web/ and the vendored uPlot under third_party/uplot/),
// compiled into the binary at build time so that `trainhooks board` needs no files beside it.
#pragma once
#include <string_view>

namespace trainhooks::board {

struct Asset {
  std::string_view path;          // as served: "/", "/board.js", "/uPlot.iife.min.js", ...
  std::string_view content_type;  // "text/html; charset=utf-8", ...
  std::string_view data;
};

// nullptr for a path that is not one of the page's files.
const Asset* find_asset(std::string_view path);

}  // namespace trainhooks::board
