// The only translation unit that includes c10d: its headers cost much compile time, so the rest of
// the library reaches it through CollectiveBackend.
#include "distributed/c10d_backend.h"

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "distributed/call_with_deadline.h"
#include "distributed/network.h"
#include "distributed/startup_messages.h"
#include "trainhooks/env.h"
#include "trainhooks/errors.h"

namespace trainhooks::distributed::internal {

namespace {

std::chrono::milliseconds to_ms(double secs) {
  return std::chrono::milliseconds(static_cast<int64_t>(secs * 1000.0));
}

std::string first_line(const std::exception& e) {
  std::string message = e.what();
  if (const size_t nl = message.find('\n'); nl != std::string::npos) message.resize(nl);
  return message;
}

bool says_timeout(const std::string& message) {
  return message.find("imed out") != std::string::npos ||
         message.find("imeout") != std::string::npos;
}

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax:
      return c10d::ReduceOp::MAX;
    case ReduceOp::kMin:
      return c10d::ReduceOp::MIN;
    case ReduceOp::kSum:
      break;
  }
  return c10d::ReduceOp::SUM;
}

// Any c10d process group (Gloo here; NCCL or MPI in a LibTorch built with them), with the store it
// rendezvoused through.
class C10dBackend final : public CollectiveBackend {
 public:
  C10dBackend(std::string name, c10::intrusive_ptr<c10d::Store> store,
              c10::intrusive_ptr<c10d::ProcessGroup> group)
      : name_(std::move(name)), store_(std::move(store)), group_(std::move(group)) {}

  std::string name() const override { return name_; }
  int rank() const override { return group_->getRank(); }
  int world_size() const override { return group_->getSize(); }

  void allreduce(at::Tensor& tensor, ReduceOp op, double timeout_secs) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = to_c10d(op);
    options.timeout = to_ms(timeout_secs);
    wait_for(group_->allreduce(tensors, options), "allreduce", timeout_secs);
  }

  void broadcast(at::Tensor& tensor, int root, double timeout_secs) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    options.timeout = to_ms(timeout_secs);
    wait_for(group_->broadcast(tensors, options), "broadcast", timeout_secs);
  }

  void barrier(double timeout_secs) override {
    c10d::BarrierOptions options;
    options.timeout = to_ms(timeout_secs);
    wait_for(group_->barrier(options), "barrier", timeout_secs);
  }

 private:
  // Waits for `work`, turning c10d's and Gloo's errors into ours.
  void wait_for(const c10::intrusive_ptr<c10d::Work>& work, const char* what,
                double timeout_secs) const {
    const std::string where = fmt::format("rank {} of {}", rank(), world_size());
    try {
      // The backend's own timeout (set on the operation) fires first; this bound is the last
      // resort.
      if (!work->wait(to_ms(timeout_secs + 10))) {
        throw DeadlineExceededError(
            fmt::format("trainhooks distributed: {} on {} did not finish within {} s", what, where,
                        timeout_secs));
      }
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      const std::string message = first_line(e);
      const bool timed_out = says_timeout(message);
      const std::string text = fmt::format(
          "trainhooks distributed: {} on {} failed{}: {}", what, where,
          timed_out ? fmt::format(" (a peer did not take part within {} s)", timeout_secs) : "",
          message);
      if (timed_out) throw DeadlineExceededError(text);
      throw UnavailableError(text);
    }
  }

  std::string name_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
};

// Gloo's error without its source location ("[gloo/transport/tcp/pair.cc:799] connect ...").
std::string without_location(const std::string& message) {
  if (message.rfind('[', 0) == 0) {
    if (const size_t end = message.find("] "); end != std::string::npos)
      return message.substr(end + 2);
  }
  return message;
}

std::string hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// Gloo's device and the address it listens on.
struct GlooDevice {
  std::shared_ptr<::gloo::transport::Device> device;
  std::string address;    // "127.0.0.1"
  std::string chosen_by;  // "GLOO_SOCKET_IFNAME=lo", "this machine's hostname 'vm' resolves to it"
};

// The address in a TCP device's description ("tcp, pci=, iface=lo, speed=-1, addr=[127.0.0.1]").
std::string address_of(const ::gloo::transport::Device& device) {
  const std::string text = device.str();
  const size_t at = text.find("addr=");
  if (at == std::string::npos) return text;
  std::string address = text.substr(at + 5);
  if (address.rfind('[', 0) == 0) address = address.substr(1, address.find(']') - 1);
  return address;
}

// A Gloo device that `make` creates to listen on `what`, Gloo's error made ours.
std::shared_ptr<::gloo::transport::Device> gloo_device(
    const std::function<std::shared_ptr<::gloo::transport::Device>()>& make,
    const std::string& what) {
  try {
    return make();
  } catch (const std::exception& e) {
    throw UnavailableError(fmt::format("trainhooks distributed: Gloo cannot listen on {}: {}", what,
                                       without_location(first_line(e))));
  }
}

