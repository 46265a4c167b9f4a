#include "trainhooks/checkpoint/checkpoint_manager.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "checkpoint/adopt_storage.h"
#include "checkpoint/best_checkpoints.h"
#include "trainhooks/checkpoint/checkpoint_format.h"
#include "trainhooks/checkpoint/checkpoint_state.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/session.h"
#include "util/path.h"

namespace trainhooks {

namespace fs = std::filesystem;
using internal::same_path;

namespace {

double mtime_seconds(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
}

// Removes the temporary files (util/atomic_file.h: `.<name>.tmp-<pid>-<n>`) that writers killed
// mid-write left in `dir`: those whose process no longer exists.
void remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t at = name.rfind(".tmp-");
    if (name.empty() || name[0] != '.' || at == std::string::npos) continue;
    const long pid = std::strtol(name.c_str() + at + 5, nullptr, 10);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::error_code ignored;
    fs::remove(entry.path(), ignored);
  }
}

// The checkpoints `<basename>-<N>` in `dir` whose variables file exists, by step (then name).
std::vector<std::string> checkpoints_on_disk(const std::string& dir, const std::string& basename) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    // `<basename>-<digits>` exactly: path_for's names.
    if (name.rfind(basename + "-", 0) != 0 || name.find('-', basename.size() + 1) != name.npos)
      continue;
    const std::optional<int64_t> step = CheckpointManager::step_of(name);
    std::error_code ignored;
    if (!step || !entry.is_regular_file(ignored)) continue;
    found.emplace_back(*step, (fs::path(dir) / name).string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (auto& [step, path] : found) paths.push_back(std::move(path));
  return paths;
}

std::string file_names(const std::vector<std::string>& paths) {
  std::vector<std::string> names;
  for (const auto& p : paths) names.push_back(fs::path(p).filename().string());
  return fmt::format("{}", fmt::join(names, ", "));
}

// Rethrows a trainhooks error with context, keeping its type.
[[noreturn]] void rethrow_with(const Error& e, const std::string& context) {
  std::string message = fmt::format("{}: {}", context, e.what());
  // FileError shares kUnknown with UnknownError; keep its type, which recovery never retries.
  if (dynamic_cast<const FileError*>(&e)) throw FileError(message);
  throw_error(e.code(), message);
}

CheckpointManagerOptions checked(CheckpointManagerOptions o) {
  const fs::path base(o.basename);
  if (o.basename.empty() || base.has_parent_path() || o.basename == "." || o.basename == "..") {
    throw InvalidArgument(fmt::format(
        "CheckpointManager: invalid basename '{}' (a file name, e.g. 'model.ckpt')", o.basename));
  }
  const double hours = o.keep_checkpoint_every_n_hours;
  if (!(hours > 0) || std::isinf(hours)) {
    throw InvalidArgument(fmt::format(
        "CheckpointManager: invalid keep_checkpoint_every_n_hours {} (must be a positive number)",
        hours));
  }
  if (o.keep_best.n < 0) {
    throw InvalidArgument(
        fmt::format("CheckpointManager: invalid keep_best.n {} (must be >= 0)", o.keep_best.n));
  }
  if (o.keep_best.n > 0 && o.keep_best.metric.empty()) {
    throw InvalidArgument(
        "CheckpointManager: keep_best.n needs keep_best.metric (a metric name, e.g. 'eval/loss')");
  }
  if (o.keep_best.mode != MetricMode::kMin && o.keep_best.mode != MetricMode::kMax) {
    throw InvalidArgument(fmt::format("CheckpointManager: invalid keep_best.mode {} (kMin or kMax)",
                                      static_cast<int>(o.keep_best.mode)));
  }
  if (o.tf1_keep_period_start && !std::isfinite(*o.tf1_keep_period_start)) {
    throw InvalidArgument(
        fmt::format("CheckpointManager: invalid tf1_keep_period_start {} (a wall time)",
                    *o.tf1_keep_period_start));
  }
  return o;
}

bool contains_path(const std::vector<ScoredCheckpoint>& list, const std::string& path) {
  return std::any_of(list.begin(), list.end(),
                     [&](const ScoredCheckpoint& c) { return same_path(c.path, path); });
}

}  // namespace

