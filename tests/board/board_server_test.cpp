// BoardServer over loopback: the page's files, the API, refused paths and methods, live updates
// and a prompt stop. Every wait is bounded.
#include "trainhooks/board/board_server.h"

#include "summary/summary_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "board/access.h"
#include "board/assets.h"
#include "board/board_test_logdir.h"
#include "board/raw_http_client.h"
#include "trainhooks/errors.h"
#include "trainhooks/summary/event_writer.h"
#include "trainhooks/testing/fake_env.h"

namespace trainhooks::board {
namespace board_server_test {

namespace fs = std::filesystem;
using nlohmann::json;
using summary::EventWriter;
using Clock = std::chrono::steady_clock;

using trainhooks::board::testing::RawConnection;
using trainhooks::board::testing::RawResponse;
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
  std::vector<std::string_view> paths = {"/", "/board.css", "/uPlot.min.css"};
  for (const VendoredScript& library : kVendoredScripts) {
    paths.push_back(library.path);
    paths.push_back(library.licence);
  }
  paths.insert(paths.end(), kPageModules.begin(), kPageModules.end());
  for (const std::string_view path : paths) {
    SCOPED_TRACE(path);
    const Asset* asset = find_asset(path);
    ASSERT_NE(asset, nullptr);
    const auto res = c.Get(std::string(path));
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->get_header_value("Content-Type"), asset->content_type);
    EXPECT_EQ(res->get_header_value("Cache-Control"), "no-cache");
    EXPECT_EQ(res->body, asset->data);
  }
  EXPECT_THAT(find_asset("/")->content_type, ::testing::StartsWith("text/html"));
  // Browsers run a module only when it is served as JavaScript.
  for (const std::string_view path : kPageModules) {
    EXPECT_EQ(find_asset(path)->content_type, "text/javascript; charset=utf-8") << path;
  }
  for (const VendoredScript& library : kVendoredScripts) {
    EXPECT_EQ(find_asset(library.path)->content_type, "text/javascript; charset=utf-8");
    EXPECT_THAT(find_asset(library.licence)->data, ::testing::HasSubstr("Copyright"));
  }
  EXPECT_THAT(find_asset("/board.css")->content_type, ::testing::StartsWith("text/css"));
}

TEST(BoardPageTest, LoadsTheLibrariesAndThenItsEntryModule) {
  const std::string_view page = find_asset("/")->data;
  std::vector<std::string> loaded;
  const std::regex script(R"re(<script( type="(importmap|module)")?( src="([^"]*)")?>)re");
  for (auto it = std::cregex_iterator(page.data(), page.data() + page.size(), script);
       it != std::cregex_iterator(); ++it) {
    loaded.push_back((*it)[2].matched ? (*it)[2].str() + " /" + (*it)[4].str()
                                      : "/" + (*it)[4].str());
  }
  std::vector<std::string> expected;
  for (const VendoredScript& library : kVendoredScripts) expected.emplace_back(library.path);
  expected.push_back("importmap /");
  expected.push_back("module " + std::string(kPageModules.back()));
  EXPECT_EQ(loaded, expected);
  EXPECT_THAT(
      std::string(page),
      ::testing::HasSubstr(R"(<script type="importmap">{"imports": {"board/": "./"}}</script>)"));
}

// The modules load with no build step: each imports only served modules, by the import map's
// "board/" names, and stays small enough to read.
TEST(BoardPageTest, ModulesImportOnlyTheServedModules) {
  const std::set<std::string_view> served(kPageModules.begin(), kPageModules.end());
  const std::regex import_from(R"re(\bfrom\s+"([^"]*)")re");
  const std::regex any_import(R"re(^\s*import\b)re");
  std::set<std::string> imported;
  for (const std::string_view path : kPageModules) {
    SCOPED_TRACE(path);
    const std::string text(find_asset(path)->data);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), import_from);
         it != std::sregex_iterator(); ++it) {
      const std::string specifier = (*it)[1];
      ASSERT_TRUE(specifier.starts_with("board/")) << specifier;
      EXPECT_TRUE(served.contains(specifier.substr(5))) << specifier;
      imported.insert(specifier.substr(5));
    }
    EXPECT_EQ(std::regex_search(text, std::regex(R"(\bimport\s*\()")), false)
        << "no dynamic imports: the report resolves static ones only";
    EXPECT_LE(std::count(text.begin(), text.end(), '\n'), 400) << "split it by concern";
  }
  // Every module but the entry is imported by another.
  for (const std::string_view path : kPageModules) {
    if (path != kPageModules.back()) {
      EXPECT_TRUE(imported.contains(std::string(path))) << path;
    }
  }
}

