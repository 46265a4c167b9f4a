// HttpServer: cpp-httplib's server with connection handling of its own, so that no client can
// hold the board: BoardServer serves through it (docs/tensorboard.md, "Security model").
//
// cpp-httplib serves each connection on a pool thread for its whole life and reads a request
// with a timeout per read, not per request: idle connections occupy every thread, a client
// sending a header line every few seconds holds one forever, and its stop() waits for all of
// them. HttpServer keeps its request parsing, routing and response writing (process_request)
// and replaces what is around it:
//   - a pool that grows to `limits.workers` threads; when every one is busy, a connection
//     waiting between requests (idle, or kept alive) gives its thread to the connections
//     queued behind it;
//   - a connection is closed after `idle_timeout_secs` without a request, and a request's line
//     and headers must arrive within `request_timeout_secs` of its first byte (else 408) and
//     hold at most 64 KiB (else 431); a request still arriving after a second is cut off (408)
//     as soon as connections wait for a thread; a write must make progress within
//     `write_timeout_secs`;
//   - no request body is ever read: a Content-Length above 4 KiB, a chunked body, or any body on
//     GET or HEAD gets 413; methods other than GET and HEAD get 405; either way before the body
//     is read, and the connection is closed after the answer;
//   - a request for several byte ranges gets the whole resource (200), as if it had none; a
//     refusal is always whole;
//   - shutdown() ends every connection at once, whatever its client is doing.
//
//   HttpServer http(limits);
//   http.Get(".*", handler);
//   const int port = http.bind("127.0.0.1", 0);    // -1 and errno when it cannot
//   std::thread t([&] { http.listen_after_bind(); });
//   ...
//   http.shutdown();                               // then t.join() returns promptly
#pragma once
#include <httplib.h>

#include <atomic>
#include <string>

#include "trainhooks/board/board_server.h"

namespace trainhooks::board::internal {

// Answers `req` with the whole body whatever Range it asked for: for answers that are not the
// resource asked for (errors), which a range of would be meaningless. A handler's response
// status is best left unset (-1) for the resource itself, so that cpp-httplib answers a range
// with 206.
void serve_whole(const httplib::Request& req);

class HttpServer : public httplib::Server {
 public:
  // Bodies up to this size are refused with 405 (on a method other than GET or HEAD) rather than
  // 413; none is read.
  static constexpr size_t kMaxBodyBytes = 4096;
  // A request's line and headers together.
  static constexpr size_t kMaxHeadBytes = 64 * 1024;

  explicit HttpServer(const BoardServerLimits& limits);
  ~HttpServer() override;

  // Binds `host`:`port` (0: any free port) with a listen backlog that absorbs bursts of
  // connections. The port bound, or -1 with errno as the failing call left it.
  int bind(const std::string& host, int port);
  // Stops listening and ends every connection now; listen_after_bind() returns promptly.
  void shutdown();

 private:
  class Pool;
  class Connection;

  // Called by cpp-httplib on a pool thread for each accepted connection.
  bool process_and_close_socket(socket_t sock) override;

  BoardServerLimits limits_;
  int stop_fd_ = -1;      // eventfd: readable once shutdown() has been called
  int pressure_fd_ = -1;  // eventfd: readable while connections wait for a thread
};

}  // namespace trainhooks::board::internal