CheckpointManager::CheckpointManager(std::string directory, CheckpointManagerOptions options)
    : directory_(std::move(directory)),
      options_(checked(std::move(options))),
      clock_(options_.env.clock ? options_.env.clock : Env::system().clock),
      created_at_(clock_->wall_seconds()),
      tf1_hours_rule_(options_.tf1_keep_period_start.has_value()) {
  if (directory_.empty()) throw InvalidArgument("CheckpointManager: directory must not be empty");
  prefix_ = (fs::path(directory_) / options_.basename).string();
  next_keep_time_ = options_.tf1_keep_period_start.value_or(created_at_) +
                    options_.keep_checkpoint_every_n_hours * 3600;
  // TensorFlow's CheckpointManager: a second earlier, so that a manager made again at once does
  // not count the period from after a checkpoint the previous one wrote.
  if (!tf1_hours_rule_) last_preserved_timestamp_ = created_at_ - 1;
}

CheckpointManager::~CheckpointManager() = default;

Env CheckpointManager::env() const {
  return Env{clock_, options_.env.sleeper, options_.env.log}.or_else(Env::system());
}

Env CheckpointManager::env_for(const Session& session) const {
  return Env{clock_, options_.env.sleeper, options_.env.log}
      .or_else(session.env())
      .or_else(Env::system());
}

Saver CheckpointManager::saver_for(Session& session) const {
  return Saver(session.graph(), {.env = Env{clock_, options_.env.sleeper, options_.env.log}});
}

// ---- Naming -------------------------------------------------------------------------------------

std::string CheckpointManager::path_for(std::string_view prefix, int64_t step) {
  if (step < 0)
    throw InvalidArgument(fmt::format("CheckpointManager: invalid step {} (must be >= 0)", step));
  return fmt::format("{}-{}", prefix, step);
}

std::string CheckpointManager::path_for(int64_t step) const { return path_for(prefix_, step); }

std::optional<int64_t> CheckpointManager::step_of(std::string_view path) {
  const size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const size_t dash = name.rfind('-');
  if (dash == std::string_view::npos || dash + 1 == name.size()) return std::nullopt;
  const char* first = name.data() + dash + 1;
  const char* last = name.data() + name.size();
  int64_t step = 0;
  auto [end, ec] = std::from_chars(first, last, step);
  if (ec != std::errc() || end != last || *first == '-' || *first == '+') return std::nullopt;
  return step;
}

// ---- Saving -------------------------------------------------------------------------------------

std::string CheckpointManager::save(Session& session, int64_t step,
                                    std::optional<CheckpointScore> score) {
  // No copy: the files are written before training goes on.
  return write_scored(saver_for(session).snapshot(session, path_for(step), /*copy=*/false),
                      options_.keep_best.n > 0 ? score : std::nullopt);
}

SaverSnapshot CheckpointManager::snapshot(Session& session, int64_t step,
                                          std::optional<CheckpointScore> score) {
  SaverSnapshot snapshot = saver_for(session).snapshot(session, path_for(step));
  if (options_.keep_best.n > 0 && score) {
    // For write(), which may run on another thread.
    std::lock_guard<std::mutex> lock(mu_);
    pending_.emplace_back(snapshot.path(), score);
  }
  return snapshot;
}

std::string CheckpointManager::write(SaverSnapshot snapshot) {
  std::optional<CheckpointScore> score;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(pending_.begin(), pending_.end(),
                           [&](const auto& p) { return p.first == snapshot.path(); });
    if (it != pending_.end()) {
      score = it->second;
      pending_.erase(it);
    }
  }
  return write_scored(std::move(snapshot), score);
}

std::string CheckpointManager::write_scored(SaverSnapshot snapshot,
                                            std::optional<CheckpointScore> score) {
  if (snapshot.empty()) throw InvalidArgument("CheckpointManager::write: the snapshot is empty");
  const std::string path = snapshot.path();
  if (!same_path(internal::parent_dir(path), directory_)) {
    throw InvalidArgument(fmt::format(
        "CheckpointManager::write: the snapshot's path '{}' is not in the directory '{}'", path,
        directory_));
  }
  const double timestamp = snapshot.wall_time();
  const Env env = this->env();
  std::lock_guard<std::mutex> write_lock(write_mu_);
  {
    // Before the first write: what the state file lists (retention goes on with it), and the
    // temporary files of writers killed mid-write.
    std::lock_guard<std::mutex> lock(mu_);
    recover_locked(env, nullptr);
    if (!temporaries_removed_) {
      remove_stale_temporaries(directory_);
      temporaries_removed_ = true;
    }
  }
  // The checkpoint's files, then the state file that lists them.
  Saver::write(std::move(snapshot));
  std::lock_guard<std::mutex> lock(mu_);
  record_locked(path, timestamp, env, score);
  return path;
}

