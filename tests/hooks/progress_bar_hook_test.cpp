#include "trainhooks/hooks/progress_bar_hook.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/hooks/stop_at_step_hook.h"
#include "trainhooks/optimizers.h"

namespace th = trainhooks;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

namespace progress_bar_hook_test {

// Reads what is available on a non-blocking fd, waiting up to `first_ms` for the first bytes and
// `gap_ms` for each further chunk (a pseudo-terminal hands data to its master side
// asynchronously).
std::string read_available(int fd, int first_ms, int gap_ms) {
  std::string out;
  char buf[4096];
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  while (::poll(&p, 1, out.empty() ? first_ms : gap_ms) > 0) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

class Pipe {
 public:
  Pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
    read_ = fds[0];
    write_ = fds[1];
    ::fcntl(read_, F_SETFL, O_NONBLOCK);
  }
  ~Pipe() {
    close_read();
    ::close(write_);
  }
  int write_fd() const { return write_; }
  // A pipe's data is readable as soon as the write returns.
  std::string drain() { return read_available(read_, 0, 0); }
  void close_read() {
    if (read_ >= 0) ::close(read_);
    read_ = -1;
  }

 private:
  int read_ = -1;
  int write_ = -1;
};

class Pty {
 public:
  explicit Pty(unsigned short columns = 100) {
    winsize size{.ws_row = 24, .ws_col = columns, .ws_xpixel = 0, .ws_ypixel = 0};
    if (::openpty(&master_, &slave_, nullptr, nullptr, &size) != 0)
      throw std::runtime_error("openpty");
    // Raw output: the master reads exactly the bytes written ("\n" not turned into "\r\n").
    termios t{};
    ::tcgetattr(slave_, &t);
    t.c_oflag &= ~OPOST;
    ::tcsetattr(slave_, TCSANOW, &t);
    ::fcntl(master_, F_SETFL, O_NONBLOCK);
  }
  ~Pty() {
    ::close(slave_);
    ::close(master_);
  }
  int slave_fd() const { return slave_; }
  std::string drain() { return read_available(master_, 2000, 100); }

 private:
  int master_ = -1;
  int slave_ = -1;
};

// Sets an environment variable for the life of this object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class ProgressBarHookTest : public ::testing::Test {
 protected:
  ProgressBarHookTest() {
    // The value the hook shows as its loss; counts its evaluations, i.e. the hook's fetches.
    shown = m.g.op("shown", [this](th::Run&) {
      ++loss_evals;
      return at::scalar_tensor(loss_value, at::kDouble);
    });
  }

  std::shared_ptr<th::ProgressBarHook> hook(th::ProgressBarHookOptions o) {
    return std::make_shared<th::ProgressBarHook>(std::move(o));
  }

  // Trains `n` steps, advancing the fake clock by `secs` before each; every line written to
  // `pipe` is recorded with the global step after whose run it appeared.
  void train(th::MonitoredSession& sess, int n, double secs, Pipe& pipe) {
    for (int i = 0; i < n; ++i) {
      fe.clock->advance(secs);
      sess.run(m.train, m.feed());
      if (auto text = pipe.drain(); !text.empty()) written[m.g.global_step_value()] += text;
    }
  }
  void train(th::MonitoredSession& sess, int n, double secs) {
    for (int i = 0; i < n; ++i) {
      fe.clock->advance(secs);
      sess.run(m.train, m.feed());
    }
  }

  std::vector<std::string> warnings() const { return fe.log->messages(th::LogLevel::kWarning); }

  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
  th::Node shown;
  int loss_evals = 0;
  double loss_value = 0.3125;
  std::map<int64_t, std::string> written;  // global step -> what its run wrote
};

using Written = std::map<int64_t, std::string>;

