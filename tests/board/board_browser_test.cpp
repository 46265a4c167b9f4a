// The board's page in a real browser: headless Chromium (installed by scripts/install-deps.sh)
// loads the live board (BoardServer on a loopback port) and the report file, and the tests read
// the DOM it renders (--dump-dom) the way a user would see it: the runs, a chart with a canvas per
// scalar tag, the distributions, a loaded image, the text. Screenshots are left in the build
// directory (board_screenshot.png, board_report_screenshot.png) for a person to look at.
//
// Chromium runs with a fresh profile and --virtual-time-budget: the page's timers (its 5 s
// refresh) run on virtual time, which waits for pending network requests, so the DOM is dumped
// once the page has settled and a run takes a few seconds of real time. Every run is killed after
// kChromiumTimeout.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "board/assets.h"
#include "board/board_test_logdir.h"
#include "trainhooks/board/board_api.h"
#include "trainhooks/board/board_server.h"
#include "trainhooks/board/logdir_index.h"
#include "trainhooks/board/report.h"
#include "trainhooks/summary/event_writer.h"
#include "trainhooks/testing/fake_env.h"

namespace trainhooks::board {
namespace board_browser_test {

namespace fs = std::filesystem;

constexpr const char* kChromium = "/usr/bin/chromium";
constexpr auto kChromiumTimeout = std::chrono::seconds(60);

// ---- A minimal DOM of Chromium's serialization (well-formed HTML) -------------------------

struct Node {
  std::string name;  // lower case; empty for a text node
  std::map<std::string, std::string> attrs;
  std::string text;  // a text node's text, entities decoded
  std::vector<std::unique_ptr<Node>> children;

  std::string attr(const std::string& n) const {
    auto it = attrs.find(n);
    return it == attrs.end() ? std::string() : it->second;
  }
  bool has_attr(const std::string& n) const { return attrs.contains(n); }
  bool has_class(std::string_view c) const {
    std::istringstream classes(attr("class"));
    std::string one;
    while (classes >> one)
      if (one == c) return true;
    return false;
  }
  std::string text_content() const {
    if (name.empty()) return text;
    std::string out;
    for (const auto& child : children) out += child->text_content();
    return out;
  }
};

std::string decode_entities(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const size_t semi = s.find(';', i);
    if (semi == std::string_view::npos || semi - i > 10) {
      out += s[i];
      continue;
    }
    const std::string_view name = s.substr(i + 1, semi - i - 1);
    static const std::map<std::string_view, std::string_view> kNamed = {
        {"amp", "&"},   {"lt", "<"},   {"gt", ">"},
        {"quot", "\""}, {"apos", "'"}, {"nbsp", "\xC2\xA0"}};
    if (auto it = kNamed.find(name); it != kNamed.end()) {
      out += it->second;
    } else if (name.starts_with('#')) {
      const long code = name.size() > 1 && (name[1] == 'x' || name[1] == 'X')
                            ? std::stol(std::string(name.substr(2)), nullptr, 16)
                            : std::stol(std::string(name.substr(1)));
      if (code < 0x80)
        out += static_cast<char>(code);
      else
        out += '?';  // not needed by the assertions
    } else {
      out.append(s.substr(i, semi - i + 1));
    }
    i = semi;
  }
  return out;
}

std::unique_ptr<Node> parse_html(std::string_view html) {
  static const std::vector<std::string_view> kVoid = {"area",   "base",  "br",    "col",  "embed",
                                                      "hr",     "img",   "input", "link", "meta",
                                                      "source", "track", "wbr"};
  static const std::vector<std::string_view> kRawText = {"script", "style", "textarea", "title"};
  auto root = std::make_unique<Node>();
  root->name = "#document";
  std::vector<Node*> open = {root.get()};
  auto add_text = [&](std::string_view t) {
    if (t.empty()) return;
    auto n = std::make_unique<Node>();
    n->text = decode_entities(t);
    open.back()->children.push_back(std::move(n));
  };
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  size_t i = 0;
  while (i < html.size()) {
    if (html[i] != '<') {
      const size_t next = html.find('<', i);
      add_text(html.substr(i, next == std::string_view::npos ? std::string_view::npos : next - i));
      if (next == std::string_view::npos) break;
      i = next;
      continue;
    }
    if (html.substr(i, 4) == "<!--") {
      const size_t end = html.find("-->", i);
      i = end == std::string_view::npos ? html.size() : end + 3;
      continue;
    }
    if (html.substr(i, 2) == "<!" || html.substr(i, 2) == "<?") {
      const size_t end = html.find('>', i);
      i = end == std::string_view::npos ? html.size() : end + 1;
      continue;
    }
    if (html.substr(i, 2) == "</") {
      const size_t end = html.find('>', i);
      const std::string name = lower(std::string(html.substr(i + 2, end - i - 2)));
      for (size_t k = open.size(); k-- > 1;) {
        if (open[k]->name == name) {
          open.resize(k);
          break;
        }
      }
      i = end == std::string_view::npos ? html.size() : end + 1;
      continue;
    }
    // A start tag.
    size_t j = i + 1;
    while (j < html.size() && !std::isspace(static_cast<unsigned char>(html[j])) &&
           html[j] != '>' && html[j] != '/')
      ++j;
    auto node = std::make_unique<Node>();
    node->name = lower(std::string(html.substr(i + 1, j - i - 1)));
    bool self_closing = false;
    while (j < html.size() && html[j] != '>') {
      if (std::isspace(static_cast<unsigned char>(html[j]))) {
        ++j;
        continue;
      }
      if (html[j] == '/') {
        self_closing = true;
        ++j;
        continue;
      }
      size_t k = j;
      while (k < html.size() && html[k] != '=' && html[k] != '>' &&
             !std::isspace(static_cast<unsigned char>(html[k])) && html[k] != '/')
        ++k;
      const std::string attr = lower(std::string(html.substr(j, k - j)));
      std::string value;
      if (k < html.size() && html[k] == '=') {
        ++k;
        if (html[k] == '"' || html[k] == '\'') {
          const size_t close = html.find(html[k], k + 1);
          value = decode_entities(html.substr(k + 1, close - k - 1));
          k = close + 1;
        } else {
          size_t e = k;
          while (e < html.size() && !std::isspace(static_cast<unsigned char>(html[e])) &&
                 html[e] != '>')
            ++e;
          value = decode_entities(html.substr(k, e - k));
          k = e;
        }
      }
      node->attrs.emplace(attr, value);
      j = k;
    }
    i = j + 1;
    Node* raw = node.get();
    open.back()->children.push_back(std::move(node));
    if (std::find(kRawText.begin(), kRawText.end(), raw->name) != kRawText.end()) {
      const std::string close = "</" + raw->name;
      size_t end = i;
      while (end < html.size() && lower(std::string(html.substr(end, close.size()))) != close) {
        end = html.find('<', end + 1);
        if (end == std::string_view::npos) end = html.size();
      }
      auto t = std::make_unique<Node>();
      t->text = std::string(html.substr(i, end - i));
      raw->children.push_back(std::move(t));
      const size_t gt = html.find('>', end);
      i = gt == std::string_view::npos ? html.size() : gt + 1;
      continue;
    }
    if (!self_closing && std::find(kVoid.begin(), kVoid.end(), raw->name) == kVoid.end())
      open.push_back(raw);
  }
  return root;
}

// A compound selector: tag, #id, .class, [attr], [attr="value"] (no spaces inside).
struct Compound {
  std::string tag;
  std::vector<std::string> classes;
  std::vector<std::pair<std::string, std::optional<std::string>>> attrs;

