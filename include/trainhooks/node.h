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
#include <string>
#include <string_view>
#include <vector>

namespace trainhooks {

struct Node {
  int32_t index = -1;
  bool valid() const { return index >= 0; }
  bool operator==(const Node&) const = default;
};

class NodeRef {
 public:
  NodeRef(Node node) : node_(node) {}  // NOLINT: implicit by design
  NodeRef(const char* name) : name_(name) {}  // NOLINT
  NodeRef(std::string name) : name_(std::move(name)) {}  // NOLINT
  NodeRef(std::string_view name) : name_(name) {}  // NOLINT

  bool is_name() const { return !node_.valid(); }
  Node node() const { return node_; }
  const std::string& name() const { return name_; }

 private:
  Node node_;
  std::string name_;
};

// What a run should compute: one node, or several in order.
class Fetches {
 public:
  Fetches() = default;
  Fetches(NodeRef one) { refs_.push_back(std::move(one)); }  // NOLINT
  Fetches(Node one) { refs_.emplace_back(one); }  // NOLINT
  Fetches(const char* one) { refs_.emplace_back(one); }  // NOLINT
  Fetches(std::string one) { refs_.emplace_back(std::move(one)); }  // NOLINT
  Fetches(std::initializer_list<NodeRef> refs) : refs_(refs) {}
  Fetches(std::vector<NodeRef> refs) : refs_(std::move(refs)) {}  // NOLINT
  Fetches(const std::vector<Node>& nodes) : refs_(nodes.begin(), nodes.end()) {}  // NOLINT

  const std::vector<NodeRef>& refs() const { return refs_; }
  std::vector<NodeRef>& refs() { return refs_; }
  size_t size() const { return refs_.size(); }
  bool empty() const { return refs_.empty(); }
  void clear() { refs_.clear(); }

 private:
  std::vector<NodeRef> refs_;
};

struct Feed {
  NodeRef node;
  at::Tensor value;
};

// Values that replace nodes for one run: `{{x, xs}, {"y", ys}}`. Feeds override any node.
using Feeds = std::vector<Feed>;

}  // namespace trainhooks

template <>
struct std::hash<trainhooks::Node> {
  size_t operator()(const trainhooks::Node& n) const noexcept { return std::hash<int32_t>()(n.index); }
};
