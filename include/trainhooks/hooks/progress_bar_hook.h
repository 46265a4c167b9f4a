// ProgressBarHook: shows training progress (global step, percentage, ETA, steps/s, loss).
//
// On a terminal it redraws one line in place; elsewhere (a log file, a CI pipe) it writes a
// self-contained line every every_n_secs. Output goes straight to a file descriptor (stderr by
// default) with ::write, not through the log sink.
//
// When it acts:
//   begin()                 picks the mode (auto: a terminal when isatty(fd) and TERM is not
//                           "dumb") and resolves `loss` and `input`.
//   after_create_session()  starts the clock: the first line comes refresh_secs (terminal) or
//                           every_n_secs (plain) after the session was created.
//   before_run()            reads the steady clock and decides whether this run's after_run
//                           draws; only then does it fetch `loss` (and on the run that reaches
//                           the target, so that the final line shows that run's loss). Every
//                           other run fetches nothing.
//   after_run()             draws when before_run decided so.
//   end()                   draws the final line (terminal: then a newline).
//
// The target (the global step that is 100%) is, in this order: total_steps; the last step of a
// StopAtStepHook in the same session (services().stop_at_step()); the global step plus the batches
// left in `input` (or in the graph's only input) when it has a finite num_epochs
// (Graph::input_batches_left); otherwise none, and lines show the step and rate only.
//
// Formats (`{}` fields below; `[, loss L]` only with a `loss` whose value was fetched):
//   plain, with a target:     step S/T (P%), R, ETA E[, loss L]\n
//   plain, without:           step S, R[, loss L]\n
//   plain, final (end()):     step S/T (P%), A, elapsed D[, loss L]\n   (or step S, A, ...)
//   terminal, with a target:  \rstep S/T [BAR] P%, R, ETA E[, loss L]\x1b[K
//   terminal, without:        \rstep S, R[, loss L]\x1b[K
//   terminal, final (end()):  as the plain final line, with the bar, then \x1b[K\n
// where S is the global step; T the target; P the percentage of S/T, one decimal, within
// [0, 100]; BAR 20 characters, '#' for each whole 5% done and '.' for the rest; R the rate,
// smoothed over the draws of the last rate_window_secs (at least the previous draw):
// `12.5 steps/s`, below 1 step/s `4.0 s/step`, and `? steps/s` while unknown; E the time left
// at that rate as H:MM:SS, `?` when the rate is unknown or 0; A the average rate since the
// session was created and D the time since then (H:MM:SS); L the loss as Keras prints it,
// `0.3120` (4 decimals) when |L| > 1e-3, else `8.3077e-04` (a tensor of several elements shows
// its mean). On a terminal narrower than the line, the bar is left out, then whole fields from
// the end (`, loss L`, `, ETA E`, ...), then the rest cut, until the line fits in the width minus
// one column, so that `\r` always returns to its start.
//
// A write error (EPIPE when the reader of a pipe went away, EBADF, ...) disables the hook for
// good with one warning through the log sink (`ProgressBarHook: cannot write to fd 2: Broken
// pipe. Progress is no longer shown.`); training goes on. SIGPIPE is blocked in the writing
// thread while it writes and while it logs that warning (the log sink may write to the same
// pipe), so a closed pipe never kills the process. When a session ends by an exception (end()
// is not called), a line left open on the terminal is ended by the next begin() or by the hook's
// destructor. On stderr or stdout, the library's stderr log sink erases the bar before it writes a
// log line (the bar marks its line as partial), and the bar is redrawn below it at its next turn;
// lines others write to the terminal start after the bar, and the next redraw starts on a fresh
// line.
//
//   hooks.push_back(std::make_shared<th::ProgressBarHook>(
//       th::ProgressBarHookOptions{.loss = loss, .total_steps = 3000}));
//   // On a terminal:
//   //   step 1200/3000 [########............] 40.0%, 85.3 steps/s, ETA 0:00:21, loss 0.3120
//   // Through a pipe, every 30 s:
//   //   step 1200/3000 (40.0%), 85.3 steps/s, ETA 0:00:21, loss 0.3120
//
// Not thread-safe: hooks run on the training thread.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "trainhooks/hook.h"
#include "trainhooks/timer.h"

namespace trainhooks {

enum class ProgressBarMode {
  kAuto,      // a terminal when isatty(fd) and TERM is not "dumb", plain otherwise
  kTerminal,  // one line redrawn in place
  kPlain,     // a self-contained line every every_n_secs
};

struct ProgressBarHookOptions {
  // A node whose latest value is shown (usually the loss); unset: no loss.
  std::optional<NodeRef> loss;
  // The global step that is 100%; unset: see the header comment for the other sources.
  std::optional<int64_t> total_steps;
  // The input whose epochs give the target (any component node or its name); unset: the
  // graph's input when it has exactly one.
  std::optional<NodeRef> input;
  // Seconds between plain lines.
  double every_n_secs = 30;
  // Seconds between redraws on a terminal.
  double refresh_secs = 0.1;
  // Seconds of draws the shown rate is measured over.
  double rate_window_secs = 10;
  ProgressBarMode mode = ProgressBarMode::kAuto;
  // Where the output goes (2: stderr). The hook neither opens nor closes it.
  int fd = 2;
};

class ProgressBarHook : public SessionRunHook {
 public:
  // InvalidArgument naming the option: "ProgressBarHook: every_n_secs must be positive, got 0"
  // (likewise refresh_secs, rate_window_secs, total_steps), "ProgressBarHook: fd must not be
  // negative, got -1".
  explicit ProgressBarHook(ProgressBarHookOptions options = {});
  // Ends a line left open on the terminal by a session that ended with an exception.
  ~ProgressBarHook() override;
  ProgressBarHook(const ProgressBarHook&) = delete;
  ProgressBarHook& operator=(const ProgressBarHook&) = delete;

  void begin() override;
  void after_create_session(Session& session, Coordinator& coord) override;
  SessionRunArgs before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  void end(Session& session) override;

  // The mode begin() picked (kTerminal or kPlain); kAuto before the first begin().
  ProgressBarMode mode() const { return mode_; }
  // False after a write error disabled the hook.
  bool enabled() const { return enabled_; }

 private:
  struct Sample {
    double seconds;
    int64_t step;
  };

  std::optional<int64_t> resolve_target(int64_t global_step);
  std::optional<double> windowed_rate(double now, int64_t step);
  // `elapsed`: the final line's time since the session was created.
  std::string format_line(int64_t step, std::optional<double> rate,
                          std::optional<double> elapsed) const;
  void draw(int64_t step, bool final);
  bool line_still_open();
  void write_out(const std::string& text);

  ProgressBarHookOptions options_;
  SecondOrStepTimer plain_timer_;
  SecondOrStepTimer terminal_timer_;
  SecondOrStepTimer* timer_ = &plain_timer_;
  ProgressBarMode mode_ = ProgressBarMode::kAuto;
  bool enabled_ = true;
  std::optional<Node> loss_;
  std::optional<Node> input_;

  // Per session creation.
  int64_t runs_ = 0;  // the timer's step: runs since the session was created
  bool target_resolved_ = false;
  std::optional<int64_t> target_;
  std::deque<Sample> samples_;   // draws within the rate window, oldest first
  std::optional<Sample> start_;  // the first session creation since begin()

  // Per run.
  bool draw_this_run_ = false;
  bool fetch_this_run_ = false;

  std::optional<double> loss_value_;
  bool line_open_ = false;  // a terminal line was drawn and not yet ended
};

}  // namespace trainhooks