TEST_F(ProgressBarHookTest, PlainLinesEveryNSecsTowardAnExplicitTotal) {
  Pipe pipe;
  auto bar = hook({.loss = shown, .total_steps = 40, .every_n_secs = 10, .fd = pipe.write_fd()});
  auto sess = th::testing::chief_session(m.g, {bar}, fe.env());
  EXPECT_EQ(bar->mode(), th::ProgressBarMode::kPlain);  // auto, on a pipe
  train(*sess, 15, 1.0, pipe);
  loss_value = 2.5e-4;
  train(*sess, 10, 1.0, pipe);
  EXPECT_EQ(written,
            (Written{{10, "step 10/40 (25.0%), 1.0 steps/s, ETA 0:00:30, loss 0.3125\n"},
                     {20, "step 20/40 (50.0%), 1.0 steps/s, ETA 0:00:20, loss 2.5000e-04\n"}}));
  sess->close();
  EXPECT_EQ(pipe.drain(), "step 25/40 (62.5%), 1.0 steps/s, elapsed 0:00:25, loss 2.5000e-04\n");
  // Fetched on the two drawing runs only.
  EXPECT_EQ(loss_evals, 2);
  EXPECT_THAT(warnings(), IsEmpty());
}

TEST_F(ProgressBarHookTest, PlainTargetFromAStopAtStepHookListedAfterIt) {
  Pipe pipe;
  auto bar = hook({.loss = shown, .every_n_secs = 4, .fd = pipe.write_fd()});
  auto stop = std::make_shared<th::StopAtStepHook>(th::StopAtStepHookOptions{.num_steps = 20});
  auto sess = th::testing::chief_session(m.g, {bar, stop}, fe.env());
  train(*sess, 16, 0.5, pipe);
  loss_value = 0.125;
  int runs = 16;
  while (!sess->should_stop()) {
    train(*sess, 1, 0.5, pipe);
    ++runs;
  }
  EXPECT_EQ(runs, 20);
  EXPECT_EQ(written,
            (Written{{8, "step 8/20 (40.0%), 2.0 steps/s, ETA 0:00:06, loss 0.3125\n"},
                     {16, "step 16/20 (80.0%), 2.0 steps/s, ETA 0:00:02, loss 0.3125\n"}}));
  sess->close();
  // The run that reached the target fetched the loss for the final line.
  EXPECT_EQ(pipe.drain(), "step 20/20 (100.0%), 2.0 steps/s, elapsed 0:00:10, loss 0.1250\n");
  EXPECT_EQ(loss_evals, 3);
}

TEST_F(ProgressBarHookTest, PlainTargetFromTheInputsEpochs) {
  // 10 examples in batches of 3 (3, 3, 3, 1), 2 epochs: 8 steps.
  th::Graph g;
  auto batch = g.input("data", th::tensor_source({at::arange(10, at::kFloat)}, {"x"}),
                       {.batch_size = 3, .num_epochs = 2});
  auto w = g.variable("w", at::zeros({}));
  auto loss = g.op("loss", [=](th::Run& r) { return (r[w] * r[batch[0]] - 1).square().mean(); });
  auto train_op = g.minimize("train", loss, th::sgd(0.01));
  Pipe pipe;
  auto bar = hook({.every_n_secs = 2, .fd = pipe.write_fd()});
  auto sess = th::testing::chief_session(g, {bar}, fe.env());
  std::vector<std::string> lines;
  while (!sess->should_stop()) {
    fe.clock->advance(1);
    sess->run(train_op);
    if (auto text = pipe.drain(); !text.empty()) lines.push_back(text);
  }
  EXPECT_EQ(g.global_step_value(), 8);
  EXPECT_THAT(lines, ElementsAre("step 2/8 (25.0%), 1.0 steps/s, ETA 0:00:06\n",
                                 "step 4/8 (50.0%), 1.0 steps/s, ETA 0:00:04\n",
                                 "step 6/8 (75.0%), 1.0 steps/s, ETA 0:00:02\n",
                                 "step 8/8 (100.0%), 1.0 steps/s, ETA 0:00:00\n"));
  sess->close();
  // The ninth run hit the end of data at 9 s: 8 steps in 9 s.
  EXPECT_EQ(pipe.drain(), "step 8/8 (100.0%), 1.1 s/step, elapsed 0:00:09\n");
}

