// BoardServer: `trainhooks board LOGDIR` — serves the board page and its JSON API (board_api.h)
// over HTTP (cpp-httplib), refreshing the log directory's index in the background.
//
//   trainhooks::board::BoardServer server("runs", {.port = 6006});
//   server.start();          // binds; throws UnavailableError naming host:port when it cannot
//   ... server.port() ...    // the bound port (useful with port 0)
//   server.wait();           // until stop() (from another thread or a signal handler's thread)
//
// Only the page's own files and the API are served: nothing else under or outside the log
// directory is ever read by a request. docs/tensorboard.md ("Security model") says what the
// server accepts: requests addressed to the names it is bound for, no request bodies, at most one
// byte range, and the limits below on what one client may hold.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "trainhooks/board/logdir_index.h"

namespace trainhooks::board {

// What clients may hold of the server, so that idle, slow or hostile ones cannot keep others
// from being answered or the server from stopping.
struct BoardServerLimits {
  // Connections served at once, a thread each. More wait; while some do, connections with no
  // request in progress (idle or kept alive) are closed to make room.
  int workers = 64;
  // A connection with no request in progress is closed after this.
  double idle_timeout_secs = 15;
  // A request's line and headers must arrive within this of its first byte (else 408); one
  // still arriving after a second is cut off (408) as soon as another connection waits.
  double request_timeout_secs = 10;
  // Each write of a response must make progress within this, else the connection is closed.
  double write_timeout_secs = 10;
  int max_requests_per_connection = 1000;
};

struct BoardServerOptions {
  std::string host = "127.0.0.1";
  int port = 6006;                  // 0: any free port
  double reload_interval_secs = 5;  // between background refreshes of the index, (0, 86400]
  // Host names that requests may be addressed to besides the loopback names ("localhost",
  // "127.0.0.1", "[::1]") and `host` itself (unless 0.0.0.0 or ::), without a port ("board.lan",
  // "[fe80::1]"); matched without regard to case, the Host header's port ignored. Requests to
  // any other name get 403. A board bound to a non-loopback address checks names only when this
  // is not empty.
  std::vector<std::string> allowed_hosts{};
  BoardServerLimits limits{};
  // true: start() reads the whole log directory before it listens, so the first request sees
  // everything. false: it listens at once and the first read runs in the background; a large
  // log directory then appears part by part (`trainhooks board` does this).
  bool load_before_listening = true;
  LogdirIndexOptions index{};
};

// Whether an address to listen on is the loopback interface only ("localhost", 127.x.x.x,
// "::1"): anything else ("0.0.0.0", "::", a name or an outside address) shows the board to the
// network, and the page says so.
bool is_loopback_host(std::string_view host);

// Throws InvalidArgument unless `name` can be an allowed_hosts entry: a host name of letters,
// digits, '-', '_' and '.', or an IPv6 address (bracketed or not), with no port.
void check_allowed_host(std::string_view name);

class BoardServer {
 public:
  // Options out of range (a port, the reload interval, limits, an allowed host) are
  // InvalidArgument naming the option and the value.
  BoardServer(std::filesystem::path logdir, BoardServerOptions options = {});
  ~BoardServer();  // stops
  BoardServer(const BoardServer&) = delete;
  BoardServer& operator=(const BoardServer&) = delete;

  // Reads the log directory (unless !load_before_listening), binds and starts serving on a
  // background thread. A port that another process listens on is an UnavailableError ("cannot
  // listen on 127.0.0.1:6006: Address already in use"), never a shared port; a log directory that
  // is not a directory is InvalidArgument.
  void start();
  int port() const;
  // Blocks until stop().
  void wait();
  // Stops serving: every connection ends at once, whatever its client is doing.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainhooks::board