// Gloo's device: the interface GLOO_SOCKET_IFNAME names (as PyTorch), loopback when every process
// is on this machine, else the address this machine's hostname resolves to. A named interface is
// checked here, so that a wrong one fails at once with its own message rather than after the
// rendezvous.
GlooDevice make_device(bool local) {
  GlooDevice out;
  const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
  if (interface != nullptr && *interface != '\0') {
    const std::vector<NetworkInterface> interfaces = network_interfaces();
    const auto found = std::find_if(interfaces.begin(), interfaces.end(),
                                    [&](const NetworkInterface& i) { return i.name == interface; });
    if (found == interfaces.end() || found->addresses.empty())
      throw InvalidArgument(missing_interface_message(interface, interfaces));
    try {
      out.device = c10d::ProcessGroupGloo::createDeviceForInterface(interface);
    } catch (const std::exception& e) {
      throw InvalidArgument(
          fmt::format("trainhooks distributed: Gloo cannot use GLOO_SOCKET_IFNAME={}: {}",
                      interface, without_location(first_line(e))));
    }
    out.chosen_by = fmt::format("GLOO_SOCKET_IFNAME={}", interface);
  } else if (local) {
    out.device = gloo_device(
        [] { return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"); }, "127.0.0.1");
    out.chosen_by = "MASTER_ADDR is on this machine";
  } else {
    const std::string name = hostname();
    out.device = gloo_device(&c10d::ProcessGroupGloo::createDefaultDevice,
                             fmt::format("the address of this machine's hostname '{}'", name));
    out.chosen_by = is_loopback_host(name)
                        ? fmt::format("this machine's hostname '{}' resolves to it", name)
                        : fmt::format(
                              "Gloo's fallback: this machine's hostname '{}' does not "
                              "resolve to an address it can use",
                              name);
  }
  out.address = address_of(*out.device);
  return out;
}

// How far start-up got, for the message of a native call that outlives the deadline.
enum class Phase { kStore, kArrival, kGloo };

// What the start-up thread shares with the watchdog's message: written by the thread before it
// moves to the next phase (the atomic orders the two).
struct Progress {
  std::atomic<Phase> phase{Phase::kStore};
  std::vector<std::string> gloo_addresses;  // by rank; set before kGloo
};

using Clock = std::chrono::steady_clock;

c10::intrusive_ptr<c10d::Store> connect_store(const C10dRendezvous& r, const StartupPlace& place,
                                              Clock::time_point deadline) {
  const auto timeout = to_ms(r.timeout_secs);
  if (!r.file_store.empty()) {
    auto store = c10::make_intrusive<c10d::FileStore>(r.file_store, r.world_size);
    store->setTimeout(timeout);
    return store;
  }
  const bool server = !r.agent_store && r.rank == 0;
  // c10d's client retries a refused connection until its timeout and then says only that it timed
  // out: a connection of our own first says why it failed, and bounds the wait by the deadline.
  if (!server) {
    if (const std::string why = wait_until_accepting(r.master_addr, r.master_port, deadline);
        !why.empty()) {
      throw DeadlineExceededError(unreachable_store_message(place, why));
    }
  }
  // Under torchrun's static rendezvous its agent already serves a store at this address, and
  // each restart of the group uses keys of its own (as PyTorch's env:// initialisation). No
  // waitWorkers: the ranks' own keys (join()) say who came, within the deadline.
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(r.master_port);
  store_options.isServer = server;
  store_options.numWorkers = static_cast<size_t>(r.world_size);
  store_options.waitWorkers = false;
  store_options.timeout = timeout;
  store_options.multiTenant = true;
  c10::intrusive_ptr<c10d::TCPStore> tcp;
  try {
    tcp = c10::make_intrusive<c10d::TCPStore>(r.master_addr, store_options);
  } catch (const std::exception& e) {
    throw UnavailableError(fmt::format("trainhooks distributed: rank {} of {} could not {} {}: {}",
                                       r.rank, r.world_size, server ? "serve" : "connect to",
                                       place.store, first_line(e)));
  }
  if (r.agent_store) {
    return c10::make_intrusive<c10d::PrefixStore>(
        fmt::format("/worker/attempt_{}", r.restart_count), tcp);
  }
  return tcp;
}

std::string rank_key(int rank) { return fmt::format("trainhooks/rank/{}", rank); }

// Registers this rank (its key holds its Gloo address) and waits until every rank has, polling:
// a key that never comes then names the ranks that are missing, which one bounded wait for all
// keys could not say.
std::vector<std::string> wait_for_ranks(c10d::Store& store, const C10dRendezvous& r,
                                        const StartupPlace& place, const std::string& address,
                                        Clock::time_point deadline) {
  std::vector<std::string> keys;
  for (int rank = 0; rank < r.world_size; ++rank) keys.push_back(rank_key(rank));
  store.set(keys[r.rank], std::vector<uint8_t>(address.begin(), address.end()));
  auto pause = std::chrono::milliseconds(10);
  while (!store.check(keys)) {
    const auto now = Clock::now();
    if (now >= deadline) {
      std::vector<int> missing;
      for (int rank = 0; rank < r.world_size; ++rank)
        if (!store.check({keys[rank]})) missing.push_back(rank);
      if (missing.empty()) break;  // the last one arrived just now
      throw DeadlineExceededError(missing_ranks_message(place, missing));
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
  std::vector<std::string> addresses;
  for (const auto& key : keys) {
    const std::vector<uint8_t> value = store.get(key);
    addresses.emplace_back(value.begin(), value.end());
  }
  return addresses;
}

// The whole rendezvous, on the watchdog's thread: the store, every rank's arrival, Gloo's
// connections. Each wait that LibTorch lets us bound ends at `deadline` with its own message.
std::unique_ptr<CollectiveBackend> join(const C10dRendezvous& r, const StartupPlace& place,
                                        const GlooDevice& device, Clock::time_point deadline,
                                        Progress& progress) {
  c10::intrusive_ptr<c10d::Store> store = connect_store(r, place, deadline);
  progress.phase = Phase::kArrival;
  std::vector<std::string> addresses;
  try {
    addresses = wait_for_ranks(*store, r, place, device.address, deadline);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw UnavailableError(fmt::format(
        "trainhooks distributed: rank {} of {} lost {} while waiting for the other ranks: {}",
        r.rank, r.world_size, place.store, first_line(e)));
  }
  progress.gloo_addresses = addresses;
  progress.phase = Phase::kGloo;
  auto gloo_options = c10d::ProcessGroupGloo::Options::create(to_ms(r.timeout_secs));
  gloo_options->devices.push_back(device.device);
  try {
    auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("trainhooks", store), r.rank, r.world_size,
        gloo_options);
    return std::make_unique<C10dBackend>("gloo", std::move(store), std::move(group));
  } catch (const std::exception& e) {
    const std::string message = without_location(first_line(e));
    const std::string text = gloo_connect_message(place, addresses, message);
    if (says_timeout(message)) throw DeadlineExceededError(text);
    throw UnavailableError(text);
  }
}

}  // namespace

std::unique_ptr<CollectiveBackend> make_gloo_backend(const C10dRendezvous& r) {
  const Clock::time_point deadline =
      Clock::now() +
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(r.timeout_secs));
  StartupPlace place{.rank = r.rank,
                     .world_size = r.world_size,
                     .master_addr = r.file_store.empty() ? r.master_addr : "",
                     .master_port = r.master_port,
                     .agent_store = r.agent_store,
                     .timeout_secs = r.timeout_secs};
  place.store = r.file_store.empty()
                    ? fmt::format("the store at {}:{}", r.master_addr, r.master_port)
                    : "the file store " + r.file_store;
  const bool local = !r.file_store.empty() || is_loopback_host(r.master_addr);
  const GlooDevice device = make_device(local);
  if (!local && is_loopback_host(device.address)) {
    Env::system().warning(
        loopback_warning(place, device.address, device.chosen_by, network_interfaces()));
  }

  // Gloo's pair connect retries for several times its timeout, and a rank that hangs in it would
  // never report: the start-up runs on a thread of its own, given up a moment after the deadline
  // (a native call that never returns is left on it), so that every rank fails within its bound.
  auto progress = std::make_shared<Progress>();
  const double margin = 0.5 + 0.02 * r.timeout_secs;
  const double left = std::chrono::duration<double>(deadline - Clock::now()).count() + margin;
  return call_with_deadline<std::unique_ptr<CollectiveBackend>>(
      [r, place, device, deadline, progress] {
        return join(r, place, device, deadline, *progress);
      },
      left,
      [&] {
        switch (progress->phase.load()) {
          case Phase::kGloo:
            throw DeadlineExceededError(gloo_connect_message(place, progress->gloo_addresses, ""));
          case Phase::kArrival:
            throw DeadlineExceededError(
                fmt::format("trainhooks distributed: rank {} of {} gave up after {} s at {}: the "
                            "store did not answer",
                            r.rank, r.world_size, r.timeout_secs, place.store));
          case Phase::kStore:
            break;
        }
        throw DeadlineExceededError(
            fmt::format("trainhooks distributed: rank {} of {} could not open {} within {} s",
                        r.rank, r.world_size, place.store, r.timeout_secs));
      });
}

}  // namespace trainhooks::distributed::internal
