#include "checkpoint/best_checkpoints.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "trainhooks/errors.h"
#include "util/atomic_file.h"
#include "util/path.h"

namespace trainhooks::internal {

namespace fs = std::filesystem;

std::string best_checkpoints_path(const std::string& checkpoint_dir) {
  return (fs::path(checkpoint_dir) / "best_checkpoints.json").string();
}

const char* metric_mode_name(MetricMode mode) { return mode == MetricMode::kMax ? "max" : "min"; }

std::optional<BestCheckpoints> read_best_checkpoints(const std::string& checkpoint_dir) {
  const std::string path = best_checkpoints_path(checkpoint_dir);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!fs::exists(path, ec)) return std::nullopt;
    throw FileError(fmt::format("Cannot read {}", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  try {
    const auto j = nlohmann::json::parse(text.str());
    BestCheckpoints best;
    best.metric = j.at("metric").get<std::string>();
    const std::string mode = j.at("mode").get<std::string>();
    if (mode != "min" && mode != "max") throw std::runtime_error("mode '" + mode + "'");
    best.mode = mode == "max" ? MetricMode::kMax : MetricMode::kMin;
    best.keep_best_n = j.at("keep_best_n").get<int>();
    for (const auto& c : j.at("checkpoints")) {
      const fs::path p(c.at("path").get<std::string>());
      // null: a NaN, which JSON cannot hold (never ranked).
      const double value = c.at("value").is_null() ? std::nan("") : c.at("value").get<double>();
      best.scored.push_back({p.is_absolute() ? p.string() : (fs::path(checkpoint_dir) / p).string(),
                             c.at("step").get<int64_t>(), value});
    }
    return best;
  } catch (const std::exception& e) {
    throw DataLossError(fmt::format("Cannot parse {}: {}", path, e.what()));
  }
}

void write_best_checkpoints(const std::string& checkpoint_dir, const BestCheckpoints& best) {
  auto checkpoints = nlohmann::json::array();
  for (const auto& c : best.scored) {
    const fs::path p(c.path);
    const bool inside = same_path(parent_dir(c.path), checkpoint_dir);
    nlohmann::json value = nullptr;
    if (std::isfinite(c.value)) value = c.value;
    checkpoints.push_back(
        {{"path", inside ? p.filename().string() : c.path}, {"step", c.step}, {"value", value}});
  }
  const nlohmann::json j = {{"metric", best.metric},
                            {"mode", metric_mode_name(best.mode)},
                            {"keep_best_n", best.keep_best_n},
                            {"checkpoints", checkpoints}};
  write_file_atomically(best_checkpoints_path(checkpoint_dir), j.dump(2) + "\n");
}

std::vector<ScoredCheckpoint> rank_best(const std::vector<ScoredCheckpoint>& scored,
                                        MetricMode mode, int keep_best_n) {
  std::vector<ScoredCheckpoint> ranked;
  for (const auto& c : scored)
    if (!std::isnan(c.value)) ranked.push_back(c);
  std::stable_sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) {
    // The rule plateau and early stopping compare by (metric_mode.h), without a min_delta.
    if (a.value != b.value) return improves(mode, a.value, b.value);
    return a.step < b.step;
  });
  if (ranked.size() > static_cast<size_t>(std::max(keep_best_n, 0))) ranked.resize(keep_best_n);
  return ranked;
}

}  // namespace trainhooks::internal