void CheckpointManager::record_locked(const std::string& path, double timestamp, const Env& env,
                                      std::optional<CheckpointScore> score) {
  // Retention (TensorFlow's _RecordLastCheckpoint and _MaybeDeleteOldCheckpoints), decided on
  // copies and committed once the state file is written.
  std::vector<Listed> listed = checkpoints_;
  std::erase_if(listed, [&](const Listed& l) { return same_path(l.path, path); });
  listed.push_back({path, timestamp});
  const bool keep_best = options_.keep_best.n > 0;
  std::vector<ScoredCheckpoint> scored = scored_;
  if (keep_best) {
    // A rewritten step starts without a value; the score then gives one to the listed
    // checkpoint of its step, if any.
    std::erase_if(scored, [&](const ScoredCheckpoint& c) { return same_path(c.path, path); });
    if (score) {
      for (const auto& l : listed) {
        if (step_of(l.path) != score->step) continue;
        std::erase_if(scored, [&](const ScoredCheckpoint& c) { return same_path(c.path, l.path); });
        scored.push_back({l.path, score->step, score->value});
        std::sort(scored.begin(), scored.end(),
                  [](const auto& a, const auto& b) { return a.step < b.step; });
        break;
      }
    }
  }
  const std::vector<ScoredCheckpoint> best =
      keep_best ? internal::rank_best(scored, options_.keep_best.mode, options_.keep_best.n)
                : std::vector<ScoredCheckpoint>{};
  std::vector<Listed> dropped;
  const bool track_none = options_.max_to_keep <= 0;
  if (track_none) {
    // TensorFlow's Saver with max_to_keep 0: every file stays, none is tracked; the state file
    // lists the newest alone.
    listed.clear();
  } else {
    while (listed.size() > static_cast<size_t>(options_.max_to_keep)) {
      dropped.push_back(listed.front());
      listed.erase(listed.begin());
    }
  }
  const double period = options_.keep_checkpoint_every_n_hours * 3600;
  double next_keep = next_keep_time_;
  double last_preserved = last_preserved_timestamp_;
  std::vector<std::string> to_delete;
  for (const auto& d : dropped) {
    if (contains_path(best, d.path)) continue;  // kept on disk, ranked in best_checkpoints.json
    const bool keep =
        tf1_hours_rule_ ? d.timestamp > next_keep : d.timestamp - period >= last_preserved;
    if (keep) {
      next_keep += period;
      last_preserved = d.timestamp;
    } else {
      to_delete.push_back(d.path);
    }
  }

  if (keep_best) {
    // Values of checkpoints that are gone or no longer tracked go; a best one that fell out of
    // the best N is deleted once it is no longer listed.
    std::erase_if(scored, [&](const ScoredCheckpoint& c) {
      const bool is_listed = std::any_of(
          listed.begin(), listed.end(), [&](const Listed& l) { return same_path(l.path, c.path); });
      if (is_listed || contains_path(best, c.path)) return false;
      const bool was_kept = std::none_of(dropped.begin(), dropped.end(), [&](const Listed& d) {
        return same_path(d.path, c.path);
      });
      // Dropped ones were decided above; tracking none, nothing is deleted.
      if (was_kept && !track_none) to_delete.push_back(c.path);
      return true;
    });
    try {
      // Before the state file and any deletion: a kill leaves no ranked checkpoint deleted.
      internal::write_best_checkpoints(
          directory_,
          {options_.keep_best.metric, options_.keep_best.mode, options_.keep_best.n, scored});
    } catch (const Error& e) {
      rethrow_with(e, fmt::format("Cannot write the best checkpoints '{}'",
                                  internal::best_checkpoints_path(directory_)));
    }
  }

  CheckpointState st;
  st.model_checkpoint_path = path;
  for (const auto& l : listed) {
    st.all_model_checkpoint_paths.push_back(l.path);
    st.all_model_checkpoint_timestamps.push_back(l.timestamp);
  }
  // Tracking none, the newest is listed without a time stamp (as TensorFlow's Saver leaves it),
  // so that a manager reading the file later does not track it either.
  if (track_none) st.all_model_checkpoint_paths.push_back(path);
  st.last_preserved_timestamp = last_preserved;
  try {
    update_checkpoint_state(directory_, std::move(st), options_.save_relative_paths);
  } catch (const Error& e) {
    rethrow_with(
        e, fmt::format("Cannot write checkpoint state '{}'", checkpoint_state_path(directory_)));
  }
  checkpoints_ = std::move(listed);
  scored_ = std::move(scored);
  last_preserved_timestamp_ = last_preserved;
  next_keep_time_ = next_keep;
  last_touched_ = path;
  newest_ = path;

  for (const auto& p : to_delete) {
    for (const std::string& file : default_checkpoint_format().files(p)) {
      std::error_code ec;
      fs::remove(file, ec);
      if (ec)
        env.warning(fmt::format("Ignoring: cannot delete old checkpoint file '{}': {}", file,
                                ec.message()));
    }
  }
}

