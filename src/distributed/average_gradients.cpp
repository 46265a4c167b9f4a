#include "trainhooks/distributed/average_gradients.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <fmt/format.h>

#include <vector>

#include "trainhooks/distributed/process_group.h"
#include "trainhooks/errors.h"

namespace trainhooks::distributed {

namespace {

// A flat buffer for gradients [first, last) of the train op, all of one dtype, with a view of it
// shaped as each of them (kept with the buffer: no view is made per step).
struct Bucket {
  size_t first = 0;
  size_t last = 0;
  at::Tensor flat;
  std::vector<at::Tensor> slots;  // slots[k]: gradient first + k's part of flat
};

class GradientAverager {
 public:
  GradientAverager(std::shared_ptr<ProcessGroup> group, AverageGradientsOptions options)
      : group_(std::move(group)), options_(options) {}

  void operator()(std::span<at::Tensor> grads) {
    if (group_->world_size() == 1) return;
    if (!matches(grads)) plan(grads);
    const double scale = 1.0 / group_->world_size();
    for (Bucket& b : buckets_) {
      if (b.last - b.first == 1 && grads[b.first].is_contiguous()) {
        // One gradient: reduced in place, no copies.
        at::Tensor& g = grads[b.first];
        group_->allreduce(g);
        g.mul_(scale);
        continue;
      }
      for (size_t i = b.first; i < b.last; ++i) b.slots[i - b.first].copy_(grads[i]);
      group_->allreduce(b.flat);
      b.flat.mul_(scale);
      for (size_t i = b.first; i < b.last; ++i) grads[i].copy_(b.slots[i - b.first]);
    }
  }

 private:
  // Whether the gradients have the layout the buckets were planned for.
  bool matches(std::span<const at::Tensor> grads) const {
    if (!planned_ || grads.size() != layout_.size()) return false;
    for (size_t i = 0; i < grads.size(); ++i) {
      const Layout& l = layout_[i];
      if (grads[i].defined() != l.defined) return false;
      if (l.defined && (grads[i].scalar_type() != l.dtype || grads[i].sizes() != l.sizes))
        return false;
    }
    return true;
  }

  void plan(std::span<at::Tensor> grads) {
    // Undefined gradients take no part; the others are packed in order, a bucket closing at a
    // dtype change or when the next gradient would overflow it.
    layout_.clear();
    buckets_.clear();
    int64_t defined = 0;
    int64_t elements = 0;
    size_t bucket_bytes = 0;
    at::ScalarType bucket_dtype = at::kFloat;
    for (size_t i = 0; i < grads.size(); ++i) {
      const at::Tensor& g = grads[i];
      Layout l;
      l.defined = g.defined();
      if (l.defined) {
        if (!g.device().is_cpu()) {
          // Every backend this LibTorch offers (Gloo) reduces CPU tensors.
          throw InvalidArgument(fmt::format(
              "average_gradients: gradients must be CPU tensors (the process group's backend "
              "'{}' reduces CPU tensors), got {}",
              group_->backend_name(), g.device().str()));
        }
        l.dtype = g.scalar_type();
        l.sizes = g.sizes().vec();
        ++defined;
        elements += g.numel();
        const size_t bytes = g.numel() * g.element_size();
        if (buckets_.empty() || buckets_.back().last != i || bucket_dtype != l.dtype ||
            bucket_bytes + bytes > options_.bucket_bytes) {
          buckets_.push_back(Bucket{i, i, {}});
          bucket_bytes = 0;
          bucket_dtype = l.dtype;
        }
        buckets_.back().last = i + 1;
        bucket_bytes += bytes;
      }
      layout_.push_back(std::move(l));
    }
    for (Bucket& b : buckets_) {
      if (b.last - b.first == 1) continue;  // reduced in place
      int64_t n = 0;
      for (size_t i = b.first; i < b.last; ++i) n += grads[i].numel();
      b.flat = at::empty({n}, grads[b.first].options());
      int64_t offset = 0;
      for (size_t i = b.first; i < b.last; ++i) {
        b.slots.push_back(b.flat.narrow(0, offset, grads[i].numel()).view(grads[i].sizes()));
        offset += grads[i].numel();
      }
    }
    // Every rank must reduce the same buckets: compare the counts across the ranks.
    at::Tensor counts = at::empty({4}, at::kLong);
    auto* c = counts.data_ptr<int64_t>();
    c[0] = defined;
    c[1] = elements;
    c[2] = -defined;
    c[3] = -elements;
    group_->allreduce(counts, ReduceOp::kMax);
    if (c[0] != defined || c[1] != elements || -c[2] != defined || -c[3] != elements) {
      throw InvalidArgument(fmt::format(
          "average_gradients: the ranks' gradients differ ({}: {} gradients of {} elements; "
          "across the ranks {} to {} gradients, {} to {} elements): every rank must compute the "
          "gradients of the same variables",
          group_->describe(), defined, elements, -c[2], c[0], -c[3], c[1]));
    }
    planned_ = true;
  }

  struct Layout {
    bool defined = false;
    at::ScalarType dtype = at::kFloat;
    std::vector<int64_t> sizes;
  };

  std::shared_ptr<ProcessGroup> group_;
  AverageGradientsOptions options_;
  bool planned_ = false;
  std::vector<Layout> layout_;
  std::vector<Bucket> buckets_;
};

// The transform that average_gradients() and averaging_transform() return: a named type, so that
// averaging_group() can recognise it inside a GradientTransform.
struct Averaging {
  std::shared_ptr<ProcessGroup> group;
  std::shared_ptr<GradientAverager> averager;  // average_gradients()'s
  GradientTransform custom;                    // else the program's own
  void operator()(std::span<at::Tensor> grads) const {
    if (averager)
      (*averager)(grads);
    else
      custom(grads);
  }
};

}  // namespace

GradientTransform average_gradients(std::shared_ptr<ProcessGroup> group,
                                    AverageGradientsOptions options) {
  if (!group) throw InvalidArgument("average_gradients: the process group is null");
  if (options.bucket_bytes == 0) throw InvalidArgument("average_gradients: bucket_bytes is 0");
  auto averager = std::make_shared<GradientAverager>(group, options);
  return Averaging{.group = std::move(group), .averager = std::move(averager)};
}

GradientTransform averaging_transform(std::shared_ptr<ProcessGroup> group,
                                      GradientTransform average) {
  if (!group) throw InvalidArgument("averaging_transform: the process group is null");
  if (!average) throw InvalidArgument("averaging_transform: the transform is empty");
  return Averaging{.group = std::move(group), .custom = std::move(average)};
}

std::shared_ptr<ProcessGroup> averaging_group(const GradientTransform& transform) {
  const Averaging* averaging = transform.target<Averaging>();
  return averaging ? averaging->group : nullptr;
}

}  // namespace trainhooks::distributed
