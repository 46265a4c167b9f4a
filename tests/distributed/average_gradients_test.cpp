// average_gradients over the in-process fake group: two ranks' gradients become their exact mean,
// bucketed or not, and a peer that fails in the middle of the averaging ends the other rank with
// the named error.
#include "trainhooks/distributed/average_gradients.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/sin.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "distributed/fake_ranks.h"
#include "test_util.h"
#include "trainhooks/distributed/process_group.h"
#include "trainhooks/errors.h"
#include "trainhooks/testing/fake_process_group.h"

namespace th = trainhooks;
namespace dist = trainhooks::distributed;
using ::testing::HasSubstr;

namespace average_gradients_test {

// Rank r's gradients: two float ones, none for the third variable, a double one. No RNG: the
// ranks' threads would share its state.
std::vector<at::Tensor> gradients_of(int rank) {
  const auto values = [&](int64_t n, at::ScalarType dtype) {
    return at::sin(at::arange(n, dtype) * (rank + 1.5) + 0.25);
  };
  return {values(6, at::kFloat).view({3, 2}), values(5, at::kFloat), at::Tensor(),
          values(4, at::kDouble)};
}

TEST(AverageGradientsTest, TwoRanksGradientsAreAveragedExactly) {
  for (const size_t bucket_bytes : {size_t{25} << 20, size_t{24}}) {  // one bucket; one per grad
    SCOPED_TRACE(bucket_bytes);
    auto groups = dist::make_fake_process_groups(2);
    std::vector<std::vector<at::Tensor>> grads{gradients_of(0), gradients_of(1)};
    const std::vector<at::Tensor> g0 = gradients_of(0), g1 = gradients_of(1);
    auto errors = dist::run_ranks(2, [&](int rank) {
      auto average = dist::average_gradients(groups[rank], {.bucket_bytes = bucket_bytes});
      for (int step = 0; step < 2; ++step) {  // the second step reuses the planned buckets
        grads[rank] = gradients_of(rank);
        average(grads[rank]);
      }
    });
    for (int rank = 0; rank < 2; ++rank) ASSERT_EQ(th::testing::error_text(errors[rank]), "");
    for (int rank = 0; rank < 2; ++rank) {
      for (size_t i : {0, 1, 3}) {
        // (a + b) * 0.5 is what both ranks compute, to the bit.
        EXPECT_TRUE(at::equal(grads[rank][i], (g0[i] + g1[i]) * 0.5)) << rank << " " << i;
      }
      EXPECT_FALSE(grads[rank][2].defined());
    }
  }
}

TEST(AverageGradientsTest, RanksWithDifferentGradientsFailOnTheFirstStep) {
  auto groups = dist::make_fake_process_groups(2);
  auto errors = dist::run_ranks(2, [&](int rank) {
    std::vector<at::Tensor> grads{at::ones({rank == 0 ? 2 : 3})};
    dist::average_gradients(groups[rank])(grads);
  });
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(errors[rank]) << rank;
    EXPECT_THAT(th::testing::error_message<th::InvalidArgument>(
                    [&] { std::rethrow_exception(errors[rank]); }),
                HasSubstr("across the ranks 1 to 1 gradients, 2 to 3 elements"));
  }
}

// Refused before any collective, on every rank, naming the backend and the device.
TEST(AverageGradientsTest, GradientsOffTheCpuAreRefusedNamingTheBackend) {
  auto groups = dist::make_fake_process_groups(2);
  auto errors = dist::run_ranks(2, [&](int rank) {
    std::vector<at::Tensor> grads{at::empty({2}, at::TensorOptions().device(at::kMeta))};
    dist::average_gradients(groups[rank])(grads);
  });
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(errors[rank]) << rank;
    EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                  [&] { std::rethrow_exception(errors[rank]); }),
              "average_gradients: gradients must be CPU tensors (the process group's backend "
              "'fake' reduces CPU tensors), got meta");
  }
}

TEST(AverageGradientsTest, APeerFailingMidAllreduceEndsTheOtherRankWithUnavailableError) {
  // Collective 0 is the first step's check of the layout; collective 1 the first bucket.
  auto groups = dist::make_fake_process_groups(2, {.failures = {{.rank = 1, .collective = 1}}});
  auto errors = dist::run_ranks(2, [&](int rank) {
    std::vector<at::Tensor> grads = gradients_of(rank);
    dist::average_gradients(groups[rank])(grads);
  });
  ASSERT_TRUE(errors[0] && errors[1]);
  const auto message = [&](int rank) {
    return th::testing::error_message<th::UnavailableError>(
        [&] { std::rethrow_exception(errors[rank]); });
  };
  EXPECT_EQ(message(0),
            "trainhooks distributed: allreduce on rank 0 of 2 failed: rank 1 left the group");
  EXPECT_EQ(message(1),
            "trainhooks distributed: allreduce on rank 1 of 2 failed: scripted failure of "
            "collective 1");
}

TEST(AverageGradientsTest, APeerThatHangsEndsTheOtherRankWithDeadlineExceededError) {
  auto groups = dist::make_fake_process_groups(
      2, {.timeout_secs = 7,
          .failures = {
              {.rank = 0, .collective = 0, .kind = dist::FakeFailure::Kind::kDeadlineExceeded}}});
  auto errors = dist::run_ranks(2, [&](int rank) {
    std::vector<at::Tensor> grads = gradients_of(rank);
    dist::average_gradients(groups[rank])(grads);
  });
  ASSERT_TRUE(errors[1]);
  EXPECT_EQ(th::testing::error_message<th::DeadlineExceededError>(
                [&] { std::rethrow_exception(errors[1]); }),
            "trainhooks distributed: allreduce on rank 1 of 2 failed (a peer did not take part "
            "within 7 s): rank 0 did not take part");
}

TEST(AverageGradientsTest, AveragingGroupRecognisesTheAveragingTransforms) {
  auto groups = dist::make_fake_process_groups(2);
  EXPECT_EQ(dist::averaging_group(dist::average_gradients(groups[0])), groups[0]);
  auto own = dist::averaging_transform(groups[1], [](std::span<at::Tensor>) {});
  EXPECT_EQ(dist::averaging_group(own), groups[1]);
  EXPECT_EQ(dist::averaging_group(th::clip_by_global_norm(1.0)), nullptr);
  EXPECT_EQ(dist::averaging_group([](std::span<at::Tensor>) {}), nullptr);
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [&] { dist::averaging_transform(groups[0], nullptr); }),
            "averaging_transform: the transform is empty");
}

}  // namespace average_gradients_test