// ---- State --------------------------------------------------------------------------------------

void CheckpointManager::recover_locked(const Env& env,
                                       const std::optional<CheckpointState>* known) const {
  if (recovered_) return;
  recovered_ = true;
  if (options_.keep_best.n > 0) recover_best_locked(env);
  std::optional<CheckpointState> st;
  if (known) {
    st = *known;
  } else {
    try {
      st = get_checkpoint_state(directory_, env);
    } catch (const DataLossError& e) {
      env.warning(fmt::format(
          "{}; the checkpoints it lists are no longer tracked and will not be deleted", e.what()));
      return;
    }
  }
  if (!st) {
    // The state file was deleted (or never written by this basename's writer): say so before a
    // save can replace one of these files, and never delete them.
    const std::vector<std::string> found = checkpoints_on_disk(directory_, options_.basename);
    if (!found.empty() && !unlisted_reported_) {
      env.warning(fmt::format(
          "No checkpoint state file '{}', but the directory holds checkpoints it would list: {}. "
          "They are not tracked: none of them is deleted, and a save of the same step replaces it",
          checkpoint_state_path(directory_), file_names(found)));
    }
    unlisted_reported_ = true;
    return;
  }
  newest_ = st->model_checkpoint_path;
  const auto& paths = st->all_model_checkpoint_paths;
  const bool have_times = st->all_model_checkpoint_timestamps.size() == paths.size();
  if (tf1_hours_rule_) {
    for (size_t i = 0; i < paths.size(); ++i) {
      // As TensorFlow's recover_last_checkpoints: only those whose files exist; file times when
      // the state has none.
      if (!Saver::checkpoint_exists(paths[i])) continue;
      checkpoints_.push_back({paths[i], have_times ? st->all_model_checkpoint_timestamps[i]
                                                   : mtime_seconds(paths[i])});
    }
    last_preserved_timestamp_ = st->last_preserved_timestamp;
    return;
  }
  // TensorFlow's CheckpointManager: the hours rule goes on from the preserved time; a clock behind
  // it is said, and the rule starts again from now rather than deleting on a wrong clock.
  double last_preserved = st->last_preserved_timestamp;
  if (created_at_ < last_preserved) {
    env.warning(fmt::format(
        "The clock returned a value {} seconds behind the last preserved checkpoint timestamp in "
        "'{}': the keep_checkpoint_every_n_hours rule starts again from now",
        last_preserved - created_at_, checkpoint_state_path(directory_)));
    last_preserved = created_at_;
  }
  last_preserved_timestamp_ = last_preserved;
  if (options_.max_to_keep <= 0) return;  // none tracked
  for (size_t i = 0; i < paths.size(); ++i) {
    // Those written after the last preserved one, whose files exist: the others were kept by the
    // hours rule or are of unknown age (no time stamps), and are never deleted.
    const double written =
        std::min(have_times ? st->all_model_checkpoint_timestamps[i] : last_preserved, created_at_);
    if (!(written > last_preserved) || !Saver::checkpoint_exists(paths[i])) continue;
    checkpoints_.push_back({paths[i], written});
  }
}

void CheckpointManager::recover_best_locked(const Env& env) const {
  std::optional<internal::BestCheckpoints> best;
  try {
    best = internal::read_best_checkpoints(directory_);
  } catch (const Error& e) {
    env.warning(fmt::format("{}; the checkpoints it ranks are no longer kept as best", e.what()));
    return;
  }
  if (!best) return;
  if (best->metric != options_.keep_best.metric || best->mode != options_.keep_best.mode) {
    env.warning(fmt::format(
        "{} ranks checkpoints by {} ({}), this manager by {} ({}): the checkpoints it ranks are "
        "no longer kept as best, and none of them is deleted for it",
        internal::best_checkpoints_path(directory_), best->metric,
        internal::metric_mode_name(best->mode), options_.keep_best.metric,
        internal::metric_mode_name(options_.keep_best.mode)));
    return;
  }
  for (auto& c : best->scored)
    if (Saver::checkpoint_exists(c.path)) scored_.push_back(std::move(c));
}

std::vector<ScoredCheckpoint> CheckpointManager::best_checkpoints() const {
  if (options_.keep_best.n <= 0) return {};
  std::lock_guard<std::mutex> lock(mu_);
  recover_locked(env(), nullptr);
  return internal::rank_best(scored_, options_.keep_best.mode, options_.keep_best.n);
}

