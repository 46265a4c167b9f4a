#include "trainhooks/small_vector.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace th = trainhooks;

namespace small_vector_test {

// Counts live objects, so that every element made is also destroyed.
struct Counted {
  static inline int live = 0;
  std::string value;
  explicit Counted(std::string v) : value(std::move(v)) { ++live; }
  Counted(const Counted& o) : value(o.value) { ++live; }
  Counted(Counted&& o) noexcept : value(std::move(o.value)) { ++live; }
  Counted& operator=(const Counted&) = default;
  Counted& operator=(Counted&&) = default;
  ~Counted() { --live; }
};

std::vector<std::string> values(const th::SmallVector<Counted, 2>& v) {
  std::vector<std::string> out;
  for (const auto& c : v) out.push_back(c.value);
  return out;
}

TEST(SmallVectorTest, HoldsNInlineThenMovesToTheHeap) {
  {
    th::SmallVector<Counted, 2> v;
    EXPECT_TRUE(v.empty());
    EXPECT_EQ(v.capacity(), 2u);
    const Counted* inline_data = v.data();
    v.emplace_back("a");
    v.emplace_back("b");
    EXPECT_EQ(v.data(), inline_data);
    v.emplace_back("c");
    EXPECT_NE(v.data(), inline_data);
    EXPECT_GE(v.capacity(), 3u);
    EXPECT_EQ(values(v), (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(Counted::live, 3);
    // clear keeps the capacity for reuse.
    const size_t capacity = v.capacity();
    v.clear();
    EXPECT_EQ(Counted::live, 0);
    EXPECT_EQ(v.capacity(), capacity);
    v.emplace_back("d");
    EXPECT_EQ(values(v), std::vector<std::string>{"d"});
  }
  EXPECT_EQ(Counted::live, 0);
}

TEST(SmallVectorTest, AnElementOfItselfCanBeAppendedWhileItGrows) {
  th::SmallVector<Counted, 2> v{Counted("long enough to live on the heap: a"), Counted("b")};
  v.push_back(v[0]);
  EXPECT_EQ(values(v), (std::vector<std::string>{"long enough to live on the heap: a", "b",
                                                 "long enough to live on the heap: a"}));
}

TEST(SmallVectorTest, CopiesAndMovesInlineAndOnTheHeap) {
  for (size_t n : {1u, 2u, 5u}) {
    th::SmallVector<Counted, 2> v;
    for (size_t i = 0; i < n; ++i) v.emplace_back(std::to_string(i));
    const auto expected = values(v);

    th::SmallVector<Counted, 2> copy(v);
    EXPECT_EQ(values(copy), expected);
    th::SmallVector<Counted, 2> moved(std::move(copy));
    EXPECT_EQ(values(moved), expected);
    EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty

    th::SmallVector<Counted, 2> assigned{Counted("x"), Counted("y"), Counted("z")};
    assigned = v;
    EXPECT_EQ(values(assigned), expected);
    th::SmallVector<Counted, 2> move_assigned{Counted("x")};
    move_assigned = std::move(assigned);
    EXPECT_EQ(values(move_assigned), expected);
    EXPECT_EQ(Counted::live, static_cast<int>(3 * n));
  }
  EXPECT_EQ(Counted::live, 0);
}

TEST(SmallVectorTest, BuildsFromAStdVectorAndAppendsRanges) {
  const std::vector<Counted> source{Counted("a"), Counted("b"), Counted("c")};
  th::SmallVector<Counted, 2> v(source);
  EXPECT_EQ(values(v), (std::vector<std::string>{"a", "b", "c"}));
  v.append(source.begin(), source.begin() + 1);
  v.pop_back();
  EXPECT_EQ(v.size(), 3u);
  EXPECT_EQ(v.back().value, "c");
}

}  // namespace small_vector_test
