// Distributed start-up bounded on every rank, whatever the cause, each cause with its own message:
// tests/tools/distributed_trainer.cpp started as lone or stalled ranks on loopback, with a short
// timeout. Timings are upper bounds only (generous: loading LibTorch takes seconds on a busy
// machine), since what they catch is a hang. The messages themselves: startup_messages_test.cpp.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/child_process.h"
#include "distributed/network.h"
#include "distributed/trainer_command.h"
#include "test_util.h"

namespace th = trainhooks;
namespace internal = trainhooks::distributed::internal;
using ::testing::Contains;
using ::testing::HasSubstr;
using th::testing::ChildProcess;
using th::testing::describe_status;
using th::testing::free_port;
using th::testing::read_text;
using th::testing::TempDir;
using th::testing::trainer_command;

namespace startup_test {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A short bound, so that the suite stays fast; each wait of a test below is bounded by kBound, by
// which a rank must have ended: twice the timeout, and time to load LibTorch.
constexpr double kTimeout = 4;
constexpr double kBound = 2 * kTimeout + 4;

struct Ended {
  std::optional<int> status;
  double secs = 0;
  std::string log;  // stderr
  bool failed() const { return status && WIFEXITED(*status) && WEXITSTATUS(*status) == 1; }
  bool ok() const { return status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0; }
  std::string describe() const {
    return (status ? describe_status(*status) : std::string("still running")) + " after " +
           std::to_string(secs) + " s; log:\n" + log;
  }
};

// A rank started now, its stderr in `log`.
struct Rank {
  Rank(const std::vector<std::string>& env, const std::vector<std::string>& args,
       const std::string& log_path)
      : log(log_path), start(Clock::now()), child(trainer_command(env, args), log_path) {}
  Ended wait(double secs) {
    Ended out;
    out.status = child.wait(secs);
    out.secs = seconds_since(start);
    if (!out.status) child.kill_and_reap();
    out.log = read_text(log);
    return out;
  }
  std::string log;
  Clock::time_point start;
  ChildProcess child;
};

std::vector<std::string> tcp_env(int rank, int port, const std::string& master = "127.0.0.1") {
  return {"RANK=" + std::to_string(rank), "WORLD_SIZE=2", "MASTER_ADDR=" + master,
          "MASTER_PORT=" + std::to_string(port)};
}

const std::vector<std::string> kArgs{"--timeout", "4", "--last-step", "2"};

// The lines of `log`.
std::vector<std::string> lines_of(const std::string& log) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < log.size()) {
    const size_t nl = log.find('\n', at);
    out.push_back(log.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return out;
}

TEST(DistributedStartupTest, ALoneRankFailsWithinTheTimeoutNamingTheRankThatNeverArrived) {
  TempDir dir;
  const int port0 = free_port();
  const int port1 = free_port();
  Rank chief(tcp_env(0, port0), kArgs, dir.file("rank0.log"));
  Rank worker(tcp_env(1, port1), kArgs, dir.file("rank1.log"));
  const Ended alone0 = chief.wait(kBound);
  const Ended alone1 = worker.wait(kBound);

  ASSERT_TRUE(alone0.failed()) << alone0.describe();
  EXPECT_THAT(lines_of(alone0.log),
              Contains(fmt::format(
                  "error: trainhooks distributed: rank 0 of 2 gave up after 4 s at the store at "
                  "127.0.0.1:{}: rank 1 never arrived (start every rank within 4 s of the others, "
                  "with the same WORLD_SIZE, MASTER_ADDR and MASTER_PORT)",
                  port0)))
      << alone0.describe();
  ASSERT_TRUE(alone1.failed()) << alone1.describe();
  EXPECT_THAT(lines_of(alone1.log),
              Contains(fmt::format(
                  "error: trainhooks distributed: rank 1 of 2 gave up after 4 s: the store at "
                  "127.0.0.1:{}, which rank 0 serves, did not accept a connection (Connection "
                  "refused): rank 0 never arrived, or MASTER_ADDR and MASTER_PORT are not its "
                  "address",
                  port1)))
      << alone1.describe();
}

TEST(DistributedStartupTest, AMissingInterfaceFailsAtOnceWithItsOwnMessage) {
  TempDir dir;
  // A long timeout: the interface is checked before any wait, so it must not come into play.
  Rank chief(
      [&] {
        auto env = tcp_env(0, free_port());
        env.push_back("GLOO_SOCKET_IFNAME=nope");
        return env;
      }(),
      {"--timeout", "60"}, dir.file("rank0.log"));
  const Ended ended = chief.wait(60);
  ASSERT_TRUE(ended.failed()) << ended.describe();
  EXPECT_THAT(ended.log, HasSubstr("error: trainhooks distributed: GLOO_SOCKET_IFNAME=nope is not "
                                   "a network interface of this machine (it has: "))
      << ended.describe();
  EXPECT_LT(ended.secs, 30) << ended.describe();
}

TEST(DistributedStartupTest, AStalledPeerEndsGloosConnectWithinTheTimeout) {
  // Rank 1 registers at the store, then stops (SIGSTOP) before Gloo connects: rank 0 finds every
  // rank arrived and waits in Gloo's connect, which the watchdog ends.
  TempDir dir;
  const std::string store = dir.file("store");
  const std::vector<std::string> args{"--timeout", "4", "--file-store", store};
  Rank worker({"RANK=1", "WORLD_SIZE=2"}, args, dir.file("rank1.log"));
  const auto registered = Clock::now();
  while (read_text(store).find("trainhooks/rank/1") == std::string::npos) {
    ASSERT_LT(seconds_since(registered), 30)
        << "rank 1 never registered: " << read_text(worker.log);
    usleep(20 * 1000);
  }
  worker.child.send(SIGSTOP);
  Rank chief({"RANK=0", "WORLD_SIZE=2"}, args, dir.file("rank0.log"));
  const Ended ended = chief.wait(kBound);
  worker.child.kill_and_reap();
  ASSERT_TRUE(ended.failed()) << ended.describe();
  // Gloo's own wait or the watchdog, whichever ends first: the message is the same but for the
  // cause after the colon.
  EXPECT_THAT(ended.log,
              HasSubstr("error: trainhooks distributed: rank 0 of 2 could not connect to the other "
                        "ranks through Gloo within 4 s, though every rank reached the file store " +
                        store + ": "))
      << ended.describe();
  EXPECT_THAT(ended.log, HasSubstr("; Gloo's addresses: rank 0 127.0.0.1, rank 1 127.0.0.1 (every "
                                   "rank must reach the others' addresses: GLOO_SOCKET_IFNAME "
                                   "chooses the interface)\n"))
      << ended.describe();
}

TEST(DistributedStartupTest, ALoopbackGlooAddressWithAMasterElsewhereIsWarnedOf) {
  // MASTER_ADDR is an address of this machine that is not loopback (as another machine would
  // give), and GLOO_SOCKET_IFNAME=lo gives Gloo a loopback address: the two ranks still train
  // (they are on one machine), each having warned.
  std::string master;
  for (const auto& i : internal::network_interfaces()) {
    for (const auto& a : i.addresses)
      if (master.empty() && !i.loopback && a.find(':') == std::string::npos) master = a;
  }
  if (master.empty()) GTEST_SKIP() << "no non-loopback IPv4 address on this machine";
  TempDir dir;
  const int port = free_port();
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < 2; ++r) {
    auto env = tcp_env(r, port, master);
    env.push_back("GLOO_SOCKET_IFNAME=lo");
    ranks.push_back(
        std::make_unique<Rank>(env, std::vector<std::string>{"--timeout", "30", "--last-step", "2"},
                               dir.file(fmt::format("rank{}.log", r))));
  }
  std::vector<std::string> others;
  for (const auto& i : internal::network_interfaces())
    if (!i.loopback && !i.addresses.empty()) others.push_back(i.name);
  for (int r = 0; r < 2; ++r) {
    const Ended ended = ranks[r]->wait(60);
    ASSERT_TRUE(ended.ok()) << ended.describe();
    EXPECT_THAT(lines_of(ended.log),
                Contains(fmt::format(
                    "WARNING:trainhooks:trainhooks distributed: rank {} of 2: Gloo's address is "
                    "127.0.0.1 (GLOO_SOCKET_IFNAME=lo), a loopback address, but MASTER_ADDR {} is "
                    "not: ranks on other machines cannot connect to this one; set "
                    "GLOO_SOCKET_IFNAME to an interface they reach (this machine's: {})",
                    r, master, fmt::join(others, ", "))))
        << ended.describe();
  }
}

}  // namespace startup_test
