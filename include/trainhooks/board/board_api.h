// BoardApi: the JSON API of `trainhooks board`, apart from HTTP so that it can be tested and used
// to build the self-contained report (report.h) without a socket. docs/tensorboard.md lists the
// endpoints.
//
//   GET /api/runs                         runs with their tags, grouped by kind
//   GET /api/scalars?run=R&tag=T[&max_points=N][&start_step=A&end_step=B][&format=csv|json]
//                                         format: the series as a file to download, every point
//                                         in the range (TensorBoard's CSV and JSON)
//   GET /api/histograms?run=R&tag=T       distribution bands (TensorBoard's compressed percentiles)
//   GET /api/images?run=R&tag=T           the kept images' steps, sizes and indexes
//   GET /api/image?run=R&tag=T&index=I    one image's bytes (image/png)
//   GET /api/text?run=R&tag=T
//   GET /api/graph?run=R                  the run's graph (its latest graph event): nodes with op,
//                                         inputs, device and attrs as text
//   GET /api/hparams                      every run's hyperparameters (HParams plugin
//                                         summaries) and final metrics, as a table
//
// Bad requests get a 4xx with {"error": "<message>"}: 404 for an unknown endpoint, run or tag (or
// a run without a graph), 422 for a graph event that holds no GraphDef,
// 400 for a missing, malformed or out-of-range parameter (max_points above 100000, a start_step
// after end_step, a format other than csv or json, a run name with a ".." component, a NUL, a
// backslash or a leading '/': "a..b" is a run like any other). Tags are only looked up, whatever
// they hold. Responses never name a path outside the log directory.
//
// Thread safety: handle() may be called from several threads at once (the index is).
#pragma once
#include <map>
#include <string>
#include <string_view>

#include "trainhooks/board/logdir_index.h"

namespace trainhooks::board {

struct ApiResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body{};
  // A download's Content-Disposition header (format=csv or json), empty otherwise.
  std::string content_disposition{};
};

class BoardApi {
 public:
  // The index must outlive the API. The API does not refresh it.
  explicit BoardApi(const LogdirIndex& index);

  // `path` is the request path ("/api/scalars"), `query` its decoded parameters.
  ApiResponse handle(std::string_view path, const std::map<std::string, std::string>& query) const;

  // Display downsampling when a request gives no max_points.
  static constexpr int64_t kDefaultMaxPoints = 2000;
  static constexpr int64_t kMaxMaxPoints = 100000;

 private:
  const LogdirIndex& index_;
};

}  // namespace trainhooks::board
