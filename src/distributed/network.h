// This machine's network as distributed start-up needs it: its interfaces, which addresses are
// loopback, and whether an address and port accept TCP connections. No c10d, no Gloo: the
// start-up (c10d_backend.cpp) checks these before it hands them to Gloo and the TCP store, so that
// a wrong interface or an unreachable master fails with a message of its own. Private to
// distributed/.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace trainhooks::distributed::internal {

struct NetworkInterface {
  std::string name;                    // "lo", "eth0"
  std::vector<std::string> addresses;  // numeric IPv4 and IPv6 addresses ("127.0.0.1")
  bool loopback = false;
};

// The interfaces of this machine (getifaddrs), sorted by name, each once.
std::vector<NetworkInterface> network_interfaces();

// Whether `host` is a loopback address (127.0.0.0/8, ::1) or a name that resolves only to such
// addresses ("localhost", or the hostname of a Debian machine, which /etc/hosts maps to
// 127.0.1.1). A name that does not resolve is not loopback.
bool is_loopback_host(const std::string& host);

// Tries to open a TCP connection to host:port, again and again, until one succeeds (then "") or
// `deadline` passes: then why the last attempt failed ("Connection refused", "No route to host",
// "no answer", "cannot resolve the name: ..."). Each attempt's connection is closed at once.
std::string wait_until_accepting(const std::string& host, int port,
                                 std::chrono::steady_clock::time_point deadline);

}  // namespace trainhooks::distributed::internal
