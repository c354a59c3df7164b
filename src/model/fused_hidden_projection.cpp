// The feed-forward network's fused activation and output projection (see fused_hidden_projection.h).
#include "model/fused_hidden_projection.h"

#include <ATen/ExpandUtils.h>
#include <torch/torch.h>

#include "model/autocast_scope.h"
#include "model/optional_tensor.h"

#ifdef CAUSAL_CUDA_KERNELS
#include "model/ffn_activation_rows.h"
#include "model/kernel_launch.h"
#endif

namespace causal {

#ifdef CAUSAL_CUDA_KERNELS
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr const char* kFfnKernel = "[ffn] the fused activation kernel";

FfnActivationArgs activation_args(FfnKind kind, const HiddenInputs& in) {
  FfnActivationArgs args;
  args.kind = kind == FfnKind::kGelu       ? ActivationKind::kGelu
              : kind == FfnKind::kGeluTanh ? ActivationKind::kGeluTanh
                                           : ActivationKind::kSwiglu;
  args.dtype = kernel_dtype(in.first.scalar_type(), kFfnKernel);
  args.width = in.first.size(-1);
  args.rows = args.width == 0 ? 0 : in.first.numel() / args.width;
  args.first = in.first.data_ptr();
  args.second = in.second.defined() ? in.second.data_ptr() : nullptr;
  args.first_bias = in.first_bias.defined() ? in.first_bias.data_ptr<float>() : nullptr;
  args.second_bias = in.second_bias.defined() ? in.second_bias.data_ptr<float>() : nullptr;
  args.stream = current_stream(in.first);
  return args;
}

at::Tensor activation_of(FfnKind kind, const HiddenInputs& in) {
  at::Tensor hidden = at::empty_like(in.first);
  FfnActivationArgs args = activation_args(kind, in);
  args.hidden = hidden.data_ptr();
  check_launch(launch_ffn_activation_forward(args), kFfnKernel);
  return hidden;
}

class FusedHiddenProjectionFunction : public torch::autograd::Function<FusedHiddenProjectionFunction> {
 public:
  // Optionals for the inputs that may be absent: LibTorch's Function takes an undefined tensor only so.
  static torch::Tensor forward(AutogradContext* ctx, const at::Tensor& first,
                               const c10::optional<at::Tensor>& second,
                               const c10::optional<at::Tensor>& first_bias,
                               const c10::optional<at::Tensor>& second_bias, const at::Tensor& weight,
                               const c10::optional<at::Tensor>& bias, int64_t kind) {
    const c10::optional<c10::ScalarType> dtype = enabled_autocast_dtype(first.device().type());
    const HiddenInputs in{first, first_bias.value_or(at::Tensor()), second.value_or(at::Tensor()),
                          second_bias.value_or(at::Tensor())};
    const at::Tensor w = in_products_dtype(weight, dtype),
                     b = in_products_dtype(bias.value_or(at::Tensor()), dtype);
    ctx->save_for_backward({in.first, in.first_bias, in.second, in.second_bias, w, b});
    ctx->saved_data["kind"] = kind;
    ctx->saved_data["weight_dtype"] = weight.scalar_type();
    ctx->saved_data["bias_dtype"] = bias.has_value() ? bias->scalar_type() : weight.scalar_type();
    return torch::linear(activation_of(static_cast<FfnKind>(kind), in), w, b);
  }

