// `trainhooks report LOGDIR -o report.html`: the board page with its data and scripts inlined, as
// one HTML file that opens from disk with no server.
//
// The page's stylesheets become <style> elements and its scripts data: URLs (the libraries'
// <script src>, the modules' import map), and before the entry module a script sets
// window.TRAINHOOKS_REPORT = {title, generated, responses, images}:
// `responses` maps every URL the page requests at first load (/api/runs, then each series of
// each run, by the canonical URL of docs/tensorboard.md) to BoardApi's answer, scalars
// downsampled to max_points; `images` maps each /api/image URL to a data: URL. The page answers
// its requests from there and fetches nothing. "</" in the inlined data is written "<\/" so that
// nothing in it can end its script.
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
  bool written_directly = false;  // into a character device or a FIFO, not a file put in place
};

// Reads `logdir` and writes the report to `output`:
//   - a regular file (or none yet) is written crash-safe (temp, fsync, rename): `output` is the
//     old file or the whole new one, never a part;
//   - a symbolic link is followed: its target is written as above and the link stays;
//   - a character device (/dev/stdout, /dev/null) or a FIFO is written into directly, never
//     replaced (a FIFO that no process reads is an error rather than a wait);
//   - a directory, a block device or a socket is refused.
// Errors name `output` and what is wrong: InvalidArgument when `logdir` is not a directory,
// NotFoundError when it holds no event files or `output`'s directory does not exist,
// DataLossError when none of its event files holds an event, FailedPreconditionError for an
// output refused, and the errors of util/atomic_file.h (ResourceExhaustedError for a full disk or
// device, ...) when the write fails.
ReportStats write_report(const std::filesystem::path& logdir, const std::filesystem::path& output,
                         const ReportOptions& options = {});

}  // namespace trainhooks::board
