#include "trainhooks/hooks/progress_bar_hook.h"

#include "util/terminal_line.h"

#include <ATen/core/Tensor.h>
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <system_error>

#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/hook_services.h"

namespace trainhooks {

namespace {

constexpr int kBarWidth = 20;
// Bounds the rate window's memory whatever refresh_secs and rate_window_secs are.
constexpr size_t kMaxSamples = 256;

TimerOptions every_secs(double secs, const char* name) {
  return {.every_secs = secs, .owner = "ProgressBarHook", .secs_name = name};
}

const ProgressBarHookOptions& validated(const ProgressBarHookOptions& o) {
  check_positive("ProgressBarHook", "rate_window_secs", o.rate_window_secs);
  if (o.total_steps) check_positive("ProgressBarHook", "total_steps", *o.total_steps);
  if (o.fd < 0)
    throw InvalidArgument(fmt::format("ProgressBarHook: fd must not be negative, got {}", o.fd));
  return o;
}

std::string hms(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(seconds));
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

// H:MM:SS, or "?" when the duration is unknown or beyond any meaningful wait.
std::string eta_text(std::optional<int64_t> steps_left, std::optional<double> rate) {
  if (!steps_left || !rate || !(*rate > 0)) return "?";
  const double seconds = static_cast<double>(std::max<int64_t>(0, *steps_left)) / *rate;
  if (!std::isfinite(seconds) || seconds >= 1e12) return "?";
  return hms(seconds);
}

std::string rate_text(std::optional<double> rate) {
  if (!rate) return "? steps/s";
  if (*rate > 0 && *rate < 1) return fmt::format("{:.1f} s/step", 1 / *rate);
  return fmt::format("{:.1f} steps/s", *rate);
}

// As Keras's progress bar prints a metric.
std::string loss_text(double v) {
  return std::abs(v) > 1e-3 ? fmt::format("{:.4f}", v) : fmt::format("{:.4e}", v);
}

double done_fraction(int64_t step, int64_t target) {
  if (target <= 0) return 1;
  return std::clamp(static_cast<double>(step) / static_cast<double>(target), 0.0, 1.0);
}

// The terminal's width in columns; 0 when unknown.
int terminal_columns(int fd) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) != 0) return 0;
  return ws.ws_col;
}

bool is_terminal(int fd) {
  if (!::isatty(fd)) return false;
  const char* term = std::getenv("TERM");
  // A dumb terminal (an editor's shell buffer) does not understand the erase sequence.
  return !(term && std::string_view(term) == "dumb");
}

// Blocks SIGPIPE in this thread for its lifetime and consumes a SIGPIPE raised meanwhile, so that
// writing to a pipe whose reader went away yields EPIPE instead of killing the process.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_only_);
    sigaddset(&pipe_only_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only_, &old_mask_);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~SigpipeGuard() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec no_wait{};
      while (sigtimedwait(&pipe_only_, nullptr, &no_wait) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_only_;
  sigset_t old_mask_;
  bool was_pending_ = false;
};

// Writes all of `text`, retrying on EINTR. Returns 0, or the errno of the failure.
int write_fully(int fd, std::string_view text) {
  SigpipeGuard guard;
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

}  // namespace

ProgressBarHook::ProgressBarHook(ProgressBarHookOptions options)
    : options_(validated(options)),
      plain_timer_(every_secs(options_.every_n_secs, "every_n_secs")),
      terminal_timer_(every_secs(options_.refresh_secs, "refresh_secs")) {}

ProgressBarHook::~ProgressBarHook() {
  if (line_still_open() && enabled_) write_fully(options_.fd, "\n");
}

bool ProgressBarHook::line_still_open() {
  if (!line_open_) return false;
  // On stdout or stderr a log line may have erased it (util/terminal_line.h).
  if (options_.fd == 1 || options_.fd == 2) return internal::take_partial_line(options_.fd);
  return true;
}

void ProgressBarHook::begin() {
  if (line_still_open()) write_out("\n");
  line_open_ = false;
  const bool terminal = options_.mode == ProgressBarMode::kTerminal ||
                        (options_.mode == ProgressBarMode::kAuto && is_terminal(options_.fd));
  mode_ = terminal ? ProgressBarMode::kTerminal : ProgressBarMode::kPlain;
  timer_ = terminal ? &terminal_timer_ : &plain_timer_;
  reset_timer(*timer_);
  loss_.reset();
  if (options_.loss) loss_ = graph().resolve(*options_.loss);
  input_.reset();
  if (options_.input) {
    input_ = graph().resolve(*options_.input);
    if (graph().kind(*input_) != NodeKind::kInput) {
      throw InvalidArgument(fmt::format("ProgressBarHook: input '{}' is not an input node ({})",
                                        graph().name(*input_),
                                        node_kind_name(graph().kind(*input_))));
    }
  } else if (auto inputs = graph().inputs(); inputs.size() == 1) {
    input_ = inputs.front();
  }
  start_.reset();
  loss_value_.reset();
}

void ProgressBarHook::after_create_session(Session& session, Coordinator&) {
  // A (re)created session may have restored an earlier step: rates and the target start afresh.
  const Sample now{env().clock->steady_seconds(), session.global_step()};
  if (!start_) start_ = now;
  samples_.assign(1, now);
  runs_ = 0;
  timer_->reset();
  timer_->update_last_triggered_step(runs_);
  target_resolved_ = false;
  target_.reset();
}

std::optional<int64_t> ProgressBarHook::resolve_target(int64_t global_step) {
  if (options_.total_steps) return options_.total_steps;
  if (auto last = services().stop_at_step()) return last;
  if (input_) {
    if (auto left = graph().input_batches_left(*input_)) return global_step + *left;
  }
  return std::nullopt;
}

