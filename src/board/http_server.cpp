#include "board/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "trainhooks/errors.h"
#include "util/json_writer.h"

namespace trainhooks::board::internal {
namespace {

using Clock = std::chrono::steady_clock;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

int make_eventfd() {
  const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  return fd;
}

void signal_eventfd(int fd) {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(fd, &one, sizeof(one));
}

void clear_eventfd(int fd) {
  uint64_t value = 0;
  [[maybe_unused]] const ssize_t n = ::read(fd, &value, sizeof(value));
}

// Milliseconds until `deadline` for poll(), rounded up so that a wait never ends before it.
int poll_millis(Clock::time_point deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, 60'000));
}

// When the connection that this thread serves was accepted (its task queued): set by the pool
// for the task it runs, since cpp-httplib's task carries the socket only.
thread_local Clock::time_point t_accepted_at;

void set_json_error(httplib::Response& res, int status, std::string_view message) {
  std::string body = "{\"error\": ";
  trainhooks::internal::append_json_string(body, message);
  body += '}';
  res.status = status;
  res.set_content(body, "application/json");
}

struct Rejection {
  int status;
  std::string message;
};

// Whether a request is refused before its body is read. No request of the board has a body.
std::optional<Rejection> rejection(const httplib::Request& req) {
  uint64_t length = 0;
  for (auto [it, end] = req.headers.equal_range("Content-Length"); it != end; ++it) {
    const std::string& text = it->second;
    uint64_t value = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
      return Rejection{400, fmt::format("invalid Content-Length '{}'", text)};
    }
    length = std::max(length, value);
  }
  if (req.has_header("Transfer-Encoding")) {
    return Rejection{413, fmt::format("request body refused: the board takes none (Transfer-"
                                      "Encoding: {})",
                                      req.get_header_value("Transfer-Encoding"))};
  }
  if (length > HttpServer::kMaxBodyBytes) {
    return Rejection{413, fmt::format("request body refused: the board takes none "
                                      "(Content-Length: {}; at most {} bytes are even answered)",
                                      length, HttpServer::kMaxBodyBytes)};
  }
  if (req.method != "GET" && req.method != "HEAD") {
    return Rejection{405, fmt::format("method {} not allowed (only GET)", req.method)};
  }
  if (length > 0) {
    return Rejection{413, fmt::format("request body refused: a {} request takes none "
                                      "(Content-Length: {})",
                                      req.method, length)};
  }
  return std::nullopt;
}

// Fills `res` with the refusal of `req`, if it is refused.
bool refuse(const httplib::Request& req, httplib::Response& res) {
  const std::optional<Rejection> r = rejection(req);
  if (!r) return false;
  if (r->status == 405) res.set_header("Allow", "GET, HEAD");
  // The body is not read, so the connection cannot carry another request.
  res.set_header("Connection", "close");
  set_json_error(res, r->status, r->message);
  return true;
}

}  // namespace

void serve_whole(const httplib::Request& req) {
  // cpp-httplib passes handlers a const reference to its own, non-const request.
  const_cast<httplib::Request&>(req).ranges.clear();
}

// Threads made as connections need them, up to a limit; beyond it, connections queue, and
// `pressure_fd` is readable while any does, so that idle connections give their threads up.
class HttpServer::Pool : public httplib::TaskQueue {
 public:
  Pool(size_t max_threads, int pressure_fd)
      : max_threads_(max_threads), pressure_fd_(pressure_fd) {}
  ~Pool() override = default;

  void enqueue(std::function<void()> fn) override {
    std::lock_guard lock(mu_);
    tasks_.push_back({std::move(fn), Clock::now()});
    if (tasks_.size() <= idle_) {
      cv_.notify_one();
      return;
    }
    if (threads_.size() < max_threads_) {
      try {
        threads_.emplace_back([this] { work(); });
        return;
      } catch (const std::system_error&) {
        // No thread to be had: the pool is as large as it gets.
      }
    }
    if (!pressure_) {
      pressure_ = true;
      signal_eventfd(pressure_fd_);
    }
  }

  // Runs what is queued (each connection ends at once after HttpServer::shutdown()), then joins.
  void shutdown() override {
    {
      std::lock_guard lock(mu_);
      shutdown_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

 private:
  void work() {
    std::unique_lock lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [&] { return !tasks_.empty() || shutdown_; });
      --idle_;
      if (tasks_.empty()) return;
      auto [task, queued_at] = std::move(tasks_.front());
      tasks_.pop_front();
      t_accepted_at = queued_at;
      if (tasks_.empty() && pressure_) {
        pressure_ = false;
        clear_eventfd(pressure_fd_);
      }
      lock.unlock();
      try {
        task();
      } catch (...) {
        // A connection's failure ends that connection only.
      }
      lock.lock();
    }
  }

  const size_t max_threads_;
  const int pressure_fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::function<void()>, Clock::time_point>> tasks_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool pressure_ = false;
  bool shutdown_ = false;
};