  bool matches(const Node& n) const {
    if (n.name.empty()) return false;
    if (!tag.empty() && n.name != tag) return false;
    for (const auto& c : classes)
      if (!n.has_class(c)) return false;
    for (const auto& [name, value] : attrs) {
      if (!n.has_attr(name)) return false;
      if (value && n.attr(name) != *value) return false;
    }
    return true;
  }
};

Compound parse_compound(std::string_view s) {
  Compound c;
  size_t i = 0;
  auto word = [&](size_t from) {
    size_t e = from;
    while (e < s.size() && s[e] != '.' && s[e] != '#' && s[e] != '[') ++e;
    return e;
  };
  size_t e = word(0);
  c.tag = std::string(s.substr(0, e));
  i = e;
  while (i < s.size()) {
    if (s[i] == '.' || s[i] == '#') {
      e = word(i + 1);
      if (s[i] == '.')
        c.classes.emplace_back(s.substr(i + 1, e - i - 1));
      else
        c.attrs.emplace_back("id", std::string(s.substr(i + 1, e - i - 1)));
      i = e;
    } else {  // [name] or [name="value"]
      const size_t close = s.find(']', i);
      const std::string_view inside = s.substr(i + 1, close - i - 1);
      const size_t eq = inside.find('=');
      if (eq == std::string_view::npos) {
        c.attrs.emplace_back(std::string(inside), std::nullopt);
      } else {
        std::string_view v = inside.substr(eq + 1);
        if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
        c.attrs.emplace_back(std::string(inside.substr(0, eq)), std::string(v));
      }
      i = close + 1;
    }
  }
  return c;
}

void descendants(const Node& n, const Compound& c, std::vector<const Node*>& out) {
  for (const auto& child : n.children) {
    if (c.matches(*child)) out.push_back(child.get());
    descendants(*child, c, out);
  }
}

// Elements matching a descendant selector ("#scalars .chart[data-tag=\"loss\"] canvas").
std::vector<const Node*> query_all(const Node& root, std::string_view selector) {
  std::vector<Compound> parts;
  std::istringstream words{std::string(selector)};
  std::string word;
  while (words >> word) parts.push_back(parse_compound(word));
  std::vector<const Node*> current = {&root};
  for (const Compound& part : parts) {
    std::vector<const Node*> next;
    for (const Node* n : current) descendants(*n, part, next);
    std::vector<const Node*> unique;
    for (const Node* n : next)
      if (std::find(unique.begin(), unique.end(), n) == unique.end()) unique.push_back(n);
    current = std::move(unique);
  }
  return current;
}

const Node* query(const Node& root, std::string_view selector) {
  auto all = query_all(root, selector);
  return all.empty() ? nullptr : all.front();
}

// ---- Running Chromium ----------------------------------------------------------------------

struct ChromiumRun {
  bool timed_out = false;
  int exit_code = -1;
  std::string out;
  std::string err;
  double seconds = 0;