TEST_F(ProgressBarHookTest, PlainWithoutATargetShowsTheStepAndRate) {
  Pipe pipe;
  auto bar = hook({.loss = shown, .every_n_secs = 10, .fd = pipe.write_fd()});
  auto sess = th::testing::chief_session(m.g, {bar}, fe.env());
  train(*sess, 12, 1.0, pipe);
  EXPECT_EQ(written, (Written{{10, "step 10, 1.0 steps/s, loss 0.3125\n"}}));
  sess->close();
  EXPECT_EQ(pipe.drain(), "step 12, 1.0 steps/s, elapsed 0:00:12, loss 0.3125\n");
  EXPECT_EQ(loss_evals, 1);
}

TEST_F(ProgressBarHookTest, TheRateIsMeasuredOverTheWindow) {
  Pipe pipe;
  auto bar = hook({.every_n_secs = 4, .rate_window_secs = 10, .fd = pipe.write_fd()});
  auto sess = th::testing::chief_session(m.g, {bar}, fe.env());
  train(*sess, 8, 1.0, pipe);   // 1 step/s until 8 s
  train(*sess, 16, 0.5, pipe);  // then 2 steps/s
  // At 12 s the window reaches back to the draw at 4 s, at 16 s to the one at 8 s.
  EXPECT_EQ(written, (Written{{4, "step 4, 1.0 steps/s\n"},
                              {8, "step 8, 1.0 steps/s\n"},
                              {16, "step 16, 1.5 steps/s\n"},
                              {24, "step 24, 2.0 steps/s\n"}}));
  sess->close();
  EXPECT_EQ(pipe.drain(), "step 24, 1.5 steps/s, elapsed 0:00:16\n");
}

TEST_F(ProgressBarHookTest, LongEtasShowHoursAndSlowRatesSecondsPerStep) {
  Pipe pipe;
  auto bar = hook({.total_steps = 100000, .every_n_secs = 8, .fd = pipe.write_fd()});
  auto sess = th::testing::chief_session(m.g, {bar}, fe.env());
  train(*sess, 8, 1.0, pipe);
  train(*sess, 2, 4.0, pipe);
  EXPECT_EQ(written, (Written{{8, "step 8/100000 (0.0%), 1.0 steps/s, ETA 27:46:32\n"},
                              {10, "step 10/100000 (0.0%), 4.0 s/step, ETA 111:06:00\n"}}));
}

TEST_F(ProgressBarHookTest, UnknownAndZeroRatesHaveNoEta) {
  Pipe pipe;
  auto bar = hook({.loss = shown, .total_steps = 10, .every_n_secs = 1, .fd = pipe.write_fd()});
  {
    auto sess = th::testing::chief_session(m.g, {bar}, fe.env());
    sess->close();
    EXPECT_EQ(pipe.drain(), "step 0/10 (0.0%), ? steps/s, elapsed 0:00:00\n");
  }
  auto sess = th::testing::chief_session(m.g, {bar}, fe.env());
  fe.clock->advance(1);
  sess->run(m.loss, m.feed());  // the global step does not advance
  EXPECT_EQ(pipe.drain(), "step 0/10 (0.0%), 0.0 steps/s, ETA ?, loss 0.3125\n");
}

