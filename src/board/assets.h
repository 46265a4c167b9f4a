// The board page's files (src/board/web/ and the libraries vendored under third_party/),
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

// The page's own ES modules as served, the entry (which index.html loads) last. They import each
// other as "board/<file>": the page's import map resolves that to the file beside it, and
// `trainhooks report` writes an import map of its own with each module's text as a data: URL.
inline constexpr std::array<std::string_view, 13> kPageModules = {
    "/util.js",   "/settings.js", "/api.js",           "/runs.js",   "/cards.js",
    "/charts.js", "/scalars.js",  "/distributions.js", "/images.js", "/text.js",
    "/graph.js",  "/hparams.js",  "/board.js"};

// The libraries the page loads as classic scripts before its modules (vendored under
// third_party/), in the page's order, each with its licence file as served.
struct VendoredScript {
  std::string_view name;  // "uPlot"
  std::string_view path;  // "/uPlot.iife.min.js"
  std::string_view licence;
};
inline constexpr std::array<VendoredScript, 4> kVendoredScripts = {{
    {"uPlot", "/uPlot.iife.min.js", "/LICENSE.uPlot.txt"},
    {"markdown-it", "/markdown-it.umd.min.js", "/LICENSE.markdown-it.txt"},
    {"DOMPurify", "/purify.min.js", "/LICENSE.DOMPurify.txt"},
    {"dagre", "/dagre.min.js", "/LICENSE.dagre.txt"},
}};

}  // namespace trainhooks::board