TEST_F(BoardServerTest, DownloadsNameTheirFileWithoutInjectingHeaders) {
  {
    EventWriter w(dir_.path() / "exp\"\r\nX-Injected: 1");
    w.add_scalar("t\r\nSet-Cookie: a=b", 1.5f, 3);
  }
  auto server = start();
  auto c = client(*server);
  auto res = c.Get("/api/scalars?run=train&tag=loss&format=csv");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/csv; charset=utf-8");
  EXPECT_EQ(
      res->get_header_value("Content-Disposition"),
      "attachment; filename=\"run-train-tag-loss.csv\"; filename*=UTF-8''run-train-tag-loss.csv");
  EXPECT_TRUE(res->body.starts_with("Wall time,Step,Value\r\n")) << res->body;
  EXPECT_EQ(std::count(res->body.begin(), res->body.end(), '\n'), 11);

  // A hostile run and tag reach the header percent-encoded, and add no header of their own.
  RawConnection raw(server->port());
  raw.send(
      "GET /api/scalars?run=exp%22%0D%0AX-Injected%3A%201&tag=t%0D%0ASet-Cookie%3A%20a%3Db"
      "&format=json HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  const RawResponse r = raw.read_response(std::chrono::seconds(5));
  EXPECT_EQ(r.status, 200) << r.head;
  EXPECT_THAT(r.head, ::testing::HasSubstr(
                          "Content-Disposition: attachment; filename=\"run-exp___X-Injected__1-"
                          "tag-t__Set-Cookie__a_b.json\"; filename*=UTF-8''run-exp%22%0D%0AX-"
                          "Injected%3A%201-tag-t%0D%0ASet-Cookie%3A%20a%3Db.json\r\n"));
  EXPECT_THAT(r.head, ::testing::Not(::testing::HasSubstr("\r\nX-Injected")));
  EXPECT_THAT(r.head, ::testing::Not(::testing::HasSubstr("\r\nSet-Cookie")));
  const json rows = json::parse(r.body);
  ASSERT_EQ(rows.size(), 1u) << r.body;
  EXPECT_EQ(rows[0][1], 3);
  EXPECT_EQ(rows[0][2], 1.5);
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

TEST_F(BoardServerTest, AnswersTheGraphAndHParamsEndpoints) {
  testing::write_view_runs(dir_.path());
  auto server = start();
  auto c = client(*server);
  auto res = c.Get("/api/graph?run=hp%2Fadam");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(json::parse(res->body)["nodes"].size(), static_cast<size_t>(testing::kGraphNodes));

  res = c.Get("/api/hparams");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["sessions"].size(), std::size(testing::kViewRuns));

  const std::vector<std::tuple<std::string, int, std::string>> refused = {
      {"/api/graph", 400, "missing parameter 'run'"},
      {"/api/graph?run=..%2Fhp", 400, "invalid run name '../hp': has a '..' component"},
      {"/api/graph?run=nope", 404, "unknown run 'nope'"},
      {"/api/graph?run=train", 404, "run 'train' has no graph"},
  };
  for (const auto& [target, status, message] : refused) {
    SCOPED_TRACE(target);
    res = c.Get(target);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status);
    EXPECT_EQ(json::parse(res->body)["error"], message);
  }
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

TEST_F(BoardServerTest, ALoopbackBoardAnswersOnlyItsLoopbackNames) {
  // A page elsewhere that points its own name at 127.0.0.1 (DNS rebinding) reads nothing.
  auto server = start();
  auto c = client(*server);
  const std::string port = std::to_string(server->port());
  auto res = c.Get("/api/runs", {{"Host", "attacker.example:" + port}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  EXPECT_EQ(json::parse(res->body)["error"],
            "host 'attacker.example:" + port +
                "' refused: a board listening on 127.0.0.1 answers requests to localhost, "
                "127.0.0.1, [::1] only (allow others with --allow-host)");
  // Names that merely start like a loopback one, and a port that is not a number.
  for (const std::string& host : std::vector<std::string>{
           "attacker.example", "127.0.0.1.evil.example:" + port, "127.evil.example",
           "127.0.0.1:" + port + ".evil.example", "127.", "127.0.0.1 evil.example", "127.0.0.2",
           "localhost.evil.example", "localhost:", "localhost:x", "[::1]x", "[::1", "0x7f.1", ""}) {
    SCOPED_TRACE(host);
    res = c.Get("/", {{"Host", host}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 403);
  }
  for (const std::string& host :
       std::vector<std::string>{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port,
                                "localhost", "127.0.0.1", "[::1]", "LocalHost:8080"}) {
    SCOPED_TRACE(host);
    res = c.Get("/api/runs", {{"Host", host}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
  }
}

TEST_F(BoardServerTest, AllowedHostsAreAnsweredBesideTheLoopbackNames) {
  auto server = start({.allowed_hosts = {"Board.LAN", "[fe80::1]"}});
  auto c = client(*server);
  for (const std::string host : {"board.lan", "BOARD.lan:6006", "[fe80::1]:80", "localhost"}) {
    SCOPED_TRACE(host);
    const auto res = c.Get("/api/runs", {{"Host", host}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
  }
  for (const std::string host : {"board.lan.evil.example", "evil.board.lan", "fe80::1"}) {
    SCOPED_TRACE(host);
    const auto res = c.Get("/api/runs", {{"Host", host}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 403);
    EXPECT_THAT(json::parse(res->body)["error"].get<std::string>(),
                ::testing::EndsWith("answers requests to localhost, 127.0.0.1, [::1], board.lan, "
                                    "[fe80::1] only (allow others with --allow-host)"));
  }
}

// What a board listening beyond loopback does differently, without listening there.
TEST(BoardAccessTest, ABoardOnTheNetworkSaysSoOnItsPage) {
  const std::string page(find_asset("/")->data);
  EXPECT_EQ(internal::served_page("127.0.0.1"), page);
  EXPECT_EQ(internal::served_page("localhost"), page);
  const std::string exposed = internal::served_page("0.0.0.0");
  const std::string banner =
      "<div id=\"network-warning\" class=\"network-warning\" role=\"alert\">This board listens on "
      "0.0.0.0 and is reachable from the network: anyone who can reach its port can read these "
      "runs (there is no authentication).</div>";
  EXPECT_THAT(exposed, ::testing::HasSubstr("</header>\n" + banner + "\n<div class=\"layout\">"));
  EXPECT_THAT(internal::served_page("<b>"), ::testing::HasSubstr("listens on &lt;b&gt; and"));
}

TEST(BoardAccessTest, ABoardOnTheNetworkAnswersAnyNameUnlessTold) {
  const internal::HostCheck any("0.0.0.0", {});
  EXPECT_EQ(any.refusal("gpu-box.example:6006"), std::nullopt);
  EXPECT_EQ(any.refusal(""), std::nullopt);
  const internal::HostCheck named("0.0.0.0", {"gpu-box.example"});
  EXPECT_EQ(named.refusal("gpu-box.example:6006"), std::nullopt);
  EXPECT_EQ(named.refusal("localhost:6006"), std::nullopt);
  EXPECT_EQ(named.refusal("rebound.example"),
            "host 'rebound.example' refused: a board listening on 0.0.0.0 answers requests to "
            "localhost, 127.0.0.1, [::1], gpu-box.example only (allow others with --allow-host)");
  // The address listened on is a name too.
  const internal::HostCheck address("192.168.1.5", {"gpu-box"});
  EXPECT_EQ(address.refusal("192.168.1.5:6006"), std::nullopt);
  const internal::HostCheck loopback("127.0.0.2", {});
  EXPECT_EQ(loopback.refusal("127.0.0.2:6006"), std::nullopt);
  EXPECT_NE(loopback.refusal("127.0.0.3:6006"), std::nullopt);
  const internal::HostCheck v6("::1", {"fe80::1"});
  EXPECT_EQ(v6.refusal("[::1]:6006"), std::nullopt);
  EXPECT_EQ(v6.refusal("[FE80::1]:6006"), std::nullopt);

  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("127.1.2.3"));
  EXPECT_TRUE(is_loopback_host("::1"));
  EXPECT_TRUE(is_loopback_host("LOCALHOST"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
  EXPECT_FALSE(is_loopback_host("::"));
  EXPECT_FALSE(is_loopback_host("127.evil.example"));
  EXPECT_FALSE(is_loopback_host("192.168.1.5"));
}

TEST_F(BoardServerTest, MethodsOtherThanGetAreNotAllowed) {
  auto server = start();
  auto c = client(*server);
  auto res = c.Post("/api/runs", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
  EXPECT_EQ(res->get_header_value("Allow"), "GET, HEAD");
  EXPECT_EQ(json::parse(res->body)["error"], "method POST not allowed (only GET)");
  res = c.Delete("/");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
  res = c.Put("/board.js", "x", "text/plain");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
  res = c.Options("/");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
  res = c.Head("/board.js");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST_F(BoardServerTest, RequestBodiesAreRefusedUnread) {
  auto server = start();
  const std::string head = "Host: 127.0.0.1\r\n";
  {
    // 200 MiB announced: the answer comes before any of it is sent, then the connection closes.
    RawConnection c(server->port());
    ASSERT_TRUE(c.send("POST /api/runs HTTP/1.1\r\n" + head + "Content-Length: 209715200\r\n\r\n"));
    const RawResponse r = c.read_response(std::chrono::seconds(5));
    EXPECT_EQ(r.status, 413) << r.head;
    EXPECT_EQ(json::parse(r.body)["error"],
              "request body refused: the board takes none (Content-Length: 209715200; at most "
              "4096 bytes are even answered)");
    EXPECT_TRUE(r.closed);
    // The server reads none of it: a client sending it anyway is cut off long before the end.
    const std::string mib(1 << 20, 'x');
    int sent = 0;
    while (sent < 200 && c.send(mib)) ++sent;
    EXPECT_LT(sent, 200);
  }
  {
    // A client that waits for "100 Continue" is answered at once instead.
    RawConnection c(server->port());
    ASSERT_TRUE(c.send("PUT /x HTTP/1.1\r\n" + head +
                       "Content-Length: 209715200\r\nExpect: 100-continue\r\n\r\n"));
    const RawResponse r = c.read_response(std::chrono::seconds(5));
    EXPECT_EQ(r.status, 413) << r.head;
    EXPECT_TRUE(r.closed);
  }
  for (const std::string& request : std::vector<std::string>{
           "GET /api/runs HTTP/1.1\r\n" + head + "Content-Length: 5\r\n\r\nhello",
           "HEAD / HTTP/1.1\r\n" + head + "Content-Length: 1\r\n\r\nx",
           "GET / HTTP/1.1\r\n" + head +
               "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
           "POST / HTTP/1.1\r\n" + head + "Transfer-Encoding: chunked\r\n\r\n"}) {
    SCOPED_TRACE(request);
    RawConnection c(server->port());
    ASSERT_TRUE(c.send(request));
    const RawResponse r = c.read_response(std::chrono::seconds(5), request.starts_with("HEAD"));
    EXPECT_EQ(r.status, 413) << r.head;
    EXPECT_TRUE(r.closed);
  }
  // A small body on another method is a 405, and its bytes are never taken for a request.
  RawConnection c(server->port());
  ASSERT_TRUE(c.send("POST / HTTP/1.1\r\n" + head +
                     "Content-Length: 37\r\n\r\nGET /api/runs HTTP/1.1\r\nHost: x\r\n\r\n"));
  const RawResponse r = c.read_response(std::chrono::seconds(5));
  EXPECT_EQ(r.status, 405) << r.head;
  EXPECT_TRUE(r.closed);
}

TEST_F(BoardServerTest, AtMostOneRangeIsServed) {
  auto server = start();
  const Asset* js = find_asset("/board.js");
  auto c = client(*server);
  auto res = c.Get("/board.js", {{"Range", "bytes=0-9"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 206);
  EXPECT_EQ(res->body, js->data.substr(0, 10));
  // 200 overlapping ranges would be 200 copies; the whole file is sent once instead.
  std::string ranges = "bytes=0-";
  for (int i = 0; i < 199; ++i) ranges += ",0-";
  res = c.Get("/board.js", {{"Range", ranges}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, js->data);
  res = c.Get("/board.js", {{"Range", "bytes=0-0,5-9"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body.size(), js->data.size());
  // An error is whole too.
  res = c.Get("/nope", {{"Range", "bytes=0-3"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(json::parse(res->body)["error"], "not found: '/nope'");
  res = c.Get("/api/runs", {{"Range", "bytes=0-0"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 206);
  EXPECT_EQ(res->body, "{");
}

TEST_F(BoardServerTest, IdleConnectionsGiveWayToRequests) {
  // Four threads and twenty idle connections, each of which the server would otherwise keep for
  // a minute: the request behind them is answered.
  auto server = start({.limits = {.workers = 4, .idle_timeout_secs = 60}});
  std::vector<RawConnection> idle;
  for (int i = 0; i < 20; ++i) {
    idle.emplace_back(server->port());
    ASSERT_TRUE(idle.back().connected());
  }
  // Some kept alive after a request of their own.
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(idle[i].send("GET /api/runs HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    EXPECT_EQ(idle[i].read_response(std::chrono::seconds(5)).status, 200);
  }
  auto c = client(*server);
  c.set_read_timeout(5);  // well below the idle connections' minute
  const auto res = c.Get("/api/runs");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
}

TEST_F(BoardServerTest, SlowRequestsGiveWayToOthers) {
  // Two threads, both held by requests that arrive a header line at a time and would be given a
  // minute: once a request waits for a thread, those that have taken over a second are cut off.
  auto server = start({.limits = {.workers = 2, .request_timeout_secs = 60}});
  std::vector<RawConnection> slow;
  for (int i = 0; i < 4; ++i) {
    slow.emplace_back(server->port());
    ASSERT_TRUE(slow.back().send("GET /api/runs HTTP/1.1\r\nHost: localhost\r\n"));
  }
  std::atomic<bool> done = false;
  std::thread trickle([&] {
    for (int n = 0; !done; ++n) {
      for (RawConnection& c : slow) c.send("X-Slow-" + std::to_string(n) + ": 1\r\n");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  auto c = client(*server);
  c.set_read_timeout(10);  // well below the slow requests' minute
  const auto res = c.Get("/api/runs");
  done = true;
  trickle.join();
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  int cut_off = 0;
  for (RawConnection& s : slow) {
    cut_off += s.receive(std::chrono::milliseconds(100)).starts_with("HTTP/1.1 408 ");
  }
  EXPECT_GE(cut_off, 2);
}

TEST_F(BoardServerTest, IdleConnectionsAreClosed) {
  auto server = start({.limits = {.idle_timeout_secs = 0.2}});
  RawConnection never_asked(server->port());
  RawConnection kept_alive(server->port());
  ASSERT_TRUE(kept_alive.send("GET /api/runs HTTP/1.1\r\nHost: localhost\r\n\r\n"));
  EXPECT_EQ(kept_alive.read_response(std::chrono::seconds(5)).status, 200);
  EXPECT_TRUE(never_asked.closed_within(std::chrono::seconds(5)));
  EXPECT_TRUE(kept_alive.closed_within(std::chrono::seconds(5)));
}

TEST_F(BoardServerTest, ASlowRequestIsCutOffAt408) {
  auto server = start({.limits = {.request_timeout_secs = 0.3}});
  RawConnection slow(server->port());
  ASSERT_TRUE(slow.send("GET /api/runs HTTP/1.1\r\n"));
  // A header line every 50 ms, each well within any per-read timeout, never ends the request.
  std::string received;
  for (int i = 0; i < 100 && received.empty() && !slow.closed(); ++i) {
    if (!slow.send("X-Slow-" + std::to_string(i) + ": 1\r\n")) break;
    received = slow.receive(std::chrono::milliseconds(50));
  }
  EXPECT_THAT(received, ::testing::StartsWith("HTTP/1.1 408 Request Timeout\r\n"));
  EXPECT_TRUE(slow.closed_within(std::chrono::seconds(5)));
  // Others were answered meanwhile and after.
  const auto res = client(*server).Get("/api/runs");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST_F(BoardServerTest, OversizedHeadersAre431) {
  auto server = start();
  RawConnection c(server->port());
  std::string request = "GET / HTTP/1.1\r\nHost: localhost\r\n";
  while (request.size() < 80 * 1024) request += "X-Filler: " + std::string(1000, 'y') + "\r\n";
  c.send(request);
  const std::string received = c.receive(std::chrono::seconds(5));
  EXPECT_THAT(received, ::testing::StartsWith("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
}

TEST_F(BoardServerTest, StopIsPromptWhateverTheClientsDo) {
  auto server = start({.limits = {.idle_timeout_secs = 60, .request_timeout_secs = 60}});
  std::vector<RawConnection> clients;
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back(server->port());
    clients.back().send("GET / HTTP/1.1\r\nX-Slow: 1\r\n");  // headers never finished
  }
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back(server->port());
    clients.back().send("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n");
  }
  for (int i = 0; i < 30; ++i) clients.emplace_back(server->port());  // idle
  // One that asks for a large answer and never reads it.
  clients.emplace_back(server->port());
  for (int i = 0; i < 200; ++i)
    clients.back().send("GET /uPlot.iife.min.js HTTP/1.1\r\nHost: localhost\r\n\r\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // all of them at the server
  const auto begin = Clock::now();
  server->stop();
  EXPECT_LT(Clock::now() - begin, std::chrono::seconds(2));
  for (RawConnection& c : clients) EXPECT_TRUE(c.closed_within(std::chrono::seconds(2)));
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
  EXPECT_THROW(BoardServer(dir_.path(), {.reload_interval_secs = 1e300}), InvalidArgument);
  EXPECT_THROW(BoardServer(dir_.path(), {.limits = {.workers = 0}}), InvalidArgument);
  EXPECT_THROW(BoardServer(dir_.path(), {.limits = {.idle_timeout_secs = 0}}), InvalidArgument);
  try {
    BoardServer(dir_.path(), {.allowed_hosts = {"evil.example:80"}});
    FAIL() << "accepted a port";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "allowed host 'evil.example:80' is not a host name (letters, digits, '-', '_' "
                 "and '.', or an IPv6 address; no port)");
  }
  EXPECT_THROW(BoardServer(dir_.path(), {.allowed_hosts = {""}}), InvalidArgument);
  EXPECT_THROW(BoardServer(dir_.path(), {.allowed_hosts = {"a b"}}), InvalidArgument);
}

TEST_F(BoardServerTest, AMissingLogDirectoryFailsStart) {
  BoardServer server(dir_.path() / "missing", {.port = 0});
  EXPECT_THROW(server.start(), InvalidArgument);
}

}  // namespace board_server_test
}  // namespace trainhooks::board
