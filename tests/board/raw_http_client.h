// A loopback TCP client for the board server's tests that an HTTP library would not be: it
// sends exactly the bytes given, when told (an idle connection, headers a line at a time, a body
// announced and never sent), and reads what comes back. Every wait is bounded.
//
//   RawConnection c(port);
//   c.send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
//   const RawResponse r = c.read_response(std::chrono::seconds(5));   // r.status, r.body, ...
//
// Header-only: the board's test program is built from tests/board/*_test.cpp.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace trainhooks::board::testing {

struct RawResponse {
  int status = 0;       // 0: no whole response arrived
  std::string head;     // the status line and headers
  std::string body;     // Content-Length bytes of it
  bool closed = false;  // the server closed the connection after it
};

class RawConnection {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  RawConnection(RawConnection&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

  bool connected() const { return fd_ >= 0; }

  // All of `bytes`, or false (the server closed or reset the connection).
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Up to `max` bytes that arrive within `timeout`; empty when the peer closed (then closed()),
  // or nothing came.
  std::string receive(std::chrono::milliseconds timeout, size_t max = 65536) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return {};
    std::string out(max, '\0');
    const ssize_t n = ::recv(fd_, out.data(), max, 0);
    if (n <= 0) {
      peer_closed_ = true;
      return {};
    }
    out.resize(static_cast<size_t>(n));
    return out;
  }

  bool closed() const { return peer_closed_; }

  // Whether the server closes the connection within `timeout` (reading and dropping what it
  // sends before).
  bool closed_within(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!peer_closed_ && Clock::now() < deadline) {
      receive(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
    }
    return peer_closed_;
  }

  // One response: its head, then Content-Length bytes of body (none when the head has no
  // Content-Length, or answers a HEAD request), within `timeout`. closed says whether the server
  // then closed the connection (looked for only when the head says "Connection: close").
  RawResponse read_response(std::chrono::milliseconds timeout, bool head_request = false) {
    const auto deadline = Clock::now() + timeout;
    const auto left = [&] {
      return std::max(
          std::chrono::milliseconds(0),
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
    };
    RawResponse r;
    size_t end = std::string::npos;
    while ((end = pending_.find("\r\n\r\n")) == std::string::npos) {
      if (peer_closed_ || left().count() == 0) return r;
      pending_ += receive(left());
    }
    r.head = pending_.substr(0, end + 2);
    pending_.erase(0, end + 4);
    const size_t length = head_request ? 0 : header_number(r.head, "Content-Length").value_or(0);
    while (pending_.size() < length) {
      if (peer_closed_ || left().count() == 0) return r;
      pending_ += receive(left());
    }
    r.body = pending_.substr(0, length);
    pending_.erase(0, length);
    if (r.head.size() > 12 && r.head.starts_with("HTTP/1.")) r.status = std::atoi(&r.head[9]);
    if (lowercase(r.head).find("\r\nconnection: close\r\n") != std::string::npos) {
      r.closed = pending_.empty() && closed_within(left());
    }
    return r;
  }

  int fd() const { return fd_; }

 private:
  static std::string lowercase(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }

  static std::optional<size_t> header_number(const std::string& head, const std::string& name) {
    const std::string lower = lowercase(head);
    const size_t at = lower.find("\r\n" + lowercase(name) + ":");
    if (at == std::string::npos) return std::nullopt;
    return static_cast<size_t>(std::strtoull(head.c_str() + at + name.size() + 3, nullptr, 10));
  }

  int fd_ = -1;
  std::string pending_;  // received, not yet returned
  bool peer_closed_ = false;
};

}  // namespace trainhooks::board::testing
