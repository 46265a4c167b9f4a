// `trainhooks report LOGDIR -o report.html`: the board page with its data and scripts inlined, as
// one HTML file that opens from disk with no server.
//
// The page's stylesheets become <style> elements and its scripts inline <script>s, and before
// board.js a script sets window.TRAINHOOKS_REPORT = {title, generated, responses, images}:
// `responses` maps every URL the page requests at first load (/api/runs, then each series of
// each run, by the canonical URL of docs/tensorboard.md) to BoardApi's answer, scalars
// downsampled to max_points; `images` maps each /api/image URL to a data: URL. The page answers
// its requests from there and fetches nothing. "</" in inlined text is written "<\/" so that no
// data can end its script.
//
//   th::board::write_report("runs", "report.html", {.title = "exp 12"});
#pragma once
#include <filesystem>
#include <string>

#include "trainhooks/board/logdir_index.h"

namespace trainhooks::board {

struct ReportOptions {
  std::string title{};        // empty: the log directory's name
  int64_t max_points = 5000;  // per scalar series, downsampled as the API does
};

// The report's HTML for an index that has been refreshed. Throws InvalidArgument for max_points
// outside [2, 100000].
std::string render_report(const LogdirIndex& index, const ReportOptions& options = {});

// What write_report() wrote.
struct ReportStats {
  int64_t runs = 0;
  int64_t tags = 0;  // over all runs: the scalar, histogram, image and text tags shown
  int64_t bytes = 0;
};

// Reads `logdir` and writes the report to `output` crash-safe (temp, fsync, rename): `output` is
// the old file or the whole new one, never a part. Throws InvalidArgument when `logdir` is not a
// directory and the errors of util/atomic_file.h (naming the path) when `output` cannot be
// written.
ReportStats write_report(const std::filesystem::path& logdir, const std::filesystem::path& output,
                         const ReportOptions& options = {});

}  // namespace trainhooks::board
