// A small log directory with every kind of summary the board shows, for the board's tests:
//
//   <logdir>/train: scalars "loss" and "accuracy" at every step 1..steps, histogram "weights"
//                   every 10 steps, image "samples" (tag "samples/image", 28x28 gray) at 4 steps,
//                   text "notes" at 3 steps (the last one is kLastNote);
//   <logdir>/eval:  scalars "loss" and "accuracy" every 10 steps.
//
// write_feature_runs(dir) adds what the page's views beyond those are tested on:
//
//   <logdir>/lab:      scalars grouped by prefix ("train/loss", "train/acc", "eval/acc"), a
//                      constant "flat/zero" and "flat/const", "spiky" with one outlier among
//                      kSteps points; text "notes/md" (kMarkdownNote) at step 5;
//   <logdir>/<kHostileRun>: a scalar tagged kHostileTag.
//
// write_view_runs(dir) writes what the graph and hyperparameter views are tested on:
//
//   <logdir>/<kViewRuns[i].name>:       HParams plugin summaries (experiment, session start
//                                       info, and session end info unless the run is still
//                                       running), hyperparameters lr, optimizer, batch and
//                                       kHostileHParam, scalar "loss" at steps 10, 20, 30;
//   <logdir>/<kViewRuns[i].name>/eval:  scalar "accuracy" at steps 10, 20, 30;
//   <logdir>/<kGraphRun>:               also the graph test_graph_def() (kGraphNodes nodes,
//                                       kGraphEdges edges, one of them named kHostileNode).
//
// Values and wall times are deterministic (a fixed seed; a fake clock, one step every
// kSecondsPerStep seconds from kStartTime), so tests may assert exact numbers.
//
//   write_test_logdir(dir);           // then: LogdirIndex index(dir); index.refresh(); ...
//
// Header-only: the board's test program is built from tests/board/*_test.cpp.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "trainhooks/summary/event_writer.h"
#include "trainhooks/summary/graph_def.h"
#include "trainhooks/summary/hparams.h"
#include "trainhooks/summary/summary.h"
#include "trainhooks/testing/fake_env.h"

