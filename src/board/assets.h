// The board page's files (src/board/web/ and the vendored uPlot under third_party/uplot/),
// compiled into the binary at build time so that `trainhooks board` needs no files beside it.
#pragma once
#include <array>
#include <string_view>

namespace trainhooks::board {

struct Asset {
  std::string_view path;          // as served: "/", "/board.js", "/uPlot.iife.min.js", ...
  std::string_view content_type;  // "text/html; charset=utf-8", ...
  std::string_view data;
};

// nullptr for a path that is not one of the page's files.
const Asset* find_asset(std::string_view path);

// The page's own scripts as served, in the order index.html loads them (after uPlot's): each
// builds on those before it. `trainhooks report` inlines them in their tags' places.
inline constexpr std::array<std::string_view, 6> kPageScripts = {
    "/board_base.js",          "/board_api.js",   "/board_scalars.js",
    "/board_distributions.js", "/board_cards.js", "/board.js"};

}  // namespace trainhooks::board
