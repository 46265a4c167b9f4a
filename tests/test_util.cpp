#include "test_util.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "trainhooks/optimizers.h"

namespace trainhooks::testing {

TinyModel::TinyModel() {
  x = g.placeholder("x", {.dtype = at::kFloat, .shape = Shape::scalar()});
  w = g.variable("w", at::zeros({}, at::kFloat));
  const Node xn = x, wn = w;
  loss = g.op("loss", [=](Run& r) { return (r[wn] * r[xn] - 2).square(); });
  train = g.minimize("train", loss, sgd(0.1));
}

Feeds TinyModel::feed(float value) const { return {{x, at::scalar_tensor(value, at::kFloat)}}; }

std::unique_ptr<MonitoredSession> chief_session(Graph& g, Hooks hooks, const Env& env) {
  return std::make_unique<MonitoredSession>(
      std::make_unique<ChiefSessionCreator>(g, SessionCreatorOptions{.env = env}), std::move(hooks),
      MonitoredSessionOptions{.env = env});
}

std::unique_ptr<MonitoredSession> worker_session(Graph& g, Hooks hooks, const Env& env) {
  return std::make_unique<MonitoredSession>(
      std::make_unique<WorkerSessionCreator>(g, SessionCreatorOptions{.env = env}),
      std::move(hooks), MonitoredSessionOptions{.env = env});
}

}  // namespace trainhooks::testing

namespace trainhooks::testing {

TempDir::TempDir() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "trainhooks-test-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string run_command(const std::string& command, int& status) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed for " + command);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  status = ::pclose(pipe);
  return out;
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("free_port: socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  if (!ok) throw std::runtime_error("free_port: no loopback port");
  return ntohs(addr.sin_port);
}

}  // namespace trainhooks::testing