// One client connection as cpp-httplib's request parser sees it: reads bounded by the request's
// deadline and size, writes by the write timeout, everything ended by shutdown().
class HttpServer::Connection : public httplib::Stream {
 public:
  Connection(socket_t sock, const BoardServerLimits& limits, int stop_fd, int pressure_fd)
      : sock_(sock),
        limits_(limits),
        stop_fd_(stop_fd),
        pressure_fd_(pressure_fd),
        accepted_at_(t_accepted_at) {}

  enum class Wait { kReady, kTimeout, kStopped, kPressure };

  // Waits for the first byte of the next request (or the client's close). An idle connection is
  // given up after the idle timeout, at shutdown, and when others wait for a thread once it has
  // had 50 ms to send a request: since it connected (a connection that waited in the queue has
  // had them), or since its last answer.
  bool wait_for_request() {
    if (pos_ < end_) return true;
    const auto now = Clock::now();
    const auto deadline = now + seconds(limits_.idle_timeout_secs);
    const auto grace_end = (served_ == 0 ? accepted_at_ : now) + std::chrono::milliseconds(50);
    for (;;) {
      const bool yield = Clock::now() >= grace_end;
      const Wait w = wait(POLLIN, yield ? deadline : std::min(deadline, grace_end), yield);
      if (w == Wait::kReady) return true;
      if (w != Wait::kTimeout || Clock::now() >= deadline) return false;
    }
  }

  // A request begins: its line and headers must arrive by the request timeout.
  void begin_request() {
    ++served_;
    const auto now = Clock::now();
    deadline_ = now + seconds(limits_.request_timeout_secs);
    // A first request could have been sent since the client connected, however long the
    // connection then waited for a thread.
    slow_after_ = (served_ == 1 ? accepted_at_ : now) + std::chrono::seconds(1);
    head_bytes_ = 0;
  }

  // The connection cannot serve another request (a timeout, an error, shutdown).
  bool broken() const { return broken_; }
  // Input the server did not read may remain (a refused body, a cut-off request).
  bool unread_input() const { return unread_input_; }
  void set_unread_input() { unread_input_ = true; }

