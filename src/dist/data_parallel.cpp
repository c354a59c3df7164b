// Collective steps of data-parallel training over a ProcessGroup.
#include "dist/data_parallel.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <stdexcept>

#include "core/errors.h"
#include "core/scoped_timer.h"

namespace causal {

std::vector<int64_t> DataParallel::sum_counts(int64_t valid_tokens, int64_t input_tokens) {
  ScopedTimer timer(seconds_);
  std::vector<at::Tensor> counts = {at::tensor(std::vector<int64_t>{valid_tokens, input_tokens}, at::kLong)};
  group_.all_reduce_sum(counts, "token-count all-reduce");
  return {counts[0][0].item<int64_t>(), counts[0][1].item<int64_t>()};
}

DataParallel::~DataParallel() = default;

void DataParallel::attach(std::vector<at::Tensor> parameters) {
  reducer_ = std::make_unique<GradientReducer>(group_, std::move(parameters), bucket_bytes_);
}

void DataParallel::before_last_backward() {
  if (reducer_) reducer_->arm();
}

size_t DataParallel::bucket_count() const { return reducer_ ? reducer_->bucket_count() : 0; }

int64_t DataParallel::reduced_elements() const { return reducer_ ? reducer_->element_count() : 0; }

bool DataParallel::all_finite(const std::vector<at::Tensor>& gradients) {
  for (const at::Tensor& g : gradients)
    if (!at::isfinite(g).all().item<bool>()) return false;
  return true;
}

GradientSumResult DataParallel::sum_gradients(double loss, bool local_finite, const std::string& local_cause,
                                              int64_t step, bool edited_after_backward) {
  if (!reducer_) throw std::logic_error("DataParallel::sum_gradients before attach()");
  ScopedTimer timer(seconds_);
  // Published before the collective, so it is in the store by the time any rank learns it must read it.
  if (!local_finite)
    group_.publish("nonfinite/" + std::to_string(step) + "/" + std::to_string(rank()), local_cause);
  // The loss share and one "non-finite here" flag per rank travel in a bucket of their own, after the
  // gradient buckets (every rank issues collectives in the same order).
  reducer_->finish(edited_after_backward, "gradient all-reduce");
  at::Tensor stats = at::zeros({1 + world_size()}, at::kDouble);
  stats[0].fill_(loss);
  if (!local_finite) stats[1 + rank()].fill_(1.0);
  std::vector<at::Tensor> all = {stats};
  group_.all_reduce_sum(all, "loss all-reduce");

  GradientSumResult result;
  result.loss = stats[0].item<double>();
  for (int64_t r = 0; r < world_size(); ++r) {
    if (stats[1 + r].item<double>() == 0.0) continue;
    result.bad_rank = r;
    result.bad_cause = r == rank()
                           ? local_cause
                           : group_.fetch("nonfinite/" + std::to_string(step) + "/" + std::to_string(r));
    break;
  }
  return result;
}

void DataParallel::broadcast_and_verify(std::vector<at::Tensor> tensors, const std::string& what) {
  ScopedTimer timer(seconds_);
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> contiguous;
  for (at::Tensor& t : tensors) {
    t = t.detach();  // the same storage, written without autograd
    contiguous.push_back(t.is_contiguous() ? t : t.contiguous());
  }
  group_.broadcast(contiguous, 0, what + " broadcast");
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!contiguous[i].is_same(tensors[i])) tensors[i].copy_(contiguous[i]);
  // A checksum that any difference changes (position-weighted, in double): its max and -min over ranks
  // agree only when every rank holds the same values.
  double sum = 0.0, weighted = 0.0;
  for (const at::Tensor& t : tensors) {
    const at::Tensor flat = t.detach().reshape({-1}).to(at::kDouble);
    sum += flat.sum().item<double>();
    weighted += (flat * at::arange(1, flat.numel() + 1, flat.options())).sum().item<double>();
  }
  at::Tensor check = at::tensor(std::vector<double>{sum, weighted, -sum, -weighted}, at::kDouble);
  group_.all_reduce_max(check, what + " checksum");
  const bool same = check[0].item<double>() == -check[2].item<double>() &&
                    check[1].item<double>() == -check[3].item<double>();
  if (!same) {
    throw DistributedError("rank " + std::to_string(rank()) + ": " + what +
                           " differ across ranks after the broadcast from rank 0 (checksum all-reduce)");
  }
}

int64_t DataParallel::max_over_ranks(int64_t value) {
  ScopedTimer timer(seconds_);
  at::Tensor t = at::tensor(std::vector<int64_t>{value}, at::kLong);
  group_.all_reduce_max(t, "stop-request all-reduce");
  return t.item<int64_t>();
}

double DataParallel::take_seconds() {
  const double s = seconds_;
  seconds_ = 0.0;
  return s;
}

}  // namespace causal
