// Distributed start-up's parts that need no other process: each cause's message, word for word;
// the watchdog that bounds a native call that does not honour its own timeout; the network checks
// (loopback addresses, a refused connection told from an accepted one).
#include "distributed/startup_messages.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/call_with_deadline.h"
#include "distributed/network.h"
#include "test_util.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;
namespace internal = trainhooks::distributed::internal;
using ::testing::Contains;
using th::testing::error_message;
using th::testing::free_port;

namespace startup_messages_test {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

internal::StartupPlace tcp_place(int rank) {
  return {.rank = rank,
          .world_size = 2,
          .store = "the store at 10.0.0.1:29500",
          .master_addr = "10.0.0.1",
          .master_port = 29500,
          .timeout_secs = 300};
}

std::vector<internal::NetworkInterface> two_interfaces() {
  return {{.name = "eth0", .addresses = {"10.0.0.2"}},
          {.name = "ifb0"},
          {.name = "lo", .addresses = {"127.0.0.1", "::1"}, .loopback = true}};
}

TEST(DistributedStartupMessagesTest, MissingRanksAreNamedAsRuns) {
  EXPECT_EQ(internal::describe_ranks({1}), "rank 1");
  EXPECT_EQ(internal::describe_ranks({3, 1}), "ranks 1 and 3");
  EXPECT_EQ(internal::describe_ranks({7, 1, 3, 4, 5, 4}), "ranks 1, 3-5 and 7");
  EXPECT_EQ(internal::missing_ranks_message(tcp_place(0), {1, 2, 3}),
            "trainhooks distributed: rank 0 of 2 gave up after 300 s at the store at "
            "10.0.0.1:29500: ranks 1-3 never arrived (start every rank within 300 s of the others, "
            "with the same WORLD_SIZE, MASTER_ADDR and MASTER_PORT)");
  internal::StartupPlace file{
      .rank = 1, .world_size = 2, .store = "the file store /s", .timeout_secs = 4};
  EXPECT_EQ(
      internal::missing_ranks_message(file, {0}),
      "trainhooks distributed: rank 1 of 2 gave up after 4 s at the file store /s: rank 0 "
      "never arrived (start every rank within 4 s of the others, with the same WORLD_SIZE and "
      "file store)");
}

TEST(DistributedStartupMessagesTest, EachCauseHasItsOwnMessage) {
  EXPECT_EQ(internal::unreachable_store_message(tcp_place(1), "No route to host"),
            "trainhooks distributed: rank 1 of 2 gave up after 300 s: the store at 10.0.0.1:29500, "
            "which rank 0 serves, did not accept a connection (No route to host): rank 0 never "
            "arrived, or MASTER_ADDR and MASTER_PORT are not its address");
  internal::StartupPlace agent = tcp_place(1);
  agent.agent_store = true;
  EXPECT_EQ(internal::unreachable_store_message(agent, "no answer"),
            "trainhooks distributed: rank 1 of 2 gave up after 300 s: torchrun's store at "
            "10.0.0.1:29500 did not accept a connection (no answer)");
  EXPECT_EQ(internal::missing_interface_message("nope", two_interfaces()),
            "trainhooks distributed: GLOO_SOCKET_IFNAME=nope is not a network interface of this "
            "machine (it has: eth0, ifb0, lo)");
  EXPECT_EQ(internal::missing_interface_message("ifb0", two_interfaces()),
            "trainhooks distributed: GLOO_SOCKET_IFNAME=ifb0 names an interface without an IP "
            "address (those with one: eth0, lo)");
  EXPECT_EQ(internal::gloo_connect_message(tcp_place(0), {"10.0.0.1", "127.0.1.1"},
                                           "connect [127.0.1.1]:41000: Connection refused"),
            "trainhooks distributed: rank 0 of 2 could not connect to the other ranks through Gloo "
            "within 300 s, though every rank reached the store at 10.0.0.1:29500: connect "
            "[127.0.1.1]:41000: Connection refused; Gloo's addresses: rank 0 10.0.0.1, rank 1 "
            "127.0.1.1 (every rank must reach the others' addresses: GLOO_SOCKET_IFNAME chooses "
            "the interface)");
  EXPECT_EQ(internal::loopback_warning(tcp_place(1), "127.0.1.1",
                                       "this machine's hostname 'node2' resolves to it",
                                       two_interfaces()),
            "trainhooks distributed: rank 1 of 2: Gloo's address is 127.0.1.1 (this machine's "
            "hostname 'node2' resolves to it), a loopback address, but MASTER_ADDR 10.0.0.1 is "
            "not: ranks on other machines cannot connect to this one; set GLOO_SOCKET_IFNAME to an "
            "interface they reach (this machine's: eth0)");
}

TEST(DistributedStartupMessagesTest, TheWatchdogReturnsRethrowsOrGivesUpAtItsDeadline) {
  EXPECT_EQ(internal::call_with_deadline<int>([] { return 7; }, 5, [] { FAIL(); }), 7);
  EXPECT_EQ(error_message<th::UnavailableError>([] {
              internal::call_with_deadline<int>(
                  []() -> int { throw th::UnavailableError("refused"); }, 5, [] {});
            }),
            "refused");
  // A call that never returns (until the test lets it go): the watchdog gives up at its deadline
  // and leaves the call on its detached thread.
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
  };
  auto gate = std::make_shared<Gate>();
  const auto start = Clock::now();
  EXPECT_EQ(error_message<th::DeadlineExceededError>([&] {
              internal::call_with_deadline<int>(
                  [gate] {
                    std::unique_lock<std::mutex> lock(gate->mu);
                    gate->cv.wait(lock, [&] { return gate->open; });
                    return 1;
                  },
                  0.2, [] { throw th::DeadlineExceededError("stuck"); });
            }),
            "stuck");
  EXPECT_LT(seconds_since(start), 5);
  {
    std::lock_guard<std::mutex> lock(gate->mu);
    gate->open = true;
  }
  gate->cv.notify_all();
}

TEST(DistributedStartupMessagesTest, TheNetworkChecksTellRefusedFromAccepted) {
  EXPECT_TRUE(internal::is_loopback_host("127.0.1.1"));
  EXPECT_TRUE(internal::is_loopback_host("::1"));
  EXPECT_TRUE(internal::is_loopback_host("localhost"));
  EXPECT_FALSE(internal::is_loopback_host("192.0.2.1"));
  const auto interfaces = internal::network_interfaces();
  EXPECT_THAT(interfaces, Contains(::testing::Field(&internal::NetworkInterface::name, "lo")));

  const int port = free_port();
  EXPECT_EQ(internal::wait_until_accepting("127.0.0.1", port,
                                           Clock::now() + std::chrono::milliseconds(300)),
            "Connection refused");
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  EXPECT_EQ(
      internal::wait_until_accepting("127.0.0.1", port, Clock::now() + std::chrono::seconds(5)),
      "");
  close(fd);
}

}  // namespace startup_messages_test