  // Closes the socket. With input left unread, the answer is sent and the input drained for a
  // moment first (unless others wait for the thread): closing over unread input resets the
  // connection, and the client could lose the answer.
  void close() {
    if (unread_input_ && !stopped()) {
      ::shutdown(sock_, SHUT_WR);
      const auto deadline = Clock::now() + std::chrono::seconds(1);
      size_t drained = 0;
      char buf[16384];
      while (drained < (1u << 20) && wait(POLLIN, deadline, true) == Wait::kReady) {
        const ssize_t n = ::recv(sock_, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
        if (n > 0) drained += static_cast<size_t>(n);
      }
    }
    ::shutdown(sock_, SHUT_RDWR);
    ::close(sock_);
  }

  bool is_readable() const override {
    return pos_ < end_ || (!broken_ && wait(POLLIN, deadline_, false) == Wait::kReady);
  }

  bool is_writable() const override {
    return !broken_ &&
           wait(POLLOUT, Clock::now() + seconds(limits_.write_timeout_secs), false) == Wait::kReady;
  }

  ssize_t read(char* ptr, size_t size) override {
    if (broken_) return -1;
    if (pos_ == end_) {
      if (head_bytes_ >= kMaxHeadBytes) {
        fail(431, "Request Header Fields Too Large");
        return -1;
      }
      for (;;) {
        // A request still arriving after a second is slow: it gives way to connections waiting
        // for a thread (a client sends its request at once; one that trickles it holds a thread).
        const bool slow = Clock::now() >= slow_after_;
        const Wait w = wait(POLLIN, slow ? deadline_ : std::min(deadline_, slow_after_), slow);
        if (w == Wait::kTimeout && !slow && Clock::now() < deadline_) continue;
        if (w == Wait::kTimeout || w == Wait::kPressure) {
          fail(408, "Request Timeout");
          return -1;
        }
        if (w == Wait::kStopped) {
          broken_ = true;
          return -1;
        }
        const ssize_t n =
            ::recv(sock_, buf_, std::min(sizeof(buf_), kMaxHeadBytes - head_bytes_), MSG_DONTWAIT);
        if (n > 0) {
          pos_ = 0;
          end_ = static_cast<size_t>(n);
          head_bytes_ += end_;
          break;
        }
        if (n == 0) return 0;
        if (errno == EAGAIN || errno == EINTR) continue;
        broken_ = true;
        return -1;
      }
    }
    const size_t n = std::min(size, end_ - pos_);
    std::memcpy(ptr, buf_ + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (broken_) return -1;
    for (;;) {
      const ssize_t n = ::send(sock_, ptr, size, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if (errno != EAGAIN || wait(POLLOUT, Clock::now() + seconds(limits_.write_timeout_secs),
                                  false) != Wait::kReady) {
        broken_ = true;
        return -1;
      }
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::getpeername(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      address(addr, len, ip, port);
    }
  }

  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      address(addr, len, ip, port);
    }
  }

  socket_t socket() const override { return sock_; }

 private:
  // Polls the socket for `events` until `deadline`, also watching for shutdown() and, when
  // `yield`, for connections waiting for a thread.
  Wait wait(short events, Clock::time_point deadline, bool yield) const {
    pollfd fds[3] = {{sock_, events, 0}, {stop_fd_, POLLIN, 0}, {pressure_fd_, POLLIN, 0}};
    for (;;) {
      const int n = ::poll(fds, yield ? 3 : 2, poll_millis(deadline));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 || fds[1].revents != 0) return Wait::kStopped;
      if (fds[0].revents != 0) return Wait::kReady;
      if (yield && fds[2].revents != 0) return Wait::kPressure;
      if (Clock::now() >= deadline) return Wait::kTimeout;
    }
  }

  bool stopped() const {
    pollfd p{stop_fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) != 0;
  }

  // Answers a request that could not be read, directly: cpp-httplib's own answer would be a
  // 400, and the connection is of no further use.
  void fail(int status, std::string_view reason) {
    const std::string response = fmt::format(
        "HTTP/1.1 {} {}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", status, reason);
    write(response.data(), response.size());
    broken_ = true;
    unread_input_ = true;
  }

  static void address(const sockaddr_storage& addr, socklen_t len, std::string& ip, int& port) {
    char host[NI_MAXHOST];
    char service[NI_MAXSERV];
    if (::getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof(host), service,
                      sizeof(service), NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
      ip = host;
      port = std::atoi(service);
    }
  }

  const socket_t sock_;
  const BoardServerLimits& limits_;
  const int stop_fd_;
  const int pressure_fd_;
  Clock::time_point deadline_ = Clock::now();
  Clock::time_point slow_after_ = Clock::now();
  const Clock::time_point accepted_at_;
  int served_ = 0;  // requests begun
  size_t head_bytes_ = 0;
  char buf_[4096];
  size_t pos_ = 0, end_ = 0;  // unread bytes of buf_
  bool broken_ = false;
  bool unread_input_ = false;
};

HttpServer::HttpServer(const BoardServerLimits& limits)
    : limits_(limits), stop_fd_(make_eventfd()), pressure_fd_(make_eventfd()) {
  new_task_queue = [this] { return new Pool(static_cast<size_t>(limits_.workers), pressure_fd_); };
  // What the Keep-Alive response header announces; the connections apply it themselves.
  set_keep_alive_timeout(static_cast<time_t>(std::ceil(limits_.idle_timeout_secs)));
  set_keep_alive_max_count(static_cast<size_t>(limits_.max_requests_per_connection));
  set_payload_max_length(kMaxBodyBytes);  // never reached: bodies are refused unread
  // Refusals are decided before anything reads the body: here for a client that sends it at
  // once, in the Expect handler for one that waits for "100 Continue".
  set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    return refuse(req, res) ? HandlerResponse::Handled : HandlerResponse::Unhandled;
  });
  set_expect_100_continue_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!refuse(req, res)) return 100;
    // Written as it is, without the length that a routed response is given.
    res.set_header("Content-Length", std::to_string(res.body.size()));
    return res.status;
  });
}

HttpServer::~HttpServer() {
  shutdown();
  ::close(stop_fd_);
  ::close(pressure_fd_);
}

int HttpServer::bind(const std::string& host, int port) {
  const int bound = port == 0 ? bind_to_any_port(host) : (bind_to_port(host, port) ? port : -1);
  // cpp-httplib listens with a backlog of 5: a burst of connections would have the kernel drop
  // the rest, and their clients retry only after a second.
  if (bound >= 0) ::listen(svr_sock_, SOMAXCONN);
  return bound;
}

void HttpServer::shutdown() {
  signal_eventfd(stop_fd_);
  stop();
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  Connection conn(sock, limits_, stop_fd_, pressure_fd_);
  for (int served = 0; served < limits_.max_requests_per_connection; ++served) {
    if (!conn.wait_for_request()) break;
    conn.begin_request();
    const bool last = served + 1 == limits_.max_requests_per_connection;
    bool client_closes = false;
    const bool ok = process_request(conn, last, client_closes, [&](httplib::Request& req) {
      // Several ranges would be answered with a multipart body that may be larger than the
      // resource; one range, or the whole.
      if (req.ranges.size() > 1) req.ranges.clear();
      if (rejection(req)) {
        req.ranges.clear();
        conn.set_unread_input();
      }
    });
    if (!ok || client_closes || conn.broken() || conn.unread_input()) break;
  }
  conn.close();
  return true;
}

}  // namespace trainhooks::board::internal
