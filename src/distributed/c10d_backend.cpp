// The only translation unit that includes c10d: its headers cost much compile time, so the rest of
// the library reaches it through CollectiveBackend.
#include "distributed/c10d_backend.h"

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cstdlib>
#include <vector>

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

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

// Gloo's device: the interface GLOO_SOCKET_IFNAME names (as PyTorch), loopback when every process
// is on this machine, else the address this machine's hostname resolves to.
std::shared_ptr<::gloo::transport::Device> make_device(bool local) {
  const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
  if (interface != nullptr && *interface != '\0')
    return c10d::ProcessGroupGloo::createDeviceForInterface(interface);
  if (local) return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

}  // namespace

std::unique_ptr<CollectiveBackend> make_gloo_backend(const C10dRendezvous& r) {
  const auto timeout = to_ms(r.timeout_secs);
  std::string where;
  bool local = true;
  try {
    c10::intrusive_ptr<c10d::Store> store;
    if (!r.file_store.empty()) {
      where = "file store " + r.file_store;
      store = c10::make_intrusive<c10d::FileStore>(r.file_store, r.world_size);
      store->setTimeout(timeout);
    } else {
      where = fmt::format("the store at {}:{}", r.master_addr, r.master_port);
      local = is_loopback(r.master_addr);
      // Under torchrun's static rendezvous its agent already serves a store at this address, and
      // each restart of the group uses keys of its own (as PyTorch's env:// initialisation).
      c10d::TCPStoreOptions store_options;
      store_options.port = static_cast<uint16_t>(r.master_port);
      store_options.isServer = !r.agent_store && r.rank == 0;
      store_options.numWorkers = static_cast<size_t>(r.world_size);
      store_options.waitWorkers = !r.agent_store;
      store_options.timeout = timeout;
      store_options.multiTenant = true;
      auto tcp = c10::make_intrusive<c10d::TCPStore>(r.master_addr, store_options);
      if (r.agent_store) {
        store = c10::make_intrusive<c10d::PrefixStore>(
            fmt::format("/worker/attempt_{}", r.restart_count), tcp);
      } else {
        store = tcp;
      }
    }
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
    gloo_options->devices.push_back(make_device(local));
    auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("trainhooks", store), r.rank, r.world_size,
        gloo_options);
    return std::make_unique<C10dBackend>("gloo", std::move(store), std::move(group));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    const std::string message = first_line(e);
    const std::string text = fmt::format(
        "trainhooks distributed: rank {} of {} could not join through {} within {} s: {}", r.rank,
        r.world_size, where, r.timeout_secs, message);
    if (says_timeout(message)) throw DeadlineExceededError(text);
    throw UnavailableError(text);
  }
}

}  // namespace trainhooks::distributed::internal