SessionRunArgs ProgressBarHook::before_run(SessionRunContext& ctx) {
  draw_this_run_ = fetch_this_run_ = false;
  if (!enabled_) return {};
  const int64_t step = ctx.session().global_step();
  if (!target_resolved_) {
    // Here rather than in after_create_session: every hook's after_create_session (a
    // StopAtStepHook's among them) has run by now, whatever the hooks' order.
    target_ = resolve_target(step);
    target_resolved_ = true;
  }
  draw_this_run_ = timer_->should_trigger_for_step(runs_ + 1);
  if (draw_this_run_ && !options_.total_steps) {
    // A re-planned run moves its StopAtStepHook's step (TimeBudgetHook): the bar follows.
    if (auto last = services().stop_at_step()) target_ = last;
  }
  fetch_this_run_ = loss_ && (draw_this_run_ || (target_ && step + 1 == *target_));
  if (!fetch_this_run_) return {};
  return {Fetches(*loss_)};
}

void ProgressBarHook::after_run(SessionRunContext& ctx, const SessionRunValues& values) {
  ++runs_;
  if (!enabled_) return;
  if (fetch_this_run_) {
    const at::Tensor& t = values.results[*loss_];
    if (t.defined() && t.numel() > 0) {
      loss_value_ = t.numel() == 1 ? t.item<double>() : t.to(at::kDouble).mean().item<double>();
    }
  }
  if (!draw_this_run_) return;
  timer_->update_last_triggered_step(runs_);
  draw(ctx.session().global_step(), /*final=*/false);
}

void ProgressBarHook::end(Session& session) {
  if (!enabled_) return;
  if (!target_resolved_) {
    target_ = resolve_target(session.global_step());
  } else if (!options_.total_steps) {
    if (auto last = services().stop_at_step()) target_ = last;
  }
  draw(session.global_step(), /*final=*/true);
}

std::optional<double> ProgressBarHook::windowed_rate(double now, int64_t step) {
  // The reference is the oldest draw within the window, or the latest one when all are older.
  while (samples_.size() > 1 && samples_.front().seconds < now - options_.rate_window_secs)
    samples_.pop_front();
  std::optional<double> rate;
  if (!samples_.empty()) {
    const Sample& ref = samples_.front();
    if (now > ref.seconds && step >= ref.step)
      rate = static_cast<double>(step - ref.step) / (now - ref.seconds);
  }
  if (samples_.size() >= kMaxSamples) samples_.pop_front();
  samples_.push_back({now, step});
  return rate;
}

std::string ProgressBarHook::format_line(int64_t step, std::optional<double> rate,
                                         std::optional<double> elapsed) const {
  const bool terminal = mode_ == ProgressBarMode::kTerminal;
  std::string line = fmt::format("step {}", step);
  if (target_) {
    const double done = done_fraction(step, *target_);
    line += fmt::format("/{}", *target_);
    if (terminal) {
      const int filled = static_cast<int>(done * kBarWidth);
      line += fmt::format(" [{}{}] {:.1f}%", std::string(filled, '#'),
                          std::string(kBarWidth - filled, '.'), 100 * done);
    } else {
      line += fmt::format(" ({:.1f}%)", 100 * done);
    }
  }
  line += ", " + rate_text(rate);
  if (elapsed) {
    line += ", elapsed " + hms(*elapsed);
  } else if (target_) {
    line += ", ETA " + eta_text(*target_ - step, rate);
  }
  if (loss_value_) line += ", loss " + loss_text(*loss_value_);
  return line;
}

void ProgressBarHook::draw(int64_t step, bool final) {
  const double now = env().clock->steady_seconds();
  std::optional<double> rate;
  std::optional<double> elapsed;
  if (final) {
    elapsed = start_ ? now - start_->seconds : 0;
    if (start_ && now > start_->seconds && step >= start_->step)
      rate = static_cast<double>(step - start_->step) / *elapsed;
  } else {
    rate = windowed_rate(now, step);
  }
  std::string line = format_line(step, rate, elapsed);
  if (mode_ != ProgressBarMode::kTerminal) {
    write_out(line + "\n");
    return;
  }
  if (const int columns = terminal_columns(options_.fd); columns > 0) {
    const auto fits = static_cast<size_t>(columns - 1);
    if (line.size() > fits) {
      // First the bar goes, then whole fields from the end, then whatever still overflows.
      if (auto open = line.find(" ["); open != std::string::npos) {
        line.erase(open, line.find("] ", open) + 1 - open);
      }
      for (size_t comma; line.size() > fits && (comma = line.rfind(", ")) != std::string::npos;)
        line.resize(comma);
      if (line.size() > fits) line.resize(fits);
    }
  }
  write_out("\r" + line + (final ? "\x1b[K\n" : "\x1b[K"));
  line_open_ = enabled_ && !final;
  internal::set_partial_line(options_.fd, line_open_);
}

void ProgressBarHook::write_out(const std::string& text) {
  if (!enabled_) return;
  if (const int error = write_fully(options_.fd, text); error != 0) {
    enabled_ = false;
    line_open_ = false;
    // The log sink often writes to the same broken pipe (stderr): that must not kill the
    // process either.
    SigpipeGuard guard;
    env().warning(
        fmt::format("ProgressBarHook: cannot write to fd {}: {}. Progress is no longer "
                    "shown.",
                    options_.fd, std::generic_category().message(error)));
  }
}

}  // namespace trainhooks
