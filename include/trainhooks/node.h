// Node handles and the ways to name a node in fetches and feeds.
//
// A Node is an index into its Graph: cheap to copy, compare and hash, valid for the life of the
// graph. A NodeRef is "a node or its name", so every API that takes nodes also takes names:
//
//   sess.run({train_op, "loss"}, {{x, xs}, {"y", ys}});
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainhooks/small_vector.h"

namespace trainhooks {

struct Node {
  int32_t index = -1;
  bool valid() const { return index >= 0; }
  bool operator==(const Node&) const = default;
};

class NodeRef {
 public:
  NodeRef(Node node) : node_(node) {}                    // NOLINT: implicit by design
  NodeRef(const char* name) : name_(name) {}             // NOLINT
  NodeRef(std::string name) : name_(std::move(name)) {}  // NOLINT
  NodeRef(std::string_view name) : name_(name) {}        // NOLINT

  bool is_name() const { return !node_.valid(); }
  Node node() const { return node_; }
  const std::string& name() const { return name_; }

 private:
  Node node_;
  std::string name_;
};

// What a run should compute: one node, or several in order. A single fetch is stored inline, so
// `sess.run(train_op)` allocates nothing.
class Fetches {
 public:
  // User-provided, so that `return {};` in a hook does not zero the object before building it.
  Fetches() noexcept {}
  Fetches(NodeRef one) : one_(std::move(one)), size_(1) {}      // NOLINT: implicit by design
  Fetches(Node one) : one_(one), size_(1) {}                    // NOLINT
  Fetches(const char* one) : one_(one), size_(1) {}             // NOLINT
  Fetches(std::string one) : one_(std::move(one)), size_(1) {}  // NOLINT
  Fetches(std::initializer_list<NodeRef> refs) { assign(refs.begin(), refs.end()); }
  Fetches(const std::vector<NodeRef>& refs) { assign(refs.begin(), refs.end()); }  // NOLINT
  Fetches(const std::vector<Node>& nodes) { assign(nodes.begin(), nodes.end()); }  // NOLINT

  std::span<const NodeRef> refs() const {
    return size_ <= 1 ? std::span<const NodeRef>(&one_, size_) : std::span<const NodeRef>(many_);
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void clear() {
    many_.clear();
    size_ = 0;
  }
  void push_back(NodeRef ref) {
    if (size_ == 0) {
      one_ = std::move(ref);
    } else {
      if (size_ == 1) many_.assign(1, one_);
      many_.push_back(std::move(ref));
    }
    ++size_;
  }

 private:
  template <typename It>
  void assign(It first, It last) {
    for (; first != last; ++first) push_back(NodeRef(*first));
  }
  NodeRef one_{Node{}};
  std::vector<NodeRef> many_;
  size_t size_ = 0;
};

struct Feed {
  NodeRef node;
  at::Tensor value;
};

// Values that replace nodes for one run: `{{x, xs}, {"y", ys}}`. Feeds override any node. Up to
// four are held inline: a step's feeds are built and dropped without a heap allocation.
using Feeds = SmallVector<Feed, 4>;

// The feeds a run reads: the caller's `Feeds`, or a braced list written in the call,
// `sess.run(train_op, {{x, xs}, {y, ys}})`, which the run then reads where it is: no feed, tensor
// or node reference is copied. A view, like std::string_view: it is a parameter type and does
// not keep what it shows alive (a braced list lives until the end of the statement).
class FeedsView {
 public:
  FeedsView() noexcept = default;
  FeedsView(const Feeds& feeds) noexcept : data_(feeds.data()), size_(feeds.size()) {}  // NOLINT
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"    // a view of the list, on purpose (above)
  FeedsView(std::initializer_list<Feed> feeds) noexcept  // NOLINT: implicit by design
      : data_(feeds.begin()), size_(feeds.size()) {}
#pragma GCC diagnostic pop

  const Feed* begin() const noexcept { return data_; }
  const Feed* end() const noexcept { return data_ + size_; }
  const Feed& operator[](size_t i) const noexcept { return data_[i]; }
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

 private:
  const Feed* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace trainhooks

template <>
struct std::hash<trainhooks::Node> {
  size_t operator()(const trainhooks::Node& n) const noexcept {
    return std::hash<int32_t>()(n.index);
  }
};
