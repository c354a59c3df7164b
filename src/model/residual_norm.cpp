// The fused residual add and norm (see residual_norm.h).
#include "model/residual_norm.h"

#include <torch/torch.h>

#ifdef CAUSAL_CUDA_KERNELS
#include "model/kernel_launch.h"
#include "model/optional_tensor.h"
#include "model/residual_norm_rows.h"
#endif

namespace causal {

#ifdef CAUSAL_CUDA_KERNELS
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr const char* kNormKernel = "[norm] the fused residual norm kernel";

class ResidualNormFunction : public torch::autograd::Function<ResidualNormFunction> {
 public:
  // bias as an optional: LibTorch's Function takes an undefined tensor for an input only so.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& residual, const at::Tensor& delta,
                               const at::Tensor& weight, const c10::optional<at::Tensor>& bias, bool rms,
                               double eps, int64_t normed_dtype) {
    const at::Tensor r = residual.contiguous(), d = delta.contiguous();
    const int64_t dim = r.size(-1), rows = r.numel() / dim;
    const auto float_options = r.options().dtype(at::kFloat);
    at::Tensor sum = at::empty(r.sizes(), float_options);
    at::Tensor normed = at::empty(r.sizes(), r.options().dtype(static_cast<c10::ScalarType>(normed_dtype)));
    const at::Tensor mean = rms ? at::Tensor() : at::empty({rows}, float_options);
    const at::Tensor rstd = at::empty({rows}, float_options);
    ResidualNormForwardArgs args;
    args.residual = r.data_ptr<float>();
    args.delta = d.data_ptr();
    args.delta_dtype = kernel_dtype(d.scalar_type(), kNormKernel);
    args.sum = sum.data_ptr<float>();
    args.normed = normed.data_ptr();
    args.normed_dtype = kernel_dtype(normed.scalar_type(), kNormKernel);
    args.weight = weight.data_ptr<float>();
    args.bias = bias.has_value() ? bias->data_ptr<float>() : nullptr;
    args.mean = rms ? nullptr : mean.data_ptr<float>();
    args.rstd = rstd.data_ptr<float>();
    args.rows = rows;
    args.dim = dim;
    args.eps = static_cast<float>(eps);
    args.rms = rms;
    args.stream = current_stream(r);
    check_launch(launch_residual_norm_forward(args), kNormKernel);
    ctx->save_for_backward({sum, weight, mean, rstd});
    ctx->saved_data["rms"] = rms;
    ctx->saved_data["bias"] = bias.has_value();
    ctx->saved_data["delta_dtype"] = d.scalar_type();
    return {sum, normed};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &sum = saved[0], &weight = saved[1], &mean = saved[2], &rstd = saved[3];
    const bool rms = ctx->saved_data["rms"].toBool(), has_bias = ctx->saved_data["bias"].toBool();
    const c10::ScalarType delta_dtype = ctx->saved_data["delta_dtype"].toScalarType();
    const at::Tensor grad_sum = grads[0].defined() ? grads[0].to(at::kFloat).contiguous() : at::Tensor();
    const at::Tensor grad_normed = grads[1].defined() ? grads[1].contiguous() : at::Tensor();
    variable_list result(7);
    if (!grad_normed.defined()) {  // only the sum was used: its gradient is both inputs'
      if (!grad_sum.defined()) return result;
      result[0] = grad_sum;
      result[1] = grad_sum.to(delta_dtype);
      return result;
    }
    const int64_t dim = sum.size(-1), rows = sum.numel() / dim;
    const int64_t per_group = rows_per_group(rows, kResidualNormMaxGroups);
    const int64_t groups = group_count(rows, per_group);
    const auto float_options = sum.options();
    const at::Tensor grad_residual = at::empty(sum.sizes(), float_options);
    const at::Tensor grad_delta =
        delta_dtype == at::kFloat ? grad_residual : at::empty(sum.sizes(), float_options.dtype(delta_dtype));
    const at::Tensor weight_partials = at::empty({groups, dim}, float_options);
    const at::Tensor bias_partials = has_bias ? at::empty({groups, dim}, float_options) : at::Tensor();
    ResidualNormBackwardArgs args;
    args.sum = sum.data_ptr<float>();
    args.grad_normed = grad_normed.data_ptr();
    args.normed_dtype = kernel_dtype(grad_normed.scalar_type(), kNormKernel);
    args.grad_sum = grad_sum.defined() ? grad_sum.data_ptr<float>() : nullptr;
    args.weight = weight.data_ptr<float>();
    args.mean = rms ? nullptr : mean.data_ptr<float>();
    args.rstd = rstd.data_ptr<float>();
    args.grad_residual = grad_residual.data_ptr<float>();
    args.grad_delta = delta_dtype == at::kFloat ? nullptr : grad_delta.data_ptr();
    args.delta_dtype = kernel_dtype(delta_dtype, kNormKernel);
    args.weight_partials = weight_partials.data_ptr<float>();
    args.bias_partials = has_bias ? bias_partials.data_ptr<float>() : nullptr;
    args.rows = rows;
    args.dim = dim;
    args.rows_per_group = per_group;
    args.rms = rms;
    args.stream = current_stream(sum);
    check_launch(launch_residual_norm_backward(args), kNormKernel);
    result[0] = grad_residual;
    result[1] = grad_delta;
    result[2] = weight_partials.sum(0);
    if (has_bias) result[3] = bias_partials.sum(0);
    return result;
  }
};

}  // namespace
#endif

bool residual_norm_fusable(const at::Tensor& residual, const at::Tensor& delta, const at::Tensor& weight,
                           const at::Tensor& bias) {
#ifdef CAUSAL_CUDA_KERNELS
  const auto float_on = [&](const at::Tensor& t) {
    return t.scalar_type() == at::kFloat && t.device() == residual.device();
  };
  return residual.is_cuda() && residual.dim() >= 1 && float_on(residual) && residual.size(-1) > 0 &&
         residual.size(-1) <= kResidualNormMaxDim && delta.sizes() == residual.sizes() &&
         delta.device() == residual.device() && is_kernel_dtype(delta.scalar_type()) && float_on(weight) &&
         weight.dim() == 1 && weight.size(0) == residual.size(-1) &&
         (!bias.defined() || (float_on(bias) && bias.sizes() == weight.sizes()));
#else
  (void)residual, (void)delta, (void)weight, (void)bias;
  return false;
#endif
}

ResidualNormed residual_norm(const at::Tensor& residual, const at::Tensor& delta, const at::Tensor& weight,
                             const at::Tensor& bias, const ResidualNormSpec& spec) {
  TORCH_CHECK(residual_norm_fusable(residual, delta, weight, bias),
              "[norm] the fused residual norm takes a float32 GPU residual (..., D<=4096) of a CAUSAL_CUDA "
              "build, a delta of its shape and float32 weights; got ",
              residual.sizes(), " ", residual.scalar_type(), " on ", residual.device());
#ifdef CAUSAL_CUDA_KERNELS
  TORCH_CHECK(is_kernel_dtype(spec.normed_dtype), "[norm] no fused residual norm writing ",
              spec.normed_dtype);
  TORCH_CHECK(!spec.rms || !bias.defined(), "[norm] RMSNorm has no bias");
  const variable_list out =
      ResidualNormFunction::apply(residual, delta, weight, optional_tensor(bias), spec.rms, spec.eps,
                                  static_cast<int64_t>(spec.normed_dtype));
  return {out[0], out[1]};
#else
  (void)spec;
  return {};
#endif
}

}  // namespace causal