TEST_F(ProgressBarHookTest, FetchesNothingOnRunsThatDoNotDraw) {
  Pipe pipe;
  auto bar = hook({.loss = shown, .every_n_secs = 5, .fd = pipe.write_fd()});
  auto sess = th::testing::chief_session(m.g, {bar}, fe.env());
  std::vector<int64_t> fetched_at;
  for (int i = 0; i < 20; ++i) {
    fe.clock->advance(1);
    const int before = loss_evals;
    sess->run(m.train, m.feed());
    if (loss_evals > before) fetched_at.push_back(m.g.global_step_value());
  }
  EXPECT_THAT(fetched_at, ElementsAre(5, 10, 15, 20));
  EXPECT_EQ(pipe.drain(),
            "step 5, 1.0 steps/s, loss 0.3125\nstep 10, 1.0 steps/s, loss 0.3125\n"
            "step 15, 1.0 steps/s, loss 0.3125\nstep 20, 1.0 steps/s, loss 0.3125\n");
}

TEST_F(ProgressBarHookTest, TerminalRedrawsOneLineInPlaceAndEndsItAtEnd) {
  Pty pty;
  ScopedEnv term("TERM", "xterm");
  auto bar = hook({.loss = shown, .total_steps = 8, .refresh_secs = 0.25, .fd = pty.slave_fd()});
  auto sess = th::testing::chief_session(m.g, {bar}, fe.env());
  EXPECT_EQ(bar->mode(), th::ProgressBarMode::kTerminal);  // auto, on a terminal
  train(*sess, 8, 0.125);
  sess->close();
  EXPECT_EQ(pty.drain(),
            "\rstep 2/8 [#####...............] 25.0%, 8.0 steps/s, ETA 0:00:01, loss 0.3125\x1b[K"
            "\rstep 4/8 [##########..........] 50.0%, 8.0 steps/s, ETA 0:00:01, loss 0.3125\x1b[K"
            "\rstep 6/8 [###############.....] 75.0%, 8.0 steps/s, ETA 0:00:00, loss 0.3125\x1b[K"
            "\rstep 8/8 [####################] 100.0%, 8.0 steps/s, ETA 0:00:00, loss 0.3125\x1b[K"
            "\rstep 8/8 [####################] 100.0%, 8.0 steps/s, elapsed 0:00:01, loss "
            "0.3125\x1b[K\n");
  EXPECT_EQ(loss_evals, 4);
}

TEST_F(ProgressBarHookTest, TerminalWithoutATargetHasNoBar) {
  Pty pty;
  auto bar =
      hook({.refresh_secs = 0.5, .mode = th::ProgressBarMode::kTerminal, .fd = pty.slave_fd()});
  auto sess = th::testing::chief_session(m.g, {bar}, fe.env());
  train(*sess, 4, 0.25);
  sess->close();
  EXPECT_EQ(pty.drain(),
            "\rstep 2, 4.0 steps/s\x1b[K\rstep 4, 4.0 steps/s\x1b[K"
            "\rstep 4, 4.0 steps/s, elapsed 0:00:01\x1b[K\n");
}

TEST_F(ProgressBarHookTest, ANarrowTerminalLosesTheBarThenTheLineEnd) {
  Pty pty(40);
  auto bar = hook({.loss = shown,
                   .total_steps = 8,
                   .refresh_secs = 0.25,
                   .mode = th::ProgressBarMode::kTerminal,
                   .fd = pty.slave_fd()});
  auto sess = th::testing::chief_session(m.g, {bar}, fe.env());
  train(*sess, 2, 0.125);
  sess->close();
  // At most 39 columns: with the ETA the line would take 40.
  EXPECT_EQ(pty.drain(),
            "\rstep 2/8 25.0%, 8.0 steps/s\x1b[K\rstep 2/8 25.0%, 8.0 steps/s\x1b[K\n");
}

