// BoardServer: `trainhooks board LOGDIR` — serves the board page and its JSON API (board_api.h)
// over HTTP (cpp-httplib), refreshing the log directory's index in the background.
//
//   trainhooks::board::BoardServer server("runs", {.port = 6006});
//   server.start();          // binds; throws UnavailableError naming host:port when it cannot
//   ... server.port() ...    // the bound port (useful with port 0)
//   server.wait();           // until stop() (from another thread or a signal handler's thread)
//
// Only the page's own files and the API are served: nothing else under or outside the log
// directory is ever read by a request.
#pragma once
#include <filesystem>
#include <memory>
#include <string>

#include "trainhooks/board/logdir_index.h"

namespace trainhooks::board {

struct BoardServerOptions {
  std::string host = "127.0.0.1";
  int port = 6006;                  // 0: any free port
  double reload_interval_secs = 5;  // between background refreshes of the index
  // true: start() reads the whole log directory before it listens, so the first request sees
  // everything. false: it listens at once and the first read runs in the background; a large
  // log directory then appears part by part (`trainhooks board` does this).
  bool load_before_listening = true;
  LogdirIndexOptions index{};
};

class BoardServer {
 public:
  BoardServer(std::filesystem::path logdir, BoardServerOptions options = {});
  ~BoardServer();  // stops
  BoardServer(const BoardServer&) = delete;
  BoardServer& operator=(const BoardServer&) = delete;

  // Reads the log directory (unless !load_before_listening), binds and starts serving on a
  // background thread. A port that
  // another process listens on is an UnavailableError ("cannot listen on 127.0.0.1:6006:
  // Address already in use"), never a shared port; a log directory that is not a directory is
  // InvalidArgument.
  void start();
  int port() const;
  // Blocks until stop().
  void wait();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainhooks::board