  // The page's console lines (Chromium's own noise left out): shown when a test fails.
  std::string console() const {
    std::istringstream lines(err);
    std::string line, result;
    while (std::getline(lines, line))
      if (line.find(":CONSOLE") != std::string::npos) result += line + "\n";
    return result;
  }
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class Chromium {
 public:
  explicit Chromium(fs::path work) : work_(std::move(work)) {}

  // Loads `url` with a fresh profile and returns what Chromium printed; `mode` is
  // "--dump-dom" or "--screenshot=<png>".
  ChromiumRun run(const std::string& url, const std::string& mode) {
    const int n = runs_++;
    const fs::path profile = work_ / ("profile" + std::to_string(n));
    const fs::path out = work_ / ("chromium" + std::to_string(n) + ".out");
    const fs::path err = work_ / ("chromium" + std::to_string(n) + ".err");
    fs::create_directories(profile);
    std::vector<std::string> args = {kChromium,
                                     "--headless",
                                     "--no-sandbox",
                                     "--disable-gpu",
                                     "--disable-quic",
                                     "--no-first-run",
                                     "--disable-background-networking",
                                     "--disable-component-update",
                                     "--disable-sync",
                                     "--user-data-dir=" + profile.string(),
                                     "--virtual-time-budget=15000",
                                     "--window-size=1400,1000",
                                     "--enable-logging=stderr",
                                     "--v=0",
                                     mode,
                                     url};
    // Everything the child needs is built before fork(): it only calls async-signal-safe
    // functions (the parent has threads: the board server's).
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string out_path = out.string(), err_path = err.string();

    const auto start = std::chrono::steady_clock::now();
    const pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);  // its own process group, so that its helpers are killed with it
      const int in_fd = open("/dev/null", O_RDONLY);
      const int out_fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (in_fd < 0 || out_fd < 0 || err_fd < 0) _exit(126);
      dup2(in_fd, 0);
      dup2(out_fd, 1);
      dup2(err_fd, 2);
      execv(argv[0], argv.data());
      _exit(127);
    }
    ChromiumRun result;
    if (pid < 0) {
      result.err = "fork failed";
      return result;
    }
    setpgid(pid, pid);  // also from here: no race with the child's own call
    int status = 0;
    while (true) {
      const pid_t done = waitpid(pid, &status, WNOHANG);
      if (done == pid) break;
      if (std::chrono::steady_clock::now() - start > kChromiumTimeout) {
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
        result.timed_out = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!result.timed_out && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    result.out = read_file(out);
    result.err = read_file(err);
    std::error_code ec;
    fs::remove_all(profile, ec);
    return result;
  }

 private:
  fs::path work_;
  int runs_ = 0;
};

// ---- Fixture ---------------------------------------------------------------------------------

class BoardBrowserTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::random_device rd;
    work_ = new fs::path(fs::temp_directory_path() /
                         ("trainhooks_board_browser_test_" + std::to_string(::getpid()) + "_" +
                          std::to_string(rd())));
    fs::create_directories(*work_ / "logs");
    testing::write_test_logdir(*work_ / "logs");
    fs::copy(*work_ / "logs", *work_ / "features", fs::copy_options::recursive);
    testing::write_feature_runs(*work_ / "features");
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*work_, ec);
    delete work_;
    work_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kChromium))
        << kChromium << " is missing: the browser tests need Chromium; run scripts/install-deps.sh";
  }

  static fs::path logdir() { return *work_ / "logs"; }
  // The test log directory and the runs of write_feature_runs().
  static fs::path features_logdir() { return *work_ / "features"; }
  static fs::path work() { return *work_; }

  // Loads `url`, checks that Chromium ended in time and printed a document, and parses it.
  static std::unique_ptr<Node> dump_dom(Chromium& chromium, const std::string& url,
                                        ChromiumRun* run_out = nullptr) {
    ChromiumRun run = chromium.run(url, "--dump-dom");
    EXPECT_FALSE(run.timed_out) << "Chromium did not finish within 60 s loading " << url;
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_NE(run.out.find("<body"), std::string::npos) << "no document dumped; stderr:\n"
                                                        << run.err;
    EXPECT_EQ(run.console().find("Uncaught"), std::string::npos) << run.console();
    auto dom = parse_html(run.out);
    if (run_out) *run_out = std::move(run);
    return dom;
  }

  static void screenshot(Chromium& chromium, const std::string& url, const fs::path& png) {
    std::error_code ec;
    fs::remove(png, ec);
    const ChromiumRun run = chromium.run(url, "--screenshot=" + png.string());
    EXPECT_FALSE(run.timed_out) << "Chromium did not finish within 60 s taking " << png;
    ASSERT_TRUE(fs::exists(png)) << run.err;
    const std::string bytes = read_file(png);
    EXPECT_EQ(bytes.substr(0, 8), "\x89PNG\r\n\x1a\n");
    EXPECT_GT(bytes.size(), 20000u) << png << " looks empty";
  }

  static inline fs::path* work_ = nullptr;
};

std::string message_of(const Node& dom) {
  const Node* message = query(dom, "#message");
  return message ? message->text_content() : "(no #message)";
}

// What a user sees of the test log directory, live or in the report.
void expect_board_shows_the_test_logdir(const Node& dom, bool report) {
  const Node* body = query(dom, "body");
  ASSERT_NE(body, nullptr);
  ASSERT_EQ(body->attr("data-state"), "ready") << "message: " << message_of(dom);

  for (const char* run : {"eval", "train"}) {
    SCOPED_TRACE(run);
    const auto entries = query_all(dom, std::string("#runs [data-run=\"") + run + "\"]");
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_NE(query(*entries[0], "input[type=\"checkbox\"]"), nullptr);
    EXPECT_NE(query(*entries[0], ".swatch"), nullptr);
    EXPECT_NE(entries[0]->text_content().find(run), std::string::npos);
  }

  for (const char* tag : {"loss", "accuracy"}) {
    SCOPED_TRACE(tag);
    const auto charts = query_all(dom, std::string("#scalars .chart[data-tag=\"") + tag + "\"]");
    ASSERT_EQ(charts.size(), 1u);
    EXPECT_NE(query(*charts[0], "canvas"), nullptr);
    // Both runs overlaid; the legend shows each run's latest point.
    for (const char* run : {"eval", "train"}) {
      const Node* row = query(*charts[0], std::string("tr[data-run=\"") + run + "\"]");
      ASSERT_NE(row, nullptr) << run;
      const auto cells = query_all(*row, "td");
      ASSERT_GE(cells.size(), 4u);
      EXPECT_EQ(cells[3]->text_content(), std::to_string(testing::kSteps)) << run;
    }
  }

  const Node* histogram = query(dom, "#histograms .chart[data-tag=\"weights\"]");
  ASSERT_NE(histogram, nullptr);
  EXPECT_NE(query(*histogram, "[data-run=\"train\"] canvas"), nullptr);

  const auto image_cards =
      query_all(dom, std::string("#images .image-card[data-run=\"train\"][data-tag=\"") +
                         testing::kImageTag + "\"]");
  ASSERT_EQ(image_cards.size(), 1u);
  EXPECT_NE(query(*image_cards[0], "img[data-loaded=\"1\"]"), nullptr) << "the image did not load";
  EXPECT_NE(query(*image_cards[0], "input[type=\"range\"]"), nullptr);
  EXPECT_NE(image_cards[0]->text_content().find("step 100"), std::string::npos)
      << image_cards[0]->text_content();

  const auto text_cards =
      query_all(dom, "#text .text-card[data-run=\"train\"][data-tag=\"notes\"]");
  ASSERT_EQ(text_cards.size(), 1u);
  EXPECT_NE(text_cards[0]->text_content().find(testing::kLastNote), std::string::npos)
      << text_cards[0]->text_content();
  EXPECT_EQ(query(*text_cards[0], "b"), nullptr) << "the note's markup was not escaped";

  const Node* refresh = query(dom, "#refresh");
  ASSERT_NE(refresh, nullptr);
  EXPECT_NE(refresh->text_content().find(report ? "report generated" : "updated"),
            std::string::npos)
      << refresh->text_content();
  for (const char* control : {"#smoothing", "#log-scale", "#x-axis"})
    EXPECT_NE(query(dom, control), nullptr) << control;
}

