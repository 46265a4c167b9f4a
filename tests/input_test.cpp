#include "trainhooks/input.h"

#include <torch/torch.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "trainhooks/data.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/session.h"

namespace th = trainhooks;

namespace input_test {

std::vector<int64_t> values(const torch::Tensor& t) {
  auto c = t.to(torch::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

struct InputFixture {
  th::Graph g;
  th::InputNodes batch;
  explicit InputFixture(int64_t n, th::InputOptions options) {
    auto xs = torch::arange(n);
    batch = g.input("in", th::tensor_source({xs, xs * 10}, {"x", "y"}), options);
  }
};

TEST(InputTest, ComponentsAreNamedAndAdvanceTogetherOncePerRun) {
  InputFixture f(5, {.batch_size = 2});
  EXPECT_EQ(f.g.name(f.batch[0]), "in/x");
  EXPECT_EQ(f.g.name(f.batch[1]), "in/y");
  th::Session s(f.g);
  auto r = s.run({f.batch[0], f.batch[1]});
  EXPECT_EQ(values(r[f.batch[0]]), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(values(r[f.batch[1]]), (std::vector<int64_t>{0, 10}));
  // A second run pulls the next batch; fetching one component still advances both.
  EXPECT_EQ(values(s.run(f.batch[1])[f.batch[1]]), (std::vector<int64_t>{20, 30}));
  EXPECT_EQ(values(s.run(f.batch[0])[f.batch[0]]), (std::vector<int64_t>{4}));
  EXPECT_EQ(f.g.input_position(f.batch[0]), (th::InputPosition{0, 5}));
}

TEST(InputTest, EndOfDataRaisesOutOfRangeAndStaysThere) {
  InputFixture f(3, {.batch_size = 2});
  th::Session s(f.g);
  s.run(f.batch[0]);
  s.run(f.batch[0]);
  EXPECT_THROW(s.run(f.batch[0]), th::OutOfRangeError);
  try {
    s.run(f.batch[0]);
    FAIL();
  } catch (const th::OutOfRangeError& e) {
    EXPECT_EQ(std::string(e.what()), "End of input 'in' after 1 epoch(s) [while evaluating in/x]");
  }
}

TEST(InputTest, DropLastAndEpochs) {
  InputFixture f(5, {.batch_size = 2, .num_epochs = 2, .drop_last = true});
  th::Session s(f.g);
  std::vector<int64_t> seen;
  for (int i = 0; i < 4; ++i) {
    auto v = values(s.run(f.batch[0])[f.batch[0]]);
    EXPECT_EQ(v.size(), 2u);
    seen.insert(seen.end(), v.begin(), v.end());
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_THROW(s.run(f.batch[0]), th::OutOfRangeError);
}

TEST(InputTest, ShuffleIsAPermutationPerEpochReproducibleFromSeed) {
  auto epoch_orders = [](uint64_t seed) {
    InputFixture f(10, {.batch_size = 10, .shuffle = true, .seed = seed, .num_epochs = 2});
    th::Session s(f.g);
    auto a = values(s.run(f.batch[0])[f.batch[0]]);
    auto b = values(s.run(f.batch[0])[f.batch[0]]);
    return std::make_pair(a, b);
  };
  auto [a1, b1] = epoch_orders(7);
  auto [a2, b2] = epoch_orders(7);
  auto [a3, b3] = epoch_orders(8);
  EXPECT_EQ(a1, a2);
  EXPECT_EQ(b1, b2);
  EXPECT_NE(a1, b1);  // a new order each epoch
  EXPECT_NE(a1, a3);
  auto sorted = a1;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(InputTest, RestoredPositionContinuesTheSameOrder) {
  th::InputOptions o{.batch_size = 3, .shuffle = true, .seed = 3, .num_epochs = 0};
  InputFixture straight(10, o);
  th::Session s1(straight.g);
  std::vector<std::vector<int64_t>> expected;
  for (int i = 0; i < 8; ++i)
    expected.push_back(values(s1.run(straight.batch[0])[straight.batch[0]]));

  InputFixture first(10, o);
  th::Session s2(first.g);
  for (int i = 0; i < 5; ++i) s2.run(first.batch[0]);
  auto pos = first.g.input_position(first.batch[0]);
  EXPECT_EQ(pos, (th::InputPosition{1, 3}));  // 4 batches of epoch 0 (3+3+3+1), then 1 of epoch 1

  InputFixture resumed(10, o);
  resumed.g.set_input_position(resumed.batch[1], pos);
  th::Session s3(resumed.g);
  for (int i = 5; i < 8; ++i)
    EXPECT_EQ(values(s3.run(resumed.batch[0])[resumed.batch[0]]), expected[i]);
}

TEST(InputTest, ShardsSplitEachEpoch) {
  auto shard = [](int64_t index) {
    InputFixture f(7, {.batch_size = 10, .num_shards = 2, .shard_index = index});
    th::Session s(f.g);
    return values(s.run(f.batch[0])[f.batch[0]]);
  };
  // 7 examples in 2 shards: 3 each, so that both shards' epochs end together; the last example
  // of the epoch's order is left out.
  EXPECT_EQ(shard(0), (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(shard(1), (std::vector<int64_t>{1, 3, 5}));
}

// Positions count the examples of the epoch's order read by all shards together: a position of
// W0 shards continued by W1 shards reads every example of the epoch once.
TEST(InputTest, APositionOfSomeShardsContinuesOnAnotherNumberOfShards) {
  const th::InputOptions o{.batch_size = 2, .shuffle = true, .seed = 9, .num_epochs = 1};
  for (const auto& [w0, w1] :
       std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {1, 2}, {2, 4}, {4, 3}}) {
    SCOPED_TRACE(::testing::Message() << w0 << " shards, then " << w1);
    std::vector<int64_t> read;
    th::InputPosition position;
    for (int64_t r = 0; r < w0; ++r) {
      InputFixture f(24, o);
      f.g.shard_inputs(w0, r);
      th::Session s(f.g);
      for (int i = 0; i < 2; ++i) {
        const auto batch = values(s.run(f.batch[0])[f.batch[0]]);
        read.insert(read.end(), batch.begin(), batch.end());
      }
      if (r == 0) position = f.g.input_position(f.batch[0]);
      EXPECT_EQ(f.g.input_position(f.batch[0]), position);  // the same on every shard
    }
    EXPECT_EQ(position, (th::InputPosition{0, 4 * w0}));
    for (int64_t r = 0; r < w1; ++r) {
      InputFixture f(24, o);
      f.g.shard_inputs(w1, r);
      f.g.set_input_position(f.batch[0], position);
      EXPECT_EQ(f.g.input_batches_left(f.batch[0]), ((24 - 4 * w0) / w1 + 1) / 2);
      th::Session s(f.g);
      try {
        for (;;) {
          const auto batch = values(s.run(f.batch[0])[f.batch[0]]);
          read.insert(read.end(), batch.begin(), batch.end());
        }
      } catch (const th::OutOfRangeError&) {
      }
    }
    // Each example once; where what is left of the epoch does not divide among the new shards
    // (4 then 3: 8 left), the last few of the order (here 2) are left out, as size % num_shards
    // are in every epoch.
    std::sort(read.begin(), read.end());
    EXPECT_EQ(std::adjacent_find(read.begin(), read.end()), read.end());
    EXPECT_EQ(static_cast<int64_t>(read.size()), 24 - (24 - 4 * w0) % w1);
  }
}

TEST(InputTest, ShardInputsShardsWhatTheProgramLeftUnsharded) {
  th::Graph g;
  auto src = th::tensor_source({torch::arange(8)}, {"x"});
  auto plain = g.input("plain", src, {.batch_size = 2});
  auto own = g.input("own", src, {.batch_size = 2, .num_shards = 4, .shard_index = 3});
  auto whole = g.input("whole", src, {.batch_size = 2, .shard_across_ranks = false});
  auto global = g.input("global", src, {.global_batch_size = 4});
  EXPECT_EQ(g.num_shards(), 1);
  g.shard_inputs(2, 1);
  auto later = g.input("later", src, {.batch_size = 2});
  EXPECT_EQ(g.num_shards(), 2);
  auto shard = [&](th::InputNodes n) {
    const auto& o = g.input_options(n[0]);
    return std::vector<int64_t>{o.num_shards, o.shard_index, o.batch_size};
  };
  EXPECT_EQ(shard(plain), (std::vector<int64_t>{2, 1, 2}));
  EXPECT_EQ(shard(own), (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(shard(whole), (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(shard(global), (std::vector<int64_t>{2, 1, 2}));  // 4 in all, 2 a shard
  EXPECT_EQ(shard(later), (std::vector<int64_t>{2, 1, 2}));
  g.shard_inputs(4, 0);  // again: the graph's shards follow, the program's stay
  EXPECT_EQ(shard(plain), (std::vector<int64_t>{4, 0, 2}));
  EXPECT_EQ(shard(own), (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(shard(global), (std::vector<int64_t>{4, 0, 1}));
  g.shard_inputs(1, 0);
  EXPECT_EQ(shard(plain), (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(shard(global), (std::vector<int64_t>{1, 0, 4}));

  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const th::InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_EQ(message([&] { g.shard_inputs(3, 0); }),
            "input 'global': global_batch_size 4 does not divide among 3 shards");
  EXPECT_EQ(shard(plain), (std::vector<int64_t>{1, 0, 2}));  // nothing changed
  EXPECT_EQ(message([&] { g.shard_inputs(2, 2); }),
            "shard_inputs: invalid shard index 2 of 2 shards");
  EXPECT_EQ(message([&] { g.input("both", src, {.batch_size = 2, .global_batch_size = 4}); }),
            "input 'both': batch_size 2 and global_batch_size 4 are both set; set one of them");
  EXPECT_EQ(message([&] {
              g.input("odd", src, {.global_batch_size = 4, .num_shards = 3, .shard_index = 0});
            }),
            "input 'odd': global_batch_size 4 does not divide among 3 shards");
}

TEST(InputTest, BadOptionsAndSourcesAreRejected) {
  th::Graph g;
  auto src = th::tensor_source({torch::arange(4)}, {"x"});
  EXPECT_THROW(g.input("a", src, {.batch_size = 0}), th::InvalidArgument);
  EXPECT_THROW(g.input("a", src, {.num_shards = 2, .shard_index = 2}), th::InvalidArgument);
  EXPECT_THROW(g.input("a", nullptr), th::InvalidArgument);
  EXPECT_THROW(th::tensor_source({torch::arange(4), torch::arange(3)}, {"x", "y"}),
               th::InvalidArgument);
  EXPECT_THROW(th::tensor_source({torch::arange(4)}, {"x", "y"}), th::InvalidArgument);
  auto in = g.input("a", src);
  EXPECT_THROW(g.set_input_position(in[0], {-1, 0}), th::InvalidArgument);
  EXPECT_THROW(g.set_input_position(in[0], {0, 5}), th::InvalidArgument);  // past the 4 examples
  EXPECT_THROW(g.input("b", src, {.global_batch_size = -1}), th::InvalidArgument);
}

// A torch::data dataset, as users write them.
struct Squares : torch::data::datasets::Dataset<Squares> {
  torch::data::Example<> get(size_t i) override {
    return {torch::tensor({static_cast<float>(i)}), torch::tensor(static_cast<int64_t>(i * i))};
  }
  torch::optional<size_t> size() const override { return 6; }
};

TEST(InputTest, TorchDatasetAdapterStacksExamples) {
  th::Graph g;
  auto batch = g.input("sq", th::dataset_source(Squares()), {.batch_size = 4});
  EXPECT_EQ(g.name(batch.data()), "sq/data");
  EXPECT_EQ(g.name(batch.target()), "sq/target");
  th::Session s(g);
  auto r = s.run({batch.data(), batch.target()});
  EXPECT_EQ(r[batch.data()].sizes(), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(values(r[batch.target()]), (std::vector<int64_t>{0, 1, 4, 9}));
}

TEST(InputTest, BatchesLeftCountsEpochsDropLastAndShardsFromThePosition) {
  auto left = [](int64_t n, th::InputOptions o, int runs) {
    InputFixture f(n, o);
    th::Session s(f.g);
    for (int i = 0; i < runs; ++i) s.run(f.batch[0]);
    return f.g.input_batches_left(f.batch[1]);
  };
  // 10 examples in batches of 3: 3, 3, 3, 1 per epoch.
  EXPECT_EQ(left(10, {.batch_size = 3, .num_epochs = 2}, 0), 8);
  EXPECT_EQ(left(10, {.batch_size = 3, .num_epochs = 2}, 3), 5);
  EXPECT_EQ(left(10, {.batch_size = 3, .num_epochs = 2}, 4), 4);  // after the partial batch
  EXPECT_EQ(left(10, {.batch_size = 3, .num_epochs = 2}, 8), 0);
  EXPECT_EQ(left(10, {.batch_size = 3, .num_epochs = 2, .drop_last = true}, 0), 6);
  EXPECT_EQ(left(10, {.batch_size = 3, .num_epochs = 2, .drop_last = true}, 3), 3);
  // Every shard of 10 examples in 3 reads 3 of them: shard 0 reads 0, 3, 6 (not 9), in two
  // batches per epoch as the others.
  EXPECT_EQ(left(10, {.batch_size = 2, .num_epochs = 1, .num_shards = 3, .shard_index = 0}, 0), 2);
  // Shard 1 of 3 reads examples 1, 4, 7: one batch of 2 and one of 1 per epoch.
  EXPECT_EQ(left(10, {.batch_size = 2, .num_epochs = 3, .num_shards = 3, .shard_index = 1}, 1), 5);
  EXPECT_EQ(
      left(10,
           {.batch_size = 2, .num_epochs = 3, .drop_last = true, .num_shards = 3, .shard_index = 1},
           0),
      3);
  EXPECT_EQ(left(10, {.batch_size = 3, .num_epochs = 0}, 2), std::nullopt);

  InputFixture f(10, {.batch_size = 3, .num_epochs = 2});
  f.g.set_input_position(f.batch[0], {.epoch = 1, .offset = 6});  // a restored position
  EXPECT_EQ(f.g.input_batches_left(f.batch[0]), 2);
  EXPECT_THROW(f.g.input_batches_left(th::Node{}), th::Error);
}

}  // namespace input_test
