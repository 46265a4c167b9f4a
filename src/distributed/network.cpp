#include "distributed/network.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

namespace trainhooks::distributed::internal {

namespace {

std::string numeric_address(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof text);
  } else if (addr->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text, sizeof text);
  }
  return text;
}

bool is_loopback_sockaddr(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr) >> 24) == 127;
  }
  if (addr->sa_family == AF_INET6) {
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr);
  }
  return false;
}

// One non-blocking connect to `addr`, waiting at most until `deadline`: 0 when it connected, else
// the errno (ETIMEDOUT when the deadline passed without an answer).
int try_connect(const addrinfo& addr, std::chrono::steady_clock::time_point deadline) {
  const int fd =
      socket(addr.ai_family, addr.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, addr.ai_protocol);
  if (fd < 0) return errno;
  int error = 0;
  if (connect(fd, addr.ai_addr, addr.ai_addrlen) != 0) {
    error = errno;
    if (error == EINPROGRESS) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{.fd = fd, .events = POLLOUT, .revents = 0};
      const int ready = poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
      if (ready <= 0) {
        error = ETIMEDOUT;
      } else {
        socklen_t len = sizeof error;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) error = errno;
      }
    }
  }
  close(fd);
  return error;
}

}  // namespace

std::vector<NetworkInterface> network_interfaces() {
  std::map<std::string, NetworkInterface> by_name;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    NetworkInterface& entry = by_name[i->ifa_name];
    entry.name = i->ifa_name;
    entry.loopback = entry.loopback || (i->ifa_flags & IFF_LOOPBACK) != 0;
    if (i->ifa_addr != nullptr &&
        (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6)) {
      entry.addresses.push_back(numeric_address(i->ifa_addr));
    }
  }
  freeifaddrs(list);
  std::vector<NetworkInterface> out;
  for (auto& [name, entry] : by_name) out.push_back(std::move(entry));
  return out;
}

bool is_loopback_host(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return false;
  bool all = true;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next)
    all = all && is_loopback_sockaddr(a->ai_addr);
  freeaddrinfo(found);
  return all;
}

std::string wait_until_accepting(const std::string& host, int port,
                                 std::chrono::steady_clock::time_point deadline) {
  // A listener that is not there yet refuses at once: try again at this pace.
  constexpr auto kRetry = std::chrono::milliseconds(100);
  std::string last = "no answer";
  while (true) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int resolved = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (resolved != 0) {
      last = std::string("cannot resolve the name: ") + gai_strerror(resolved);
    } else {
      for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
        const int error = try_connect(*a, deadline);
        if (error == 0) {
          freeaddrinfo(found);
          return "";
        }
        last = error == ETIMEDOUT ? "no answer" : std::strerror(error);
      }
      freeaddrinfo(found);
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return last;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(kRetry, deadline - now));
  }
}

}  // namespace trainhooks::distributed::internal