std::vector<std::string> CheckpointManager::checkpoints() const {
  std::lock_guard<std::mutex> lock(mu_);
  recover_locked(env(), nullptr);
  std::vector<std::string> out;
  for (const auto& c : checkpoints_) out.push_back(c.path);
  return out;
}

std::optional<std::string> CheckpointManager::latest() const {
  const Env env = this->env();
  std::optional<CheckpointState> st;
  try {
    st = get_checkpoint_state(directory_, env);
  } catch (const DataLossError& e) {
    env.warning(fmt::format("{}: Checkpoint ignored", e.what()));
    return std::nullopt;
  }
  if (!st) return std::nullopt;
  if (Saver::checkpoint_exists(st->model_checkpoint_path)) return st->model_checkpoint_path;
  env.error(fmt::format("Couldn't match files for checkpoint {}", st->model_checkpoint_path));
  return std::nullopt;
}

bool CheckpointManager::saved_at(int64_t step) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (last_touched_.empty() || newest_.empty()) return false;
  return same_path(last_touched_, newest_) && same_path(newest_, path_for(step)) &&
         Saver::checkpoint_exists(newest_);
}

// ---- Restoring ----------------------------------------------------------------------------------

std::optional<std::string> CheckpointManager::restore_latest(Session& session) {
  const Env env = env_for(session);
  const std::optional<CheckpointState> st = get_checkpoint_state(directory_, env);
  std::vector<std::string> candidates;
  std::string source = fmt::format("listed in {}", checkpoint_state_path(directory_));
  if (st) {
    candidates.push_back(st->model_checkpoint_path);
    for (auto it = st->all_model_checkpoint_paths.rbegin();
         it != st->all_model_checkpoint_paths.rend(); ++it) {
      bool seen = false;
      for (const auto& c : candidates) seen = seen || same_path(c, *it);
      if (!seen) candidates.push_back(*it);
    }
  } else {
    // No state file, but checkpoints of ours: it was deleted (or lost in a copy). The files
    // verify themselves, so resuming from the newest is safe, and starting from scratch would
    // overwrite them one by one as the steps come round again (TensorFlow starts from scratch).
    const std::vector<std::string> found = checkpoints_on_disk(directory_, options_.basename);
    if (found.empty()) return std::nullopt;
    candidates.assign(found.rbegin(), found.rend());
    env.warning(fmt::format(
        "No checkpoint state file '{}', but the directory holds checkpoints: {}. Restoring the "
        "newest one that can be restored instead of starting from scratch; they are not tracked, "
        "so none of them is deleted. To start from scratch, remove them or use another directory",
        checkpoint_state_path(directory_), file_names(found)));
    source = fmt::format("found in {} (it has no state file)", directory_);
    std::lock_guard<std::mutex> lock(mu_);
    unlisted_reported_ = true;
  }
  const Saver saver = saver_for(session);
  std::vector<std::string> failures;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string& path = candidates[i];
    std::optional<TrainingSnapshot> cp;
    try {
      cp = saver.read(session, path);
    } catch (const Error& e) {
      if (e.code() != Code::kDataLoss && e.code() != Code::kNotFound) throw;
      env.warning(fmt::format("Checkpoint {} cannot be restored: {}. {}", path, e.what(),
                              i + 1 < candidates.size() ? "Falling back to the previous checkpoint."
                                                        : "No earlier checkpoint is listed."));
      failures.push_back(e.what());
      continue;
    }
    internal::apply_adopting_storage(session.graph(), *cp,
                                     [&] { saver.apply(session, *cp, path); });
    std::lock_guard<std::mutex> lock(mu_);
    recover_locked(env, &st);  // retention continues with what the state file lists
    if (!temporaries_removed_) {
      remove_stale_temporaries(directory_);
      temporaries_removed_ = true;
    }
    last_touched_ = path;
    return path;
  }
  throw DataLossError(
      fmt::format("None of the {} checkpoint(s) {} can be restored; not starting from scratch "
                  "over them. {}",
                  candidates.size(), source, fmt::join(failures, "; ")));
}

std::optional<std::string> latest_checkpoint(const std::string& checkpoint_dir, const Env& env) {
  return CheckpointManager(checkpoint_dir, {.env = env}).latest();
}

std::function<void(Session&)> restore_latest_checkpoint(
    std::shared_ptr<CheckpointManager> manager) {
  if (!manager) throw InvalidArgument("restore_latest_checkpoint: manager is null");
  return [manager = std::move(manager)](Session& session) { manager->restore_latest(session); };
}

}  // namespace trainhooks
