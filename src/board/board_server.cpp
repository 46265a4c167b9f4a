#include "trainhooks/board/board_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "board/access.h"
#include "board/assets.h"
#include "board/http_server.h"
#include "trainhooks/board/board_api.h"
#include "trainhooks/errors.h"
#include "util/json_writer.h"

namespace trainhooks::board {
namespace {

void set_json_error(const httplib::Request& req, httplib::Response& res, int status,
                    std::string_view message) {
  std::string body = "{\"error\": ";
  trainhooks::internal::append_json_string(body, message);
  body += '}';
  res.status = status;
  res.set_content(body, "application/json");
  internal::serve_whole(req);
}

}  // namespace

struct BoardServer::Impl {
  std::filesystem::path logdir;
  BoardServerOptions options;
  Env env;  // for refresh failures

  std::unique_ptr<LogdirIndex> index;
  std::unique_ptr<BoardApi> api;
  std::unique_ptr<internal::HttpServer> http;
  std::string page;  // the page's HTML as served
  std::optional<internal::HostCheck> host_check;
  std::thread listener;
  std::thread refresher;
  std::atomic<bool> listen_returned = false;
  int port = 0;

  std::mutex mu;
  std::condition_variable cv;
  bool started = false;
  bool stopping = false;  // tells the refresher to end
  bool stopped = false;   // wait() returns
  std::mutex stop_mu;     // one stop() at a time joins the threads

  void refresh() {
    try {
      index->refresh();
    } catch (const std::exception& e) {
      env.warning(
          fmt::format("trainhooks board: reading {} failed: {}", logdir.string(), e.what()));
    }
  }

  void refresh_loop() {
    if (!options.load_before_listening) refresh();
    const auto interval = std::chrono::duration<double>(options.reload_interval_secs);
    std::unique_lock lock(mu);
    while (!cv.wait_for(lock, interval, [&] { return stopping; })) {
      lock.unlock();
      refresh();
      lock.lock();
    }
  }

