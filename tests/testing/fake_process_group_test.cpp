// The in-process fake process group: its collectives give every rank the result a real backend
// would, and its failures (scripted, a peer that never comes, a group destroyed, collectives that
// do not match) end the calls with the errors and texts of the Gloo backend's form.
#include "trainhooks/testing/fake_process_group.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "distributed/fake_ranks.h"
#include "test_util.h"
#include "trainhooks/errors.h"

namespace th = trainhooks;
namespace dist = trainhooks::distributed;
using ::testing::HasSubstr;
using th::testing::error_message;
using th::testing::error_text;

namespace fake_process_group_test {

TEST(FakeProcessGroupTest, CollectivesGiveEveryRankTheResult) {
  auto groups = dist::make_fake_process_groups(3);
  EXPECT_EQ(groups[2]->describe(), "rank 2 of 3");
  EXPECT_EQ(groups[2]->backend_name(), "fake");
  EXPECT_EQ(groups[2]->local_rank(), 2);
  std::vector<at::Tensor> sums(3), maxima(3), mins(3);
  std::vector<std::string> bytes(3);
  auto errors = dist::run_ranks(3, [&](int rank) {
    sums[rank] = at::full({2}, rank + 1.0);
    groups[rank]->allreduce(sums[rank]);
    maxima[rank] = at::full({1}, rank, at::kLong);
    groups[rank]->allreduce(maxima[rank], dist::ReduceOp::kMax);
    mins[rank] = at::full({1}, rank, at::kLong);
    groups[rank]->allreduce(mins[rank], dist::ReduceOp::kMin);
    bytes[rank] = groups[rank]->broadcast_bytes(rank == 1 ? std::string("a\0b", 3) : "", 1);
    groups[rank]->barrier();
  });
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_EQ(error_text(errors[rank]), "");
    EXPECT_TRUE(at::equal(sums[rank], at::full({2}, 6.0))) << rank;
    EXPECT_EQ(maxima[rank].item<int64_t>(), 2);
    EXPECT_EQ(mins[rank].item<int64_t>(), 0);
    EXPECT_EQ(bytes[rank], std::string("a\0b", 3));
  }
}

TEST(FakeProcessGroupTest, APeerThatNeverCallsEndsTheWaitAtTheTimeout) {
  auto groups = dist::make_fake_process_groups(2, {.timeout_secs = 0.2});
  at::Tensor t = at::ones({1});
  EXPECT_EQ(error_message<th::DeadlineExceededError>([&] { groups[0]->allreduce(t); }),
            "trainhooks distributed: allreduce on rank 0 of 2 failed (a peer did not take part "
            "within 0.2 s): not every rank called it in time");
}

TEST(FakeProcessGroupTest, ADestroyedGroupLeavesAsAClosedConnection) {
  auto groups = dist::make_fake_process_groups(2);
  groups[1].reset();
  EXPECT_EQ(error_message<th::UnavailableError>([&] { groups[0]->barrier(); }),
            "trainhooks distributed: barrier on rank 0 of 2 failed: rank 1 left the group");
}

TEST(FakeProcessGroupTest, RanksCallingDifferentCollectivesFail) {
  auto groups = dist::make_fake_process_groups(2);
  auto errors = dist::run_ranks(2, [&](int rank) {
    at::Tensor t = at::ones({1});
    if (rank == 0)
      groups[0]->allreduce(t);
    else
      groups[1]->broadcast(t);
  });
  // The later of the two finds the mismatch; the other then finds it gone.
  const std::vector<std::string> texts{error_text(errors[0]), error_text(errors[1])};
  const int later = texts[0].find("another rank called") != std::string::npos ? 0 : 1;
  EXPECT_EQ(texts[later],
            later == 1 ? "trainhooks distributed: broadcast on rank 1 of 2: collective 0: another "
                         "rank called allreduce (root 0), this one broadcast (root 0)"
                       : "trainhooks distributed: allreduce on rank 0 of 2: collective 0: another "
                         "rank called broadcast (root 0), this one allreduce (root 0)");
  EXPECT_THAT(texts[1 - later],
              HasSubstr("failed: rank " + std::to_string(later) + " left the group"));
}

TEST(FakeProcessGroupTest, TensorsThatDoNotMatchFailOnEveryRank) {
  auto groups = dist::make_fake_process_groups(2);
  auto errors = dist::run_ranks(2, [&](int rank) {
    at::Tensor t = at::ones({rank + 1});
    groups[rank]->allreduce(t);
  });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_THAT(error_text(errors[rank]),
                HasSubstr("rank 1's tensor differs from rank 0's in shape or dtype"));
  }
}

TEST(FakeProcessGroupTest, RejectsBadOptions) {
  EXPECT_EQ(error_message<th::InvalidArgument>([] { dist::make_fake_process_groups(0); }),
            "make_fake_process_groups: world_size must be positive, not 0");
  EXPECT_EQ(error_message<th::InvalidArgument>(
                [] { dist::make_fake_process_groups(2, {.failures = {{.rank = 2}}}); }),
            "make_fake_process_groups: failure of rank 2 at collective 0 is not in a group of 2");
}

}  // namespace fake_process_group_test
