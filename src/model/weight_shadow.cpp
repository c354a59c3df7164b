// Weight shadows (see weight_shadow.h).
#include "model/weight_shadow.h"

#include <torch/torch.h>

#include <algorithm>

namespace causal {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Hands the copy on unchanged; backward casts the copy's gradient to the masters' dtype and gives each master
// its rows: autocast's cast, the stacking and the padding each way at once.
class ShadowFunction : public torch::autograd::Function<ShadowFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, at::TensorList masters, const at::Tensor& copy) {
    std::vector<int64_t> rows;
    for (const at::Tensor& m : masters) rows.push_back(m.size(0));
    ctx->saved_data["rows"] = rows;
    ctx->saved_data["dtype"] = masters.front().scalar_type();
    return copy;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor grad = grads[0].to(ctx->saved_data["dtype"].toScalarType());
    variable_list out;
    int64_t offset = 0;
    for (const int64_t rows : ctx->saved_data["rows"].toIntVector()) {
      out.push_back(grad.narrow(0, offset, rows));
      offset += rows;
    }
    out.emplace_back();  // the copy's
    return out;
  }
};

}  // namespace

c10::optional<c10::ScalarType> shadow_dtype(WeightShadows mode, c10::optional<c10::ScalarType> products,
                                            const at::Tensor& master) {
  if (!products.has_value() || master.scalar_type() != at::kFloat || *products == at::kFloat)
    return c10::nullopt;
  if (mode == WeightShadows::kOn || (mode == WeightShadows::kAuto && master.is_cuda())) return products;
  return c10::nullopt;
}

const at::Tensor& WeightShadow::copy(const std::vector<at::Tensor>& masters, c10::ScalarType dtype,
                                     int64_t rows) {
  TORCH_CHECK(!masters.empty(), "[weight_shadow] expected at least one master");
  const at::Tensor& first = masters.front();
  int64_t stacked = 0;
  std::vector<std::pair<const void*, int64_t>> now;
  for (const at::Tensor& m : masters) {
    TORCH_CHECK(m.dim() == 2 && m.size(1) == first.size(1) && m.scalar_type() == first.scalar_type() &&
                    m.device() == first.device(),
                "[weight_shadow] expected matrices of ", first.size(1), " columns alike, got ", m.sizes());
    stacked += m.size(0);
    now.emplace_back(m.data_ptr(), m._version());
  }
  const int64_t total = std::max(rows, stacked);
  const bool same_layout = copy_.defined() && copy_.scalar_type() == dtype &&
                           copy_.device() == first.device() && copy_.size(0) == total &&
                           copy_.size(1) == first.size(1);
  if (same_layout && now == made_from_) return copy_;
  torch::NoGradGuard no_grad;
  // Zeros once, for the padding rows; the masters' rows are overwritten in place after, so that whatever
  // holds the copy (a captured CUDA graph) keeps reading the same storage.
  if (!same_layout) copy_ = at::zeros({total, first.size(1)}, first.options().dtype(dtype));
  int64_t offset = 0;
  for (const at::Tensor& m : masters) {
    copy_.narrow(0, offset, m.size(0)).copy_(m);
    offset += m.size(0);
  }
  made_from_ = std::move(now);
  return copy_;
}

at::Tensor WeightShadow::weight(const std::vector<at::Tensor>& masters, c10::ScalarType dtype, int64_t rows) {
  const at::Tensor& fresh = copy(masters, dtype, rows);
  return ShadowFunction::apply(at::TensorList(masters), fresh);
}

}  // namespace causal
