// distributed::init() in this process: a group of one, and the errors for torchrun variables that
// are missing or malformed, an unreachable master and a rendezvous nobody joins.
#include "trainhooks/distributed/process_group.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "test_util.h"
#include "trainhooks/distributed/agreed_stop_policy.h"
#include "trainhooks/distributed/average_gradients.h"
#include "trainhooks/distributed/broadcast_variables_hook.h"
#include "trainhooks/distributed/model_average_hook.h"
#include "trainhooks/distributed/replica_consistency_hook.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;
namespace dist = trainhooks::distributed;
using ::testing::HasSubstr;
using th::testing::error_message;
using th::testing::free_port;

namespace process_group_test {

const char* const kVariables[] = {"RANK",
                                  "WORLD_SIZE",
                                  "LOCAL_RANK",
                                  "MASTER_ADDR",
                                  "MASTER_PORT",
                                  "TORCHELASTIC_RESTART_COUNT",
                                  "TORCHELASTIC_USE_AGENT_STORE",
                                  "TRAINHOOKS_BACKEND"};

// Clears torchrun's variables for a test and puts the process's own back afterwards.
class ProcessGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVariables) {
      if (const char* v = std::getenv(name)) saved_[name] = v;
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : kVariables) unsetenv(name);
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }
  static void set(const std::map<std::string, std::string>& vars) {
    for (const auto& [name, value] : vars) setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  std::map<std::string, std::string> saved_;
};

TEST_F(ProcessGroupTest, WithoutTorchrunsVariablesItIsAGroupOfOne) {
  auto pg = dist::init();
  EXPECT_EQ(pg->rank(), 0);
  EXPECT_EQ(pg->world_size(), 1);
  EXPECT_TRUE(pg->is_chief());
  EXPECT_EQ(pg->restart_count(), 0);
  EXPECT_EQ(pg->describe(), "rank 0 of 1");
  at::Tensor t = at::arange(4, at::kFloat);
  pg->allreduce(t);
  pg->broadcast(t);
  pg->barrier();
  EXPECT_TRUE(at::equal(t, at::arange(4, at::kFloat)));
  EXPECT_TRUE(pg->any(true));
  EXPECT_FALSE(pg->any(false));
  EXPECT_EQ(pg->broadcast_bytes("abc"), "abc");
  EXPECT_THAT(error_message<th::InvalidArgument>([&] { pg->broadcast(t, 1); }),
              HasSubstr("broadcast root 1 is not a rank of rank 0 of 1"));
}

TEST_F(ProcessGroupTest, TheBackendIsGlooUnlessTheOptionsOrTheEnvironmentNameAnother) {
  EXPECT_EQ(dist::init()->backend_name(), "none");  // a group of one has no backend
  EXPECT_EQ(dist::init({.backend = "gloo"})->world_size(), 1);
  EXPECT_EQ(error_message<th::UnimplementedError>([] { dist::init({.backend = "nccl"}); }),
            "trainhooks distributed: backend 'nccl' (InitOptions::backend) is not available: this "
            "LibTorch was built without NCCL (c10d's USE_C10D_NCCL); available: gloo");
  set({{"TRAINHOOKS_BACKEND", "mpi"}});
  EXPECT_EQ(error_message<th::UnimplementedError>([] { dist::init(); }),
            "trainhooks distributed: backend 'mpi' (TRAINHOOKS_BACKEND) is not available: this "
            "LibTorch was built without MPI (c10d's USE_C10D_MPI); available: gloo");
  set({{"TRAINHOOKS_BACKEND", "ucc"}});
  EXPECT_EQ(error_message<th::InvalidArgument>([] { dist::init(); }),
            "trainhooks distributed: unknown backend 'ucc' (TRAINHOOKS_BACKEND); known backends: "
            "gloo, nccl, mpi");
  // The options win over the environment.
  EXPECT_EQ(dist::init({.backend = "gloo"})->backend_name(), "none");
}

TEST_F(ProcessGroupTest, AGroupRejectsANullBackendAndANonPositiveTimeout) {
  EXPECT_EQ(error_message<th::InvalidArgument>([] { dist::ProcessGroup(nullptr); }),
            "trainhooks distributed: ProcessGroup: the backend is null");
  EXPECT_EQ(error_message<th::InvalidArgument>(
                [] { dist::ProcessGroup(dist::ProcessGroupOptions{.timeout_secs = 0}); }),
            "trainhooks distributed: timeout_secs must be positive, not 0");
}

TEST_F(ProcessGroupTest, TorchrunsVariablesAreRead) {
  set({{"RANK", "0"},
       {"WORLD_SIZE", "1"},
       {"LOCAL_RANK", "0"},
       {"TORCHELASTIC_RESTART_COUNT", "2"}});
  auto pg = dist::init();
  EXPECT_EQ(pg->world_size(), 1);
  EXPECT_EQ(pg->restart_count(), 2);
}