TEST_F(BoardBrowserTest, LiveBoardShowsEveryKindOfSummary) {
  BoardServer server(logdir(), {.host = "127.0.0.1", .port = 0});
  server.start();
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/";
  Chromium chromium(work());

  ChromiumRun run;
  const auto dom = dump_dom(chromium, url, &run);
  expect_board_shows_the_test_logdir(*dom, /*report=*/false);
  std::cout << "[ board    ] the live page loaded in Chromium in " << run.seconds << " s\n";

  screenshot(chromium, url, fs::path(TRAINHOOKS_BINARY_DIR) / "board_screenshot.png");
  server.stop();
}

TEST_F(BoardBrowserTest, ReportShowsEveryKindOfSummaryWithoutAServer) {
  const fs::path report = work() / "report.html";
  write_report(logdir(), report, {.title = "browser-test"});
  const std::string url = "file://" + fs::absolute(report).string();
  Chromium chromium(work());

  const auto dom = dump_dom(chromium, url);
  expect_board_shows_the_test_logdir(*dom, /*report=*/true);
  const Node* title = query(*dom, "#title");
  ASSERT_NE(title, nullptr);
  EXPECT_EQ(title->text_content(), "browser-test");

  screenshot(chromium, url, fs::path(TRAINHOOKS_BINARY_DIR) / "board_report_screenshot.png");
}

// ---- The page against a server of the test's own ----------------------------------------------

// Serves the page's files and answers /api/* with `api`, recording every request target.
class PageServer {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  // `files`: path -> {content type, body}, served instead of the page's own.
  explicit PageServer(Handler api,
                      std::map<std::string, std::pair<std::string, std::string>> files = {})
      : api_(std::move(api)), files_(std::move(files)) {
    http_.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard lock(mu_);
        targets_.push_back(req.target);
      }
      if (req.path.starts_with("/api/")) return api_(req, res);
      if (const auto it = files_.find(req.path); it != files_.end()) {
        res.set_content(it->second.second, it->second.first);
      } else if (const Asset* asset = find_asset(req.path)) {
        res.set_content(std::string(asset->data), std::string(asset->content_type));
      } else {
        res.status = 404;
      }
    });
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
  }
  ~PageServer() {
    http_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/"; }
  std::vector<std::string> targets() const {
    std::lock_guard lock(mu_);
    return targets_;
  }

 private:
  Handler api_;
  std::map<std::string, std::pair<std::string, std::string>> files_;
  httplib::Server http_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<std::string> targets_;
};

TEST_F(BoardBrowserTest, FailingApiShowsTheErrorInsteadOfCharts) {
  PageServer server([](const httplib::Request&, httplib::Response& res) {
    res.status = 500;
    res.set_content(R"({"error": "reading the log directory failed"})", "application/json");
  });
  Chromium chromium(work());
  const auto dom = dump_dom(chromium, server.url());
  const Node* body = query(*dom, "body");
  ASSERT_NE(body, nullptr);
  EXPECT_EQ(body->attr("data-state"), "error");
  const Node* message = query(*dom, "#message");
  ASSERT_NE(message, nullptr);
  EXPECT_FALSE(message->has_attr("hidden"));
  EXPECT_NE(message->text_content().find("reading the log directory failed"), std::string::npos)
      << message->text_content();
  EXPECT_TRUE(query_all(*dom, "#scalars .chart").empty());
}

TEST_F(BoardBrowserTest, RefreshRequestsOnlyTheSeriesThatGrew) {
  // A copy of the test log directory, so that appending does not disturb the other tests.
  const fs::path dir = work() / "growing";
  fs::remove_all(dir);
  fs::copy(logdir(), dir, fs::copy_options::recursive);
  LogdirIndex index(dir);
  index.refresh();
  BoardApi api(index);
  std::mutex mu;
  int runs_requests = 0;
  PageServer server([&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu);
    if (req.path == "/api/runs" && ++runs_requests == 2) {
      // Training went on: ten more loss points in "train", nothing else.
      auto clock = std::make_shared<FakeClock>(testing::test_wall_time(testing::kSteps + 1));
      summary::EventWriter writer(dir / "train", {.env = {.clock = clock}});
      for (int64_t step = testing::kSteps + 1; step <= testing::kSteps + 10; ++step) {
        clock->set_wall_seconds(testing::test_wall_time(step));
        writer.add_scalar("loss", testing::test_loss(step, 0), step);
      }
      writer.close();
      index.refresh();
    }
    std::map<std::string, std::string> query;
    for (const auto& [name, value] : req.params) query.emplace(name, value);
    const ApiResponse r = api.handle(req.path, query);
    res.status = r.status;
    res.set_content(r.body, r.content_type);
  });
  Chromium chromium(work());
  const auto dom = dump_dom(chromium, server.url());
  const Node* body = query(*dom, "body");
  ASSERT_NE(body, nullptr);
  ASSERT_EQ(body->attr("data-state"), "ready") << message_of(*dom);

  // The requests that followed the second /api/runs, up to the next one.
  const auto targets = server.targets();
  std::vector<std::string> after_second;
  int seen = 0;
  for (const std::string& t : targets) {
    if (t == "/api/runs") {
      ++seen;
      continue;
    }
    if (seen == 2) after_second.push_back(t);
  }
  ASSERT_GE(seen, 2) << "the page did not refresh";
  EXPECT_EQ(after_second, std::vector<std::string>{"/api/scalars?run=train&tag=loss"});

  // The chart shows the new points.
  const Node* row = query(*dom, "#scalars .chart[data-tag=\"loss\"] tr[data-run=\"train\"]");
  ASSERT_NE(row, nullptr);
  const auto cells = query_all(*row, "td");
  ASSERT_GE(cells.size(), 4u);
  EXPECT_EQ(cells[3]->text_content(), std::to_string(testing::kSteps + 10));
}

// ---- What a user does with the views ---------------------------------------------------------

// The beginning of each driver script (kDriver, kViewsDriver): what it finds, and waits bounded
// in the page's virtual time.
constexpr const char* kDriverStart = R"js(
const results = {};
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const $ = (selector, root = document) => root.querySelector(selector);
const $$ = (selector, root = document) => [...root.querySelectorAll(selector)];
async function until(test, what) {
  for (let i = 0; i < 100; i++) {
    if (test()) return;
    await sleep(50);
  }
  throw new Error(`gave up waiting for ${what}`);
}
)js";

