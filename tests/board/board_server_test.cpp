// BoardServer over loopback: the page's files, the API, refused paths and methods, live updates
// and a prompt stop. Every wait is bounded.
#include "trainhooks/board/board_server.h"

#include "summary/summary_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "board/assets.h"
#include "trainhooks/errors.h"
#include "trainhooks/summary/event_writer.h"
#include "trainhooks/testing/fake_env.h"

namespace trainhooks::board {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using summary::EventWriter;
using Clock = std::chrono::steady_clock;

using trainhooks::summary::testing::TempDir;

class BoardServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EventWriter w(dir_.path() / "train");
    for (int step = 1; step <= 10; ++step) w.add_scalar("loss", 1.0f / step, step);
    w.add_scalar("a b/c", 7, 1);
  }
  std::unique_ptr<BoardServer> start(BoardServerOptions options = {}) {
    options.port = 0;
    options.index.env.log = log_;
    auto server = std::make_unique<BoardServer>(dir_.path(), options);
    server->start();
    return server;
  }
  static httplib::Client client(const BoardServer& server) {
    httplib::Client c("127.0.0.1", server.port());
    c.set_connection_timeout(5);
    c.set_read_timeout(10);
    c.set_url_encode(false);  // paths go out byte for byte
    return c;
  }

  TempDir dir_;
  std::shared_ptr<CapturingLogSink> log_ = std::make_shared<CapturingLogSink>();
};

TEST_F(BoardServerTest, ServesThePagesFilesWithTheirContentTypes) {
  auto server = start();
  EXPECT_GT(server->port(), 0);
  auto c = client(*server);
  for (const char* path : {"/", "/board.js", "/board.css", "/uPlot.iife.min.js", "/uPlot.min.css",
                           "/LICENSE.uPlot.txt"}) {
    SCOPED_TRACE(path);
    const Asset* asset = find_asset(path);
    ASSERT_NE(asset, nullptr);
    const auto res = c.Get(path);
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->get_header_value("Content-Type"), asset->content_type);
    EXPECT_EQ(res->get_header_value("Cache-Control"), "no-cache");
    EXPECT_EQ(res->body, asset->data);
  }
  EXPECT_THAT(find_asset("/")->content_type, ::testing::StartsWith("text/html"));
  EXPECT_THAT(find_asset("/board.js")->content_type, ::testing::HasSubstr("javascript"));
  EXPECT_THAT(find_asset("/board.css")->content_type, ::testing::StartsWith("text/css"));
}

TEST_F(BoardServerTest, AnswersTheApiWithDecodedParameters) {
  auto server = start();
  auto c = client(*server);
  auto res = c.Get("/api/runs");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
  const json runs = json::parse(res->body);
  ASSERT_EQ(runs["runs"].size(), 1u);
  EXPECT_EQ(runs["runs"][0]["name"], "train");

  res = c.Get("/api/scalars?run=train&tag=loss&max_points=4");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  const json loss = json::parse(res->body);
  EXPECT_EQ(loss["total"], 10);
  EXPECT_LE(loss["steps"].size(), 4u);

  // The page's encodeURIComponent form of the tag "a b/c".
  res = c.Get("/api/scalars?run=train&tag=a%20b%2Fc");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["values"], json({7}));

  res = c.Get("/api/scalars?run=train&tag=nope");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(json::parse(res->body)["error"], "run 'train' has no scalar tag 'nope'");
}

TEST_F(BoardServerTest, NothingButThePageAndTheApiIsServed) {
  auto server = start();
  auto c = client(*server);
  for (const char* path :
       {"/etc/passwd", "/../CMakeLists.txt", "/%2e%2e/CMakeLists.txt", "/..%2fCMakeLists.txt",
        "//etc/passwd", "/index.html", "/web/board.js", "/train", "/board.js/", "/api"}) {
    SCOPED_TRACE(path);
    const auto res = c.Get(path);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 404);
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
    EXPECT_TRUE(json::parse(res->body).contains("error"));
  }
  auto res = c.Get("/api/../CMakeLists.txt");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  res = c.Get("/api/scalars?run=%2e%2e&tag=loss");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body)["error"], "invalid run name '..': has a '..' component");
  res = c.Get("/api/scalars?run=..%2Ftrain&tag=loss");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
}