TEST_F(ProcessGroupTest, MissingOrMalformedVariablesNameTheVariable) {
  set({{"RANK", "one"}, {"WORLD_SIZE", "2"}});
  EXPECT_THAT(error_message<th::InvalidArgument>([] { dist::init(); }),
              HasSubstr("environment variable RANK='one' is not an integer"));
  set({{"RANK", "1"}});
  unsetenv("WORLD_SIZE");
  EXPECT_THAT(error_message<th::InvalidArgument>([] { dist::init(); }),
              HasSubstr("RANK is set but WORLD_SIZE is not"));
  set({{"RANK", "2"}, {"WORLD_SIZE", "2"}});
  EXPECT_THAT(error_message<th::InvalidArgument>([] { dist::init(); }),
              HasSubstr("rank 2 is not in [0, world size 2)"));
  set({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  EXPECT_THAT(error_message<th::InvalidArgument>([] { dist::init(); }),
              HasSubstr("MASTER_ADDR is not set"));
  set({{"MASTER_ADDR", "127.0.0.1"}});
  EXPECT_THAT(error_message<th::InvalidArgument>([] { dist::init(); }),
              HasSubstr("MASTER_PORT is not set"));
  set({{"MASTER_PORT", "70000"}});
  EXPECT_THAT(
      error_message<th::InvalidArgument>([] { dist::init(); }),
      HasSubstr("environment variable MASTER_PORT='70000' is not an integer in [1, 65535]"));
  set({{"WORLD_SIZE", "0"}});
  EXPECT_THAT(error_message<th::InvalidArgument>([] { dist::init(); }),
              HasSubstr("WORLD_SIZE='0'"));
  EXPECT_THAT(error_message<th::InvalidArgument>([] { dist::init({.timeout_secs = 0}); }),
              HasSubstr("timeout_secs must be positive"));
}

TEST_F(ProcessGroupTest, AnUnreachableMasterIsAnErrorNamingItsAddressWithinTheTimeout) {
  const int port = free_port();
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_message<th::Error>([&] {
    dist::init({.rank = 1,
                .world_size = 2,
                .master_addr = "127.0.0.1",
                .master_port = port,
                .timeout_secs = 2});
  });
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(message,
            "trainhooks distributed: rank 1 of 2 gave up after 2 s: the store at "
            "127.0.0.1:" +
                std::to_string(port) +
                ", which rank 0 serves, did not accept a connection (Connection "
                "refused): rank 0 never arrived, or MASTER_ADDR and MASTER_PORT are not "
                "its address");
  EXPECT_LT(secs, 30);
}

TEST_F(ProcessGroupTest, ARendezvousNobodyJoinsTimesOut) {
  const int port = free_port();
  const std::string message = error_message<th::DeadlineExceededError>([&] {
    dist::init({.rank = 0,
                .world_size = 2,
                .master_addr = "127.0.0.1",
                .master_port = port,
                .timeout_secs = 2});
  });
  EXPECT_THAT(message, HasSubstr("rank 0 of 2 gave up after 2 s at the store at 127.0.0.1:" +
                                 std::to_string(port) + ": rank 1 never arrived"));
}

TEST_F(ProcessGroupTest, TheDistributedPiecesRejectBadOptions) {
  auto pg = dist::init();
  EXPECT_THAT(error_message<th::InvalidArgument>([] { dist::average_gradients(nullptr); }),
              HasSubstr("average_gradients: the process group is null"));
  EXPECT_THAT(
      error_message<th::InvalidArgument>([&] { dist::average_gradients(pg, {.bucket_bytes = 0}); }),
      HasSubstr("bucket_bytes is 0"));
  EXPECT_THAT(error_message<th::InvalidArgument>([] { dist::agreed_stop_policy(nullptr); }),
              HasSubstr("agreed_stop_policy: the process group is null"));
  EXPECT_THAT(error_message<th::InvalidArgument>([&] { dist::ModelAverageHook(pg, 0); }),
              HasSubstr("ModelAverageHook: every_n_steps must be positive, got 0"));
  EXPECT_THAT(error_message<th::InvalidArgument>([&] { dist::ReplicaConsistencyHook(pg, -1); }),
              HasSubstr("ReplicaConsistencyHook: every_n_steps must be positive, got -1"));
  EXPECT_THAT(
      error_message<th::InvalidArgument>([&] { dist::BroadcastVariablesHook(pg, {.root = 1}); }),
      HasSubstr("BroadcastVariablesHook: root 1 is not a rank of rank 0 of 1"));
  // A group of one averages nothing: the gradients stay as they are.
  auto average = dist::average_gradients(pg);
  std::vector<at::Tensor> grads{at::ones({2}), at::Tensor()};
  average(grads);
  EXPECT_TRUE(at::equal(grads[0], at::ones({2})));
}

}  // namespace process_group_test