  // The output product's gradients as ATen's linear backward makes them (hidden_projection.cpp); the
  // activation's in one kernel, which writes first's gradient over the hidden gradient it reads.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const HiddenInputs in{saved[0], saved[1], saved[2], saved[3]};
    const at::Tensor &w = saved[4], &b = saved[5];
    const auto kind = static_cast<FfnKind>(ctx->saved_data["kind"].toInt());
    const int64_t width = in.first.size(-1);
    const at::Tensor dy = grads[0].to(in.first.scalar_type()).reshape({-1, w.size(0)});  // (N,D)
    variable_list result(7);
    if (b.defined()) result[5] = at::sum_to(dy, b.sizes()).to(ctx->saved_data["bias_dtype"].toScalarType());
    const at::Tensor grad_first = dy.mm(w).view(in.first.sizes());  // the hidden gradient, then first's
    const at::Tensor hidden = at::empty_like(in.first);
    const at::Tensor grad_second = in.second.defined() ? at::empty_like(in.second) : at::Tensor();
    FfnActivationArgs args = activation_args(kind, in);
    args.rows_per_group = rows_per_group(args.rows, kFfnActivationMaxGroups);
    const int64_t groups = group_count(args.rows, args.rows_per_group);
    const auto partials = [&](const at::Tensor& bias) {
      return bias.defined() ? at::empty({groups, width}, bias.options()) : at::Tensor();
    };
    const at::Tensor first_partials = partials(in.first_bias), second_partials = partials(in.second_bias);
    args.hidden = hidden.data_ptr();
    args.grad_hidden = grad_first.data_ptr();
    args.grad_first = grad_first.data_ptr();
    args.grad_second = grad_second.defined() ? grad_second.data_ptr() : nullptr;
    args.first_bias_partials = first_partials.defined() ? first_partials.data_ptr<float>() : nullptr;
    args.second_bias_partials = second_partials.defined() ? second_partials.data_ptr<float>() : nullptr;
    check_launch(launch_ffn_activation_backward(args), kFfnKernel);
    result[0] = grad_first;
    result[1] = grad_second;
    if (first_partials.defined()) result[2] = first_partials.sum(0);
    if (second_partials.defined()) result[3] = second_partials.sum(0);
    result[4] = dy.t().mm(hidden.view({-1, width})).to(ctx->saved_data["weight_dtype"].toScalarType());
    return result;
  }
};

}  // namespace
#endif

bool hidden_projection_fusable(FfnKind kind, const at::Tensor& first) {
#ifdef CAUSAL_CUDA_KERNELS
  return kind != FfnKind::kRelu && first.defined() && first.is_cuda() && first.dim() >= 1 &&
         first.is_contiguous() && is_kernel_dtype(first.scalar_type());
#else
  (void)kind, (void)first;
  return false;
#endif
}

at::Tensor fused_project_hidden(FfnKind kind, const HiddenInputs& inputs, const at::Tensor& weight,
                                const at::Tensor& bias) {
  TORCH_CHECK(
      hidden_projection_fusable(kind, inputs.first),
      "[ffn] the fused activation takes a GELU or SwiGLU's contiguous GPU product of a CAUSAL_CUDA build in "
      "float32, bfloat16 or float16; got ",
      inputs.first.sizes(), " ", inputs.first.scalar_type(), " on ", inputs.first.device());
  const bool swiglu = kind == FfnKind::kSwiglu;
  TORCH_CHECK(
      !swiglu || (inputs.second.defined() && inputs.second.sizes() == inputs.first.sizes() &&
                  inputs.second.scalar_type() == inputs.first.scalar_type() && inputs.second.is_contiguous()),
      "[ffn] expected swiglu's up product shaped and typed like its gate ", inputs.first.sizes());
  TORCH_CHECK(swiglu || (!inputs.second.defined() && !inputs.second_bias.defined()),
              "[ffn] a GELU has no second product");
  for (const at::Tensor& b : {inputs.first_bias, inputs.second_bias})
    TORCH_CHECK(!b.defined() || (b.scalar_type() == at::kFloat && b.device() == inputs.first.device() &&
                                 b.dim() == 1 && b.size(0) == inputs.first.size(-1)),
                "[ffn] expected the products' biases float32 (", inputs.first.size(-1), ") on ",
                inputs.first.device());
#ifdef CAUSAL_CUDA_KERNELS
  const bool records = torch::GradMode::is_enabled() &&
                       (inputs.first.requires_grad() || (swiglu && inputs.second.requires_grad()) ||
                        (inputs.first_bias.defined() && inputs.first_bias.requires_grad()) ||
                        (inputs.second_bias.defined() && inputs.second_bias.requires_grad()) ||
                        weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  if (!records) return torch::linear(activation_of(kind, inputs), weight, bias);
  return FusedHiddenProjectionFunction::apply(
      inputs.first, optional_tensor(inputs.second), optional_tensor(inputs.first_bias),
      optional_tensor(inputs.second_bias), weight, optional_tensor(bias), static_cast<int64_t>(kind));
#else
  (void)weight, (void)bias;
  return {};
#endif
}

}  // namespace causal
