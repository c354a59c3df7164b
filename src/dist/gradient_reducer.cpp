// Bucket layout, gradient hooks and the in-order start of bucket all-reduces.
#include "dist/gradient_reducer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

namespace causal {

GradientReducer::GradientReducer(ProcessGroup& group, std::vector<at::Tensor> parameters,
                                 int64_t bucket_bytes)
    : group_(group), parameters_(std::move(parameters)), slots_(parameters_.size()) {
  std::vector<int64_t> elements;  // per bucket
  int64_t filled = 0;             // bytes in the newest bucket
  for (size_t k = parameters_.size(); k-- > 0;) {
    const at::Tensor& p = parameters_[k];
    const int64_t bytes = p.numel() * static_cast<int64_t>(p.element_size());
    const bool same_kind = !buckets_.empty() && buckets_.back().flat.scalar_type() == p.scalar_type() &&
                           buckets_.back().flat.device() == p.device();
    if (!same_kind || filled + bytes > bucket_bytes) {
      buckets_.push_back({at::empty({0}, p.options().requires_grad(false)), 0, 0});
      elements.push_back(0);
      filled = 0;
    }
    slots_[k] = {buckets_.size() - 1, elements.back(), false};
    elements.back() += p.numel();
    buckets_.back().slots += 1;
    filled += bytes;
  }
  for (size_t b = 0; b < buckets_.size(); ++b) buckets_[b].flat = buckets_[b].flat.new_zeros({elements[b]});
  reset();
  for (size_t k = 0; k < parameters_.size(); ++k) {
    if (!parameters_[k].requires_grad()) {
      hooks_.push_back(0);
      continue;
    }
    hooks_.push_back(parameters_[k].register_hook([this, k](const at::Tensor& incoming) {
      if (!armed_) return;
      pack(k, incoming);
      start_ready(/*in_backward=*/true);
    }));
  }
}

GradientReducer::~GradientReducer() {
  for (size_t k = 0; k < parameters_.size(); ++k)
    if (parameters_[k].requires_grad()) parameters_[k].remove_hook(hooks_[k]);
}

void GradientReducer::reset() {
  for (Slot& s : slots_) s.packed = false;
  for (Bucket& b : buckets_) b.unpacked = b.slots;
  next_bucket_ = 0;
}

at::Tensor GradientReducer::slice(size_t index) {
  const at::Tensor& p = parameters_[index];
  return buckets_[slots_[index].bucket].flat.narrow(0, slots_[index].offset, p.numel()).view(p.sizes());
}

void GradientReducer::pack(size_t index, const at::Tensor& incoming) {
  at::NoGradGuard no_grad;
  at::Tensor into = slice(index);
  const at::Tensor& earlier = parameters_[index].grad();
  // What AccumulateGrad is about to store in .grad: earlier micro-batches' sum plus this one's.
  if (earlier.defined() && incoming.defined()) {
    at::add_out(into, earlier, incoming);
  } else if (earlier.defined() || incoming.defined()) {
    into.copy_(earlier.defined() ? earlier : incoming);
  } else {
    into.zero_();
  }
  if (!slots_[index].packed) {
    slots_[index].packed = true;
    buckets_[slots_[index].bucket].unpacked -= 1;
  }
}

void GradientReducer::start_ready(bool in_backward) {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].unpacked == 0) {
    group_.start_all_reduce_sum(buckets_[next_bucket_++].flat, "gradient all-reduce");
    if (in_backward) ++started_during_backward_;
  }
}

void GradientReducer::arm() {
  armed_ = true;
  started_during_backward_ = 0;
}

void GradientReducer::finish(bool repack, const std::string& what) {
  armed_ = false;
  if (repack) {
    group_.wait_started(what);
    reset();
  }
  for (size_t k = 0; k < parameters_.size(); ++k)
    if (!slots_[k].packed) pack(k, at::Tensor());
  start_ready(/*in_backward=*/false);
  group_.wait_started(what);
  at::NoGradGuard no_grad;
  for (size_t k = 0; k < parameters_.size(); ++k)
    if (parameters_[k].grad().defined()) parameters_[k].mutable_grad().copy_(slice(k));
  reset();
}

int64_t GradientReducer::element_count() const {
  int64_t n = 0;
  for (const Bucket& b : buckets_) n += b.flat.numel();
  return n;
}

}  // namespace causal