TEST_F(BoardServerTest, ALoopbackBoardRefusesRequestsAddressedToOtherHosts) {
  // A page elsewhere that points its own name at 127.0.0.1 (DNS rebinding) reads nothing.
  auto server = start();
  auto c = client(*server);
  const std::string port = std::to_string(server->port());
  auto res = c.Get("/api/runs", {{"Host", "attacker.example:" + port}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  EXPECT_EQ(json::parse(res->body)["error"],
            "host 'attacker.example:" + port +
                "' refused: a board listening on 127.0.0.1 answers requests to localhost only "
                "(serve others with --host)");
  res = c.Get("/", {{"Host", "attacker.example"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  for (const std::string& host : {"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port}) {
    SCOPED_TRACE(host);
    res = c.Get("/api/runs", {{"Host", host}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
  }
}

TEST_F(BoardServerTest, MethodsOtherThanGetAreNotAllowed) {
  auto server = start();
  auto c = client(*server);
  auto res = c.Post("/api/runs", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
  EXPECT_EQ(res->get_header_value("Allow"), "GET, HEAD");
  res = c.Delete("/");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
  res = c.Put("/board.js", "x", "text/plain");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
}

TEST_F(BoardServerTest, NewEventsAppearAfterABackgroundRefresh) {
  EventWriter w(dir_.path() / "train", {.flush_secs = 1000});
  auto server = start({.reload_interval_secs = 0.05});
  auto c = client(*server);
  const auto total = [&] {
    const auto res = c.Get("/api/scalars?run=train&tag=loss");
    return res && res->status == 200 ? json::parse(res->body)["total"].get<int64_t>() : -1;
  };
  EXPECT_EQ(total(), 10);
  for (int step = 11; step <= 15; ++step) w.add_scalar("loss", 0.5f, step);
  w.flush();
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (total() != 15 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(total(), 15);
  // A new run too.
  EventWriter eval(dir_.path() / "eval");
  eval.add_scalar("loss", 1, 1);
  eval.flush();
  const auto runs = [&] {
    const auto res = c.Get("/api/runs");
    return res ? json::parse(res->body)["runs"].size() : 0u;
  };
  while (runs() != 2 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(runs(), 2u);
}

TEST_F(BoardServerTest, StopIsPromptAndEndsWait) {
  auto server = start({.reload_interval_secs = 3600});
  auto c = client(*server);
  ASSERT_TRUE(c.Get("/api/runs"));  // a kept-alive connection stays open
  std::thread waiter([&] { server->wait(); });
  const auto begin = Clock::now();
  server->stop();
  waiter.join();
  EXPECT_LT(Clock::now() - begin, std::chrono::seconds(2));
  server->stop();  // again: nothing to do
  EXPECT_FALSE(httplib::Client("127.0.0.1", server->port()).Get("/api/runs"));
}

TEST_F(BoardServerTest, APortInUseNamesHostAndPort) {
  auto first = start();
  BoardServer second(dir_.path(), {.port = first->port()});
  try {
    second.start();
    FAIL() << "bound twice";
  } catch (const UnavailableError& e) {
    EXPECT_THAT(e.what(), ::testing::StartsWith("cannot listen on 127.0.0.1:" +
                                                std::to_string(first->port()) + ": "));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("in use"));
  }
}

TEST_F(BoardServerTest, OptionsAreCheckedWhenConstructed) {
  EXPECT_THROW(BoardServer(dir_.path(), {.port = 70000}), InvalidArgument);
  EXPECT_THROW(BoardServer(dir_.path(), {.port = -1}), InvalidArgument);
  EXPECT_THROW(BoardServer(dir_.path(), {.reload_interval_secs = 0}), InvalidArgument);
}

TEST_F(BoardServerTest, AMissingLogDirectoryFailsStart) {
  BoardServer server(dir_.path() / "missing", {.port = 0});
  EXPECT_THROW(server.start(), InvalidArgument);
}

}  // namespace
}  // namespace trainhooks::board