namespace trainhooks::board::testing {

inline constexpr double kStartTime = 1700000000.0;
inline constexpr double kSecondsPerStep = 36.0;
inline constexpr int64_t kSteps = 100;
inline constexpr const char* kImageTag = "samples/image";
inline constexpr int64_t kImageSize = 28;
// Markup in a note must reach the page as text.
inline constexpr const char* kLastNote = "lr halved to 0.05 <b>not bold</b> & kept";

// Markdown with markup and script in every form a note could carry them: none may run or
// become an element other than Markdown's own.
inline constexpr const char* kMarkdownNote =
    "# Results\n"
    "\n"
    "**bold** and *emphasis* and `code`\n"
    "\n"
    "- first item\n"
    "- second item\n"
    "\n"
    "<script>window.__pwned = 'script'</script>\n"
    "\n"
    "<img src=x onerror=\"window.__pwned = 'img'\">\n"
    "\n"
    "[a link](javascript:window.__pwned='link') and [a page](https://example.com/)\n";
// A run and a tag named like markup, which must reach the page as text.
inline constexpr const char* kHostileRun = "<img src=x onerror=window.__pwned='run'>";
inline constexpr const char* kHostileTag = "<script>window.__pwned='tag'</script>";

// Names from the graph and the hyperparameters, which must reach the page as text.
inline constexpr const char* kHostileNode = "<img src=x onerror=window.__pwned='node'>";
inline constexpr const char* kHostileOp = "<script>window.__pwned='op'</script>";
inline constexpr const char* kHostileHParam = "<img src=x onerror=window.__pwned='hparam'>";
inline constexpr const char* kHostileValue = "<script>window.__pwned='value'</script>";

// Runs of write_view_runs(): their hyperparameters and final metrics (exact in float).
struct ViewRun {
  const char* name;
  double lr;
  const char* optimizer;
  int64_t batch;
  float accuracy;  // the last "accuracy" of <name>/eval
  float loss;      // the last "loss" of <name>
  bool ended;      // a session end info (success) was written
};
inline constexpr ViewRun kViewRuns[] = {
    {"hp/adam", 0.002, "adam", 64, 0.875f, 0.5f, true},
    {"hp/sgd", 0.05, "sgd", 128, 0.8125f, 0.25f, false},
    {"hp/sgd-slow", 0.01, "sgd", 32, 0.75f, 1.5f, true},
};
inline constexpr const char* kGraphRun = "hp/adam";
inline constexpr int64_t kGraphNodes = 9;
inline constexpr int64_t kGraphEdges = 10;

// A small model's graph as MonitoredTrainingSession exports it (docs/formats.md), and a node
// named like markup reading "x".
inline summary::GraphDef test_graph_def() {
  using summary::DataType;
  using summary::TensorShape;
  summary::GraphDef g;
  const std::string cpu = "/device:CPU:0";
  g.nodes.push_back({.name = "x",
                     .op = "Placeholder",
                     .attrs = {{"dtype", DataType::kFloat}, {"shape", TensorShape{{-1, 784}}}}});
  g.nodes.push_back({.name = "y",
                     .op = "Placeholder",
                     .attrs = {{"dtype", DataType::kInt64}, {"shape", TensorShape{{-1}}}}});
  g.nodes.push_back({.name = "net/fc.weight",
                     .op = "VariableV2",
                     .device = cpu,
                     .attrs = {{"dtype", DataType::kFloat}, {"shape", TensorShape{{10, 784}}}}});
  g.nodes.push_back({.name = "net/fc.bias",
                     .op = "VariableV2",
                     .device = cpu,
                     .attrs = {{"dtype", DataType::kFloat}, {"shape", TensorShape{{10}}}}});
  g.nodes.push_back({.name = "global_step",
                     .op = "VariableV2",
                     .device = cpu,
                     .attrs = {{"dtype", DataType::kInt64}, {"shape", TensorShape{}}}});
  g.nodes.push_back({.name = "logits",
                     .op = "CppFunc",
                     .inputs = {"x", "net/fc.weight", "net/fc.bias"},
                     .device = cpu,
                     .attrs = {{"T", DataType::kFloat},
                               {"_output_shapes", std::vector<TensorShape>{{{-1, 10}}}}}});
  g.nodes.push_back({.name = "loss",
                     .op = "CppFunc",
                     .inputs = {"logits", "y"},
                     .device = cpu,
                     .attrs = {{"T", DataType::kFloat}}});
  g.nodes.push_back({.name = "train",
                     .op = "ApplyGradients",
                     .inputs = {"loss", "net/fc.weight", "net/fc.bias", "global_step"},
                     .attrs = {{"optimizer", std::string("adam")}}});
  g.nodes.push_back({.name = kHostileNode,
                     .op = kHostileOp,
                     .inputs = {"x"},
                     .attrs = {{kHostileHParam, std::string(kHostileValue)}}});
  return g;
}

inline double test_wall_time(int64_t step) {
  return kStartTime + kSecondsPerStep * static_cast<double>(step);
}

inline float test_loss(int64_t step, double noise) {
  return static_cast<float>(2.3 * std::exp(-static_cast<double>(step) / 30.0) + 0.25 + noise);
}

inline float test_accuracy(int64_t step, double noise) {
  return static_cast<float>(0.95 - 0.85 * std::exp(-static_cast<double>(step) / 25.0) + noise);
}

// A ring whose radius grows with `k`, in [0, 1]: something recognisable when scaled up.
inline at::Tensor test_image(int64_t k) {
  std::vector<float> pixels(kImageSize * kImageSize);
  const double radius = 4.0 + 2.5 * static_cast<double>(k);
  for (int64_t y = 0; y < kImageSize; ++y) {
    for (int64_t x = 0; x < kImageSize; ++x) {
      const double d = std::hypot(static_cast<double>(x) - 13.5, static_cast<double>(y) - 13.5);
      pixels[y * kImageSize + x] =
          static_cast<float>(std::max(0.0, 1.0 - std::abs(d - radius) / 2.5));
    }
  }
  return at::from_blob(pixels.data(), {1, 1, kImageSize, kImageSize}, at::kFloat).clone();
}

inline void write_test_logdir(const std::filesystem::path& logdir, int64_t steps = kSteps) {
  auto clock = std::make_shared<FakeClock>(kStartTime);
  const summary::EventWriterOptions options{.env = {.clock = clock}};
  std::mt19937 rng(14);
  std::normal_distribution<double> noise(0.0, 1.0);

  summary::EventWriter train(logdir / "train", options);
  summary::EventWriter eval(logdir / "eval", options);
  const int64_t image_every = std::max<int64_t>(1, steps / 4);
  int64_t images = 0;
  for (int64_t step = 1; step <= steps; ++step) {
    clock->set_wall_seconds(test_wall_time(step));
    summary::Summary s;
    s.add_scalar("loss", test_loss(step, 0.06 * noise(rng)));
    s.add_scalar("accuracy", test_accuracy(step, 0.015 * noise(rng)));
    if (step % 10 == 0) {
      // Weights that drift and spread out as training goes on.
      std::vector<float> w(1000);
      const double spread = 0.1 + static_cast<double>(step) / 200.0;
      for (float& v : w)
        v = static_cast<float>(0.002 * static_cast<double>(step) + spread * noise(rng));
      s.add_histogram("weights",
                      at::from_blob(w.data(), {static_cast<int64_t>(w.size())}, at::kFloat));
    }
    if (step % image_every == 0) s.add_image("samples", test_image(images++), {.max_outputs = 1});
    if (step == 1) s.add_text("notes", "started: lr 0.1, batch 64");
    if (step == steps / 2) s.add_text("notes", "halfway\nsecond line");
    if (step == steps) s.add_text("notes", kLastNote);
    train.add_summary(std::move(s), step);
    if (step % 10 == 0) {
      summary::Summary e;
      e.add_scalar("loss", test_loss(step, 0.1 + 0.03 * noise(rng)));
      e.add_scalar("accuracy", test_accuracy(step, -0.04 + 0.01 * noise(rng)));
      eval.add_summary(std::move(e), step);
    }
  }
  train.close();
  eval.close();
}

inline void write_feature_runs(const std::filesystem::path& logdir) {
  auto clock = std::make_shared<FakeClock>(kStartTime);
  const summary::EventWriterOptions options{.env = {.clock = clock}};
  summary::EventWriter lab(logdir / "lab", options);
  for (int64_t step = 1; step <= kSteps; ++step) {
    clock->set_wall_seconds(test_wall_time(step));
    const auto x = static_cast<float>(step);
    summary::Summary s;
    s.add_scalar("train/loss", 1.0f / x)
        .add_scalar("train/acc", x / static_cast<float>(kSteps))
        .add_scalar("eval/acc", x / static_cast<float>(2 * kSteps))
        .add_scalar("flat/zero", 0.0f)
        .add_scalar("flat/const", 3.5f)
        .add_scalar("spiky", step == 40 ? 1000.0f : 1.0f + 0.01f * static_cast<float>(step % 3));
    if (step == 5) s.add_text("notes/md", kMarkdownNote);
    lab.add_summary(std::move(s), step);
  }
  lab.close();
  summary::EventWriter hostile(logdir / kHostileRun, options);
  hostile.add_scalar(kHostileTag, 1.0f, 1);
  hostile.close();
}

inline void write_view_runs(const std::filesystem::path& logdir) {
  auto clock = std::make_shared<FakeClock>(kStartTime);
  const summary::EventWriterOptions options{.env = {.clock = clock}};
  for (const ViewRun& run : kViewRuns) {
    summary::HParams hparams{
        .values = {{"lr", run.lr},
                   {"optimizer", run.optimizer},
                   {"batch", run.batch},
                   {kHostileHParam, kHostileValue}},
        .metrics = {{.tag = "accuracy", .group = "eval", .display_name = "test accuracy"},
                    {.tag = "loss"}}};
    summary::EventWriter writer(logdir / run.name, options);
    summary::EventWriter eval(logdir / run.name / "eval", options);
    if (std::string_view(run.name) == kGraphRun) writer.add_graph(test_graph_def());
    summary::Summary start;
    start.add_hparams_experiment(hparams, kStartTime)
        .add_hparams_session_start(hparams, kStartTime);
    writer.add_summary(std::move(start), 0);
    for (int64_t step = 10; step <= 30; step += 10) {
      clock->set_wall_seconds(test_wall_time(step));
      const float k = static_cast<float>(30 - step);  // 0 at the last step
      writer.add_scalar("loss", run.loss + 0.5f * k, step);
      eval.add_scalar("accuracy", run.accuracy - 0.0078125f * k, step);
    }
    if (run.ended) {
      summary::Summary end;
      end.add_hparams_session_end(summary::HParamsStatus::kSuccess, test_wall_time(30));
      writer.add_summary(std::move(end), 30);
    }
    writer.close();
    eval.close();
  }
}

}  // namespace trainhooks::board::testing