// The end of each driver script: runs its drive() and writes what it found,
// or its error, into the page as #driver-results (ASCII only, so that the dump's text reads back
// byte for byte).
constexpr const char* kDriverFinish = R"js(
drive().then(() => {
  results.done = true;
}, (e) => {
  results.error = String((e && e.stack) || e);
}).finally(() => {
  results.pwned = window.__pwned === undefined ? null : String(window.__pwned);
  const pre = document.createElement("pre");
  pre.id = "driver-results";
  pre.textContent = JSON.stringify(results).replace(/[\u007f-\uffff]/g,
      (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  document.body.append(pre);
});
)js";

// A script run in the page after the board's own, acting as a user would: it waits until the
// board is ready, then types in the filters, folds a group, ticks "Ignore outliers", fetches a
// download link, enlarges a chart, moves the images' sliders, and writes what it saw, as JSON,
// into <pre id="driver-results"> for the DOM dump. Every wait is bounded (in the page's virtual
// time); a failure is written there too.
const std::string kDriver = kDriverStart + std::string(R"js(
function type(id, value) {
  const input = document.getElementById(id);
  input.value = value;
  input.dispatchEvent(new Event("input"));
}
const chart = (tag) => $$("#scalars .chart").find((n) => n.dataset.tag === tag);
const group = (section, name) => $$(`#${section} > .tag-group`).find((g) => g.dataset.group === name);
const yRange = (tag) => $(".plot", chart(tag)).getAttribute("data-y-range").split(" ").map(Number);
const shownGroups = () => $$("#scalars > .tag-group").filter((g) => !g.hidden).map((g) => ({
  name: g.dataset.group,
  count: $(".count", g).textContent,
  tags: $$(".chart", g).filter((c) => !c.classList.contains("is-hidden")).map((c) => c.dataset.tag),
}));
const size = (node) => {
  const r = node.getBoundingClientRect();
  return {width: r.width, height: r.height};
};

async function drive() {
  await until(() => document.body.dataset.state === "ready", "the board to be ready");
  results.groups = shownGroups();

  type("tag-filter", "^train/");
  results.filtered = shownGroups();
  type("tag-filter", "");

  const train = group("scalars", "train");
  $(".group-toggle", train).click();
  results.folded = {
    expanded: $(".group-toggle", train).getAttribute("aria-expanded"),
    gridHidden: $(".grid", train).hidden,
    gridDisplay: getComputedStyle($(".grid", train)).display,
    saved: JSON.parse(localStorage.getItem("trainhooks.board.settings")).collapsed,
  };
  $(".group-toggle", train).click();
  results.unfolded = !$(".grid", train).hidden;

  results.ranges = {zero: yRange("flat/zero"), constant: yRange("flat/const"),
                    spiky: yRange("spiky")};
  $("#ignore-outliers").click();
  await sleep(0);  // uPlot redraws in a microtask
  results.ranges.spikyIgnoringOutliers = yRange("spiky");
  $("#ignore-outliers").click();

  const link = $$("a[data-format=csv]", chart("train/loss"))
                   .find((a) => a.closest(".download").dataset.run === "lab");
  const response = await fetch(link.href);
  results.csv = {
    download: link.getAttribute("download"),
    status: response.status,
    type: response.headers.get("content-type"),
    disposition: response.headers.get("content-disposition"),
    body: await response.text(),
  };

  const card = chart("train/loss");
  const before = {card: size(card), canvas: size($("canvas", card))};
  $(".enlarge", card).click();
  await sleep(100);
  results.enlarge = {
    before,
    after: {card: size(card), canvas: size($("canvas", card))},
    pressed: $(".enlarge", card).getAttribute("aria-pressed"),
  };
  $(".enlarge", card).click();

  const img = $("#images img");
  results.imageFilter = {before: getComputedStyle(img).filter};
  type("image-brightness", "1.5");
  type("image-contrast", "2");
  results.imageFilter.after = getComputedStyle(img).filter;

  const note = $$("#text .text-card").find((c) => c.dataset.tag === "notes/md");
  results.markdown = {
    elements: [...new Set($$("*", $(".text-body", note)).map((n) => n.localName))].sort(),
    links: $$("a", note).map((a) => a.getAttribute("href")),
    text: $(".text-body", note).textContent,
  };

  results.colors = Object.fromEntries(
      $$("#runs .run").map((n) => [n.dataset.run, $(".swatch", n).style.background]));

  type("run-filter", "^lab$");
  results.runFilter = {
    listed: $$("#runs .run").filter((n) => !n.hidden).map((n) => n.dataset.run),
    lossHidden: chart("loss").classList.contains("is-hidden"),
    trainLossRuns: $$("tr[data-run]", chart("train/loss")).map((r) => r.dataset.run),
  };
  type("run-filter", "");
}

)js") + kDriverFinish;

struct DriverRun {
  nlohmann::json results;
  std::unique_ptr<Node> dom;
};

// The page with kDriver run after the board's modules.
std::string with_driver(std::string html, std::string_view script_tag) {
  const size_t at = html.rfind("</body>");
  html.insert(at, std::string(script_tag) + "\n");
  return html;
}

DriverRun read_driver(std::unique_ptr<Node> dom) {
  DriverRun run;
  const Node* pre = query(*dom, "#driver-results");
  EXPECT_NE(pre, nullptr) << "the driver did not finish; message: " << message_of(*dom);
  run.results = pre ? nlohmann::json::parse(pre->text_content(), nullptr, false) : nlohmann::json();
  EXPECT_FALSE(run.results.is_discarded());
  EXPECT_FALSE(run.results.contains("error")) << run.results.value("error", "");
  run.dom = std::move(dom);
  return run;
}

// Fixtures whose tests read what a driver script found on the live page and on the report.
class BoardDriverTest : public BoardBrowserTest {
 protected:
  // `driver` run on the live page over `logdir`, served by a server that answers the API as
  // BoardServer does.
  static DriverRun drive_live(const fs::path& logdir, const std::string& driver) {
    LogdirIndex index(logdir);
    index.refresh();
    const BoardApi api(index);
    PageServer server(
        [&](const httplib::Request& req, httplib::Response& res) {
          std::map<std::string, std::string> query;
          for (const auto& [name, value] : req.params) query.emplace(name, value);
          const ApiResponse r = api.handle(req.path, query);
          res.status = r.status;
          res.set_content(r.body, r.content_type);
          if (!r.content_disposition.empty()) {
            res.set_header("Content-Disposition", r.content_disposition);
          }
        },
        {{"/",
          {"text/html; charset=utf-8",
           with_driver(std::string(find_asset("/")->data),
                       R"(<script type="module" src="driver.js"></script>)")}},
         {"/driver.js", {"text/javascript; charset=utf-8", driver}}});
    Chromium chromium(work());
    return read_driver(dump_dom(chromium, server.url()));
  }

  // `driver` run on the report of `logdir`, opened from disk.
  static DriverRun drive_report(const fs::path& logdir, const std::string& title,
                                const std::string& driver) {
    LogdirIndex index(logdir);
    index.refresh();
    const fs::path file = work() / (title + "_report.html");
    std::ofstream(file) << with_driver(render_report(index, {.title = title}),
                                       "<script type=\"module\">" + driver + "</script>");
    Chromium chromium(work());
    return read_driver(dump_dom(chromium, "file://" + file.string()));
  }
};

class BoardViewsTest : public BoardDriverTest {
 protected:
  static void TearDownTestSuite() {
    delete live_;
    live_ = nullptr;
    delete report_;
    report_ = nullptr;
    BoardDriverTest::TearDownTestSuite();
  }

  // The driver on the live page over features_logdir() and on its report (once per test program).
  static const DriverRun& live() {
    if (live_ == nullptr) live_ = new DriverRun(drive_live(features_logdir(), kDriver));
    return *live_;
  }
  static const DriverRun& report() {
    if (report_ == nullptr)
      report_ = new DriverRun(drive_report(features_logdir(), "features", kDriver));
    return *report_;
  }

  // The API's own CSV of lab's train/loss.
  static std::string api_csv() {
    LogdirIndex index(features_logdir());
    index.refresh();
    return BoardApi(index)
        .handle("/api/scalars", {{"run", "lab"}, {"tag", "train/loss"}, {"format", "csv"}})
        .body;
  }

  static inline DriverRun* live_ = nullptr;
  static inline DriverRun* report_ = nullptr;
};

using nlohmann::json;

json group(const std::string& name, const std::string& count, std::vector<std::string> tags) {
  return {{"name", name}, {"count", count}, {"tags", tags}};
}

TEST_F(BoardViewsTest, TagsAreGroupedByPrefixInFoldingGroupsThatTheFilterApplies) {
  for (const DriverRun* run : {&live(), &report()}) {
    const json& r = run->results;
    ASSERT_TRUE(r.value("done", false)) << r.dump();
    // Tags without '/' are groups of their own, as in TensorBoard; the hostile tag's group is
    // its text up to the '/' of "</script>".
    EXPECT_EQ(r["groups"],
              json::array({group("<script>window.__pwned='tag'<", "1", {testing::kHostileTag}),
                           group("accuracy", "1", {"accuracy"}), group("eval", "1", {"eval/acc"}),
                           group("flat", "2", {"flat/const", "flat/zero"}),
                           group("loss", "1", {"loss"}), group("spiky", "1", {"spiky"}),
                           group("train", "2", {"train/acc", "train/loss"})}))
        << r["groups"].dump(1);
    EXPECT_EQ(r["filtered"], json::array({group("train", "2", {"train/acc", "train/loss"})}));
    EXPECT_EQ(r["folded"]["expanded"], "false");
    EXPECT_EQ(r["folded"]["gridHidden"], true);
    EXPECT_EQ(r["folded"]["gridDisplay"], "none") << "a folded group's cards are not drawn";
    EXPECT_EQ(r["folded"]["saved"], json::array({std::string("scalars\0train", 13)}));
    EXPECT_EQ(r["unfolded"], true);
  }
}

TEST_F(BoardViewsTest, AConstantSeriesIsDrawnInABandAroundItsValue) {
  for (const DriverRun* run : {&live(), &report()}) {
    const json& ranges = run->results["ranges"];
    ASSERT_TRUE(ranges.is_object()) << run->results.dump();
    const double zero_lo = ranges["zero"][0], zero_hi = ranges["zero"][1];
    EXPECT_LT(zero_lo, 0);
    EXPECT_GT(zero_hi, 0);
    EXPECT_LE(zero_hi - zero_lo, 2.0) << "not a 0 to 100 axis";
    const double lo = ranges["constant"][0], hi = ranges["constant"][1];
    EXPECT_LT(lo, 3.5);
    EXPECT_GT(hi, 3.5);
    EXPECT_NEAR(hi - lo, 0.7, 1e-9) << "3.5 ± 10 %";
  }
}

TEST_F(BoardViewsTest, IgnoringOutliersScalesToTheFifthToNinetyFifthPercentile) {
  for (const DriverRun* run : {&live(), &report()}) {
    const json& ranges = run->results["ranges"];
    ASSERT_TRUE(ranges.is_object()) << run->results.dump();
    EXPECT_GE(ranges["spiky"][1].get<double>(), 1000);
    EXPECT_LT(ranges["spikyIgnoringOutliers"][1].get<double>(), 1.1);
    EXPECT_GT(ranges["spikyIgnoringOutliers"][0].get<double>(), 0.9);
  }
}

TEST_F(BoardViewsTest, TheCsvDownloadIsTensorBoardsCsvOfEveryPoint) {
  const std::string expected = api_csv();
  ASSERT_TRUE(
      expected.starts_with("Wall time,Step,Value\r\n1700000036,1,1\r\n1700000072,2,0.5\r\n"))
      << expected.substr(0, 80);
  EXPECT_EQ(std::count(expected.begin(), expected.end(), '\n'), testing::kSteps + 1);
  const json& live_csv = live().results["csv"];
  EXPECT_EQ(live_csv["status"], 200);
  EXPECT_EQ(live_csv["type"], "text/csv; charset=utf-8");
  EXPECT_EQ(live_csv["download"], "run-lab-tag-train_loss.csv");
  EXPECT_EQ(live_csv["disposition"],
            "attachment; filename=\"run-lab-tag-train_loss.csv\"; "
            "filename*=UTF-8''run-lab-tag-train_loss.csv");
  EXPECT_EQ(live_csv["body"], expected);
  // The report has no server: the page writes the same file from the points it holds.
  const json& report_csv = report().results["csv"];
  EXPECT_EQ(report_csv["download"], "run-lab-tag-train_loss.csv");
  EXPECT_EQ(report_csv["type"], "text/csv");
  EXPECT_EQ(report_csv["body"], expected);
}

TEST_F(BoardViewsTest, EnlargingAChartWidensItToTheGridAndDrawsItTaller) {
  const json& e = live().results["enlarge"];
  ASSERT_TRUE(e.is_object()) << live().results.dump();
  EXPECT_EQ(e["pressed"], "true");
  EXPECT_GT(e["after"]["card"]["width"].get<double>(),
            1.5 * e["before"]["card"]["width"].get<double>());
  EXPECT_GT(e["after"]["canvas"]["height"].get<double>(),
            1.5 * e["before"]["canvas"]["height"].get<double>());
}

TEST_F(BoardViewsTest, TheRunsFilterIsARegularExpression) {
  const json& f = live().results["runFilter"];
  EXPECT_EQ(f["listed"], json::array({"lab"}));
  EXPECT_EQ(f["lossHidden"], true) << "no run of 'loss' matches";
  EXPECT_EQ(f["trainLossRuns"], json::array({"lab"}));
}

TEST_F(BoardViewsTest, BrightnessAndContrastSetTheImagesFilter) {
  const json& f = live().results["imageFilter"];
  EXPECT_EQ(f["before"], "brightness(1) contrast(1)");
  EXPECT_EQ(f["after"], "brightness(1.5) contrast(2)");
}

TEST_F(BoardViewsTest, RunColoursDependOnTheirNamesOnly) {
  // The test log directory alone, where "eval" is the first run and "train" the second; in the
  // features one "<img ...>" and "lab" come before or between them.
  BoardServer server(logdir(), {.host = "127.0.0.1", .port = 0});
  server.start();
  Chromium chromium(work());
  const auto dom = dump_dom(chromium, "http://127.0.0.1:" + std::to_string(server.port()) + "/");
  const json& colors = live().results["colors"];
  for (const char* run : {"eval", "train"}) {
    SCOPED_TRACE(run);
    const Node* swatch = query(*dom, std::string("#runs [data-run=\"") + run + "\"] .swatch");
    ASSERT_NE(swatch, nullptr);
    EXPECT_THAT(swatch->attr("style"), ::testing::HasSubstr(colors.value(run, "?")));
  }
  EXPECT_NE(colors.value("eval", ""), colors.value("train", ""));
}

// Text, run and tag names with markup: Markdown's elements only, the rest as text, nothing run.
void expect_markdown_and_no_markup(const DriverRun& run) {
  const json& md = run.results["markdown"];
  ASSERT_TRUE(md.is_object()) << run.results.dump();
  EXPECT_EQ(md["elements"],
            json::array({"a", "code", "div", "em", "h1", "li", "p", "strong", "ul"}));
  EXPECT_EQ(md["links"], json::array({"https://example.com/"}));
  const std::string text = md["text"];
  for (const char* shown : {"<script>window.__pwned = 'script'</script>",
                            "<img src=x onerror=\"window.__pwned = 'img'\">",
                            "[a link](javascript:window.__pwned='link')"}) {
    EXPECT_NE(text.find(shown), std::string::npos) << shown << " in " << text;
  }
  EXPECT_TRUE(run.results["pwned"].is_null()) << run.results["pwned"];
  // Nowhere in the page: no element from the logs' markup.
  EXPECT_EQ(query(*run.dom, "#text script"), nullptr);
  EXPECT_EQ(query(*run.dom, "#text img"), nullptr);
  EXPECT_EQ(query(*run.dom, "#runs img"), nullptr);
  EXPECT_EQ(query(*run.dom, "#scalars script"), nullptr);
  const auto runs = query_all(*run.dom, "#runs .run");
  EXPECT_TRUE(std::any_of(runs.begin(), runs.end(), [](const Node* n) {
    return n->attr("data-run") == testing::kHostileRun &&
           n->text_content().find(testing::kHostileRun) != std::string::npos;
  }));
  const auto groups = query_all(*run.dom, "#scalars .tag-group .group-name");
  EXPECT_TRUE(std::any_of(groups.begin(), groups.end(), [](const Node* n) {
    return n->text_content() == "<script>window.__pwned='tag'<";
  }));
}

TEST_F(BoardViewsTest, TextIsMarkdownAndNothingFromTheLogsRunsLive) {
  expect_markdown_and_no_markup(live());
}

TEST_F(BoardViewsTest, TextIsMarkdownAndNothingFromTheLogsRunsInTheReport) {
  expect_markdown_and_no_markup(report());
}

// ---- The graph and the hyperparameters ------------------------------------------------------

// As kDriver, on the log directory of write_view_runs(): reads the drawn graph, clicks a node and
// the node named like markup, reads the HParams table, sorts it by two columns and reads the plot.
const std::string kViewsDriver = kDriverStart + std::string(R"js(
const nodes = () => $$("#graph .graph-node");
const click = (node) => node.dispatchEvent(new MouseEvent("click", {bubbles: true}));
const details = () => Object.fromEntries(
    $$("#graph .graph-table tr").map((tr) => [tr.dataset.key, $("td", tr).textContent]));
const table = () => ({
  head: $$("#hparams thead th").map((th) => th.textContent),
  sort: $$("#hparams thead th").map((th) => th.getAttribute("aria-sort")),
  rows: $$("#hparams tbody tr").map((tr) => $$("td", tr).map((td) => td.textContent)),
});
const header = (text) => $("button", $$("#hparams thead th").find((th) => th.textContent === text));

async function drive() {
  await until(() => document.body.dataset.state === "ready", "the board to be ready");
  await until(() => nodes().length > 0, "the graph to be drawn");
  results.graph = {
    runs: $$("#graph-run option").map((o) => o.value),
    nodes: nodes().map((n) => n.dataset.node).sort(),
    edges: $$("#graph .graph-edge").length,
    summary: $("#graph .graph-summary").textContent,
    count: $('[data-count="graph"]').textContent,
  };
  click(nodes().find((n) => n.dataset.node === "logits"));
  results.logits = {details: details(), selected: $$("#graph .graph-node.is-selected").map(
      (n) => n.dataset.node), near: $$("#graph .graph-edge.is-near").length};
  click(nodes().find((n) => n.dataset.node.startsWith("<img")));
  results.hostile = {details: details(), heading: $("#graph .graph-node-name").textContent};

  await until(() => $$("#hparams tbody tr").length > 0, "the hyperparameters");
  results.hparams = table();
  results.plot = {
    points: $("#hparams .hparams-plot").dataset.points,
    x: $("#hparams .hparams-plot").dataset.x,
    y: $("#hparams .hparams-plot").dataset.y,
    canvas: !!$("#hparams .hparams-plot canvas"),
  };
  header("lr").click();
  results.byLr = table();
  header("lr").click();
  results.byLrDescending = table();
  header("test accuracy").click();
  results.byAccuracy = table();
}

)js") + kDriverFinish;

class GraphHParamsViewsTest : public BoardDriverTest {
 protected:
  static void TearDownTestSuite() {
    delete live_;
    live_ = nullptr;
    delete report_;
    report_ = nullptr;
    BoardDriverTest::TearDownTestSuite();
  }

  static fs::path views_logdir() {
    const fs::path dir = work() / "views";
    if (!fs::exists(dir)) testing::write_view_runs(dir);
    return dir;
  }

  // kViewsDriver on the live page over views_logdir() and on its report.
  static const DriverRun& live() {
    if (live_ == nullptr) live_ = new DriverRun(drive_live(views_logdir(), kViewsDriver));
    return *live_;
  }
  static const DriverRun& report() {
    if (report_ == nullptr)
      report_ = new DriverRun(drive_report(views_logdir(), "views", kViewsDriver));
    return *report_;
  }

  static inline DriverRun* live_ = nullptr;
  static inline DriverRun* report_ = nullptr;
};

TEST_F(GraphHParamsViewsTest, TheGraphIsDrawnWithANodePerGraphNodeAndAnArrowPerInput) {
  std::vector<std::string> expected = {"x",           "y",           "net/fc.weight",
                                       "net/fc.bias", "global_step", "logits",
                                       "loss",        "train",       testing::kHostileNode};
  std::sort(expected.begin(), expected.end());
  ASSERT_EQ(expected.size(), static_cast<size_t>(testing::kGraphNodes));
  for (const DriverRun* run : {&live(), &report()}) {
    const json& g = run->results["graph"];
    ASSERT_TRUE(run->results.value("done", false)) << run->results.dump();
    EXPECT_EQ(g["runs"], json::array({testing::kGraphRun}));
    EXPECT_EQ(g["nodes"], json(expected));
    EXPECT_EQ(g["edges"], testing::kGraphEdges);
    EXPECT_EQ(g["count"], "1");
    EXPECT_THAT(g["summary"].get<std::string>(), ::testing::StartsWith("9 nodes, 10 edges"));
    // In the DOM: one box per node, each with its name as text.
    const auto boxes = query_all(*run->dom, "#graph g.graph-node");
    EXPECT_EQ(boxes.size(), expected.size());
  }
}

TEST_F(GraphHParamsViewsTest, ClickingANodeShowsItsDetails) {
  for (const DriverRun* run : {&live(), &report()}) {
    const json& logits = run->results["logits"];
    ASSERT_TRUE(logits.is_object()) << run->results.dump();
    EXPECT_EQ(logits["selected"], json::array({"logits"}));
    EXPECT_EQ(logits["near"], 4) << "three inputs and one reader";
    EXPECT_EQ(logits["details"], json({{"name", "logits"},
                                       {"op", "CppFunc"},
                                       {"device", "/device:CPU:0"},
                                       {"dtype", "DT_FLOAT"},
                                       {"shape", "[[?, 10]]"},
                                       {"inputs", "xnet/fc.weightnet/fc.bias"},
                                       {"read by", "loss"},
                                       {"T", "DT_FLOAT"},
                                       {"_output_shapes", "[[?, 10]]"}}));
  }
}

TEST_F(GraphHParamsViewsTest, TheHParamsTableHasARowPerRunWithItsValuesAndFinalMetrics) {
  const std::string hostile = testing::kHostileValue;
  const json head = json::array({"Run", testing::kHostileHParam, "batch", "lr", "optimizer",
                                 "test accuracy", "loss", "Status"});
  const json adam = {"hp/adam", hostile, "64", "0.002", "adam", "0.875", "0.5", "success"};
  const json sgd = {"hp/sgd", hostile, "128", "0.05", "sgd", "0.8125", "0.25", "not ended"};
  const json slow = {"hp/sgd-slow", hostile, "32", "0.01", "sgd", "0.75", "1.5", "success"};
  for (const DriverRun* run : {&live(), &report()}) {
    const json& r = run->results;
    ASSERT_TRUE(r.value("done", false)) << r.dump();
    EXPECT_EQ(r["hparams"]["head"], head);
    EXPECT_EQ(r["hparams"]["rows"], json::array({adam, sgd, slow})) << "by run at first";
    EXPECT_EQ(r["hparams"]["sort"][0], "ascending");
    EXPECT_EQ(r["byLr"]["rows"], json::array({adam, slow, sgd}));
    EXPECT_EQ(r["byLr"]["sort"][3], "ascending");
    EXPECT_EQ(r["byLrDescending"]["rows"], json::array({sgd, slow, adam}));
    EXPECT_EQ(r["byLrDescending"]["sort"][3], "descending");
    EXPECT_EQ(r["byAccuracy"]["rows"], json::array({slow, sgd, adam}));
    // The scatter plot: the first metric against the first hyperparameter that differs between
    // the runs (the first one, kHostileHParam, is the same in all), a point per run.
    EXPECT_EQ(r["plot"],
              json({{"points", "3"}, {"x", "batch"}, {"y", "test accuracy"}, {"canvas", true}}));
  }
}

// A node, an op, a hyperparameter and a value named like markup: text, nothing run.
TEST_F(GraphHParamsViewsTest, NamesFromTheGraphAndTheHParamsAreTextNeverMarkup) {
  for (const DriverRun* run : {&live(), &report()}) {
    const json& r = run->results;
    ASSERT_TRUE(r.value("done", false)) << r.dump();
    EXPECT_TRUE(r["pwned"].is_null()) << r["pwned"];
    EXPECT_EQ(r["hostile"]["heading"], testing::kHostileNode);
    EXPECT_EQ(r["hostile"]["details"]["op"], testing::kHostileOp);
    EXPECT_EQ(r["hostile"]["details"][testing::kHostileHParam], testing::kHostileValue);
    for (const char* selector : {"#graph img", "#graph script", "#hparams img", "#hparams script",
                                 "#graph foreignobject"}) {
      EXPECT_EQ(query(*run->dom, selector), nullptr) << selector;
    }
  }
}

}  // namespace board_browser_test
}  // namespace trainhooks::board