TEST_F(ProgressBarHookTest, ModesCanBeForcedAndDumbTerminalsGetPlainLines) {
  {
    Pipe pipe;
    auto bar = hook({.total_steps = 4,
                     .refresh_secs = 1,
                     .mode = th::ProgressBarMode::kTerminal,
                     .fd = pipe.write_fd()});
    auto sess = th::testing::chief_session(m.g, {bar}, fe.env());
    train(*sess, 1, 1.0);
    EXPECT_EQ(pipe.drain(),
              "\rstep 1/4 [#####...............] 25.0%, 1.0 steps/s, ETA 0:00:03\x1b[K");
  }
  {
    Pty pty;
    auto bar = hook({.total_steps = 4,
                     .every_n_secs = 1,
                     .mode = th::ProgressBarMode::kPlain,
                     .fd = pty.slave_fd()});
    auto sess = th::testing::chief_session(m.g, {bar}, fe.env());
    train(*sess, 1, 1.0);
    EXPECT_EQ(pty.drain(), "step 1/4 (25.0%), 1.0 steps/s, ETA 0:00:03\n");
  }
  {
    Pty pty;
    ScopedEnv term("TERM", "dumb");
    auto bar = hook({.every_n_secs = 1, .fd = pty.slave_fd()});
    auto sess = th::testing::chief_session(m.g, {bar}, fe.env());
    EXPECT_EQ(bar->mode(), th::ProgressBarMode::kPlain);
  }
}

TEST_F(ProgressBarHookTest, ASessionEndedByAnExceptionStillEndsTheTerminalLine) {
  Pty pty;
  auto bar =
      hook({.refresh_secs = 1, .mode = th::ProgressBarMode::kTerminal, .fd = pty.slave_fd()});
  try {
    auto sess = th::testing::chief_session(m.g, {bar}, fe.env());
    train(*sess, 1, 1.0);
    throw std::runtime_error("user code failed");  // the session closes without end()
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(pty.drain(), "\rstep 1, 1.0 steps/s\x1b[K");
  bar.reset();
  EXPECT_EQ(pty.drain(), "\n");
}

TEST_F(ProgressBarHookTest, AClosedPipeDisablesItWithOneWarning) {
  // The default disposition would kill the process: the hook must not let SIGPIPE through.
  struct sigaction dfl {
  }, old{};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &dfl, &old);
  Pipe pipe;
  pipe.close_read();
  auto bar = hook({.loss = shown, .every_n_secs = 1, .fd = pipe.write_fd()});
  auto sess = th::testing::chief_session(m.g, {bar}, fe.env());
  train(*sess, 5, 1.0);
  EXPECT_FALSE(bar->enabled());
  sess->close();
  EXPECT_EQ(m.g.global_step_value(), 5);
  EXPECT_THAT(warnings(),
              ElementsAre(fmt::format("ProgressBarHook: cannot write to fd {}: Broken pipe. "
                                      "Progress is no longer shown.",
                                      pipe.write_fd())));
  EXPECT_EQ(loss_evals, 1);  // nothing is fetched once disabled
  sigset_t pending;
  ::sigpending(&pending);
  EXPECT_EQ(::sigismember(&pending, SIGPIPE), 0);
  ::sigaction(SIGPIPE, &old, nullptr);
}

TEST_F(ProgressBarHookTest, RejectsBadOptionsNamingThem) {
  auto message = [](th::ProgressBarHookOptions o) {
    return th::testing::error_message<th::InvalidArgument>([&] { th::ProgressBarHook h(o); });
  };
  EXPECT_EQ(message({.every_n_secs = 0}), "ProgressBarHook: every_n_secs must be positive, got 0");
  EXPECT_EQ(message({.refresh_secs = -0.5}),
            "ProgressBarHook: refresh_secs must be positive, got -0.5");
  EXPECT_EQ(message({.rate_window_secs = 0}),
            "ProgressBarHook: rate_window_secs must be positive, got 0");
  EXPECT_EQ(message({.total_steps = 0}), "ProgressBarHook: total_steps must be positive, got 0");
  EXPECT_EQ(message({.fd = -1}), "ProgressBarHook: fd must not be negative, got -1");
  EXPECT_EQ(message({}), "");

  auto bar = hook({.input = "loss"});
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [&] { th::testing::chief_session(m.g, {bar}, fe.env()); }),
            "ProgressBarHook: input 'loss' is not an input node (op)");
}

}  // namespace progress_bar_hook_test