  void get(const httplib::Request& req, httplib::Response& res) {
    res.set_header("Cache-Control", "no-cache");
    // DNS rebinding: a page from elsewhere can point a name of its own at 127.0.0.1 and read the
    // API through the user's browser. The board answers only requests addressed to a name it
    // listens on or was told to answer to.
    if (const auto refusal = host_check->refusal(req.get_header_value("Host"))) {
      set_json_error(req, res, 403, *refusal);
      return;
    }
    if (req.path.starts_with("/api/")) {
      std::map<std::string, std::string> query;
      for (const auto& [name, value] : req.params) query.emplace(name, value);  // first wins
      const ApiResponse r = api->handle(req.path, query);
      res.set_content(r.body, r.content_type);
      if (!r.content_disposition.empty()) {
        res.set_header("Content-Disposition", r.content_disposition);
      }
      // Unset for 200, so that a range of the answer is a 206.
      if (r.status != 200) {
        res.status = r.status;
        internal::serve_whole(req);
      }
      return;
    }
    if (req.path == "/") {
      res.set_content(page, std::string(find_asset("/")->content_type));
      return;
    }
    // Only the page's own files: a path is looked up in the compiled-in table, never opened.
    if (const Asset* asset = find_asset(req.path)) {
      res.set_content(asset->data.data(), asset->data.size(), std::string(asset->content_type));
      return;
    }
    set_json_error(req, res, 404, fmt::format("not found: '{}'", req.path));
  }
};

BoardServer::BoardServer(std::filesystem::path logdir, BoardServerOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (options.port < 0 || options.port > 65535) {
    throw InvalidArgument(
        fmt::format("BoardServer: port must be in [0, 65535], got {}", options.port));
  }
  // Beyond a day, a wait would overflow the clock's range long before it mattered.
  if (!(options.reload_interval_secs > 0 && options.reload_interval_secs <= 86400)) {
    throw InvalidArgument(
        fmt::format("BoardServer: reload_interval_secs must be in (0, 86400], got {}",
                    options.reload_interval_secs));
  }
  const BoardServerLimits& l = options.limits;
  check_positive("BoardServer", "limits.workers", l.workers);
  check_positive("BoardServer", "limits.max_requests_per_connection",
                 l.max_requests_per_connection);
  for (const auto& [name, value] : {std::pair{"limits.idle_timeout_secs", l.idle_timeout_secs},
                                    {"limits.request_timeout_secs", l.request_timeout_secs},
                                    {"limits.write_timeout_secs", l.write_timeout_secs}}) {
    if (!(value > 0 && value <= 86400)) {
      throw InvalidArgument(
          fmt::format("BoardServer: {} must be in (0, 86400], got {}", name, value));
    }
  }
  for (const std::string& name : options.allowed_hosts) check_allowed_host(name);

  Impl& s = *impl_;
  s.logdir = std::move(logdir);
  s.env = options.index.env.or_else(Env::system());
  s.options = std::move(options);
  s.page = internal::served_page(s.options.host);
  s.host_check.emplace(s.options.host, s.options.allowed_hosts);
}

BoardServer::~BoardServer() { stop(); }

void BoardServer::start() {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.mu);
    if (s.started) throw FailedPreconditionError("BoardServer::start called twice");
  }
  s.index = std::make_unique<LogdirIndex>(s.logdir, s.options.index);
  if (s.options.load_before_listening) s.refresh();
  s.api = std::make_unique<BoardApi>(*s.index);

  // Methods other than GET and HEAD, and requests with bodies, are refused by the HttpServer.
  s.http = std::make_unique<internal::HttpServer>(s.options.limits);
  s.http->Get(".*", [&s](const httplib::Request& req, httplib::Response& res) { s.get(req, res); });

  // SO_REUSEADDR (a restart may bind while old connections linger in TIME_WAIT) but not
  // httplib's default SO_REUSEPORT, with which a second board would silently share the port.
  s.http->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  const std::string& host = s.options.host;
  errno = 0;
  const int port = s.http->bind(host, s.options.port);
  if (port < 0) {
    // cpp-httplib reports only failure; errno still holds the failing call's reason (bind's
    // EADDRINUSE, ...) unless the host name did not resolve.
    const std::string reason = errno != 0 ? std::strerror(errno) : "cannot bind to that address";
    throw UnavailableError(fmt::format("cannot listen on {}:{}: {}", host, s.options.port, reason));
  }
  s.port = port;

  s.listener = std::thread([&s] {
    s.http->listen_after_bind();
    s.listen_returned = true;
  });
  // httplib's stop() does nothing until listen has begun: wait for it, so that a stop() right
  // after start() cannot be lost. It begins at once.
  while (!s.http->is_running() && !s.listen_returned) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!s.http->is_running()) {
    s.listener.join();
    throw UnavailableError(fmt::format("cannot listen on {}:{}", host, s.port));
  }
  s.refresher = std::thread([&s] { s.refresh_loop(); });
  std::lock_guard lock(s.mu);
  s.started = true;
}

int BoardServer::port() const { return impl_->port; }

void BoardServer::wait() {
  std::unique_lock lock(impl_->mu);
  impl_->cv.wait(lock, [&] { return !impl_->started || impl_->stopped; });
}

void BoardServer::stop() {
  Impl& s = *impl_;
  std::lock_guard stop_lock(s.stop_mu);
  {
    std::lock_guard lock(s.mu);
    if (!s.started || s.stopped) return;
    s.stopping = true;
  }
  s.cv.notify_all();
  s.http->shutdown();
  if (s.listener.joinable()) s.listener.join();
  if (s.refresher.joinable()) s.refresher.join();
  {
    std::lock_guard lock(s.mu);
    s.stopped = true;
  }
  s.cv.notify_all();
}

}  // namespace trainhooks::board
