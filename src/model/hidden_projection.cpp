// Output projection of a recomputed hidden activation (see hidden_projection.h).
#include "model/hidden_projection.h"

#include <ATen/ExpandUtils.h>
#include <torch/torch.h>

#include "model/autocast_scope.h"
#include "model/optional_tensor.h"

namespace causal {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool is_gelu(FfnKind kind) { return kind == FfnKind::kGelu || kind == FfnKind::kGeluTanh; }

// ATen's name for the GELU of `kind`: the exact one or its tanh approximation.
const char* gelu_approximation(FfnKind kind) { return kind == FfnKind::kGeluTanh ? "tanh" : "none"; }

class HiddenProjectionFunction : public torch::autograd::Function<HiddenProjectionFunction> {
 public:
  // second and bias as optionals: LibTorch's Function takes an undefined tensor for an input only so.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& first,
                               const c10::optional<torch::Tensor>& second, const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& bias, int64_t kind) {
    const c10::optional<c10::ScalarType> dtype = enabled_autocast_dtype(first.device().type());
    const torch::Tensor up = second.value_or(torch::Tensor()), w = in_products_dtype(weight, dtype),
                        b = in_products_dtype(bias.value_or(torch::Tensor()), dtype);
    ctx->save_for_backward({first, up, w, b});
    ctx->saved_data["kind"] = kind;
    ctx->saved_data["weight_dtype"] = weight.scalar_type();
    ctx->saved_data["bias_dtype"] = bias.has_value() ? bias->scalar_type() : weight.scalar_type();
    return torch::linear(hidden_activation(static_cast<FfnKind>(kind), first, up), w, b);
  }

  // Autograd's own formulas for the plain composition, so that the gradients are its bit for bit. linear runs
  // as one product over the flattened rows, (N,H) x (H,D) (mm, or addmm with a bias): ATen's
  // mm_mat1_backward and mm_mat2_backward give the hidden's gradient dy W and the weight's dy^T hidden, and
  // the engine sums the bias's over the rows (at::sum_to). Then gelu_backward, or mul's and silu_backward.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &first = saved[0], &second = saved[1], &w = saved[2], &b = saved[3];
    const auto kind = static_cast<FfnKind>(ctx->saved_data["kind"].toInt());
    // needs_input_grad counts the defined inputs only.
    const bool first_needed = ctx->needs_input_grad(0);
    const bool second_needed = second.defined() && ctx->needs_input_grad(1);
    const size_t weight_edge = second.defined() ? 2 : 1;
    const bool weight_needed = ctx->needs_input_grad(weight_edge);
    const bool bias_needed = b.defined() && ctx->needs_input_grad(weight_edge + 1);

    const int64_t hidden_size = first.size(-1);
    const torch::Tensor dy = grads[0].reshape({-1, w.size(0)});  // (N,D)
    variable_list result(5);
    if (bias_needed) result[3] = at::sum_to(dy, b.sizes()).to(ctx->saved_data["bias_dtype"].toScalarType());
    const c10::ScalarType weight_dtype = ctx->saved_data["weight_dtype"].toScalarType();
    if (is_gelu(kind)) {
      // One (...,H) buffer serves in turn as the recomputed activation, its gradient and first's gradient:
      // fewer large blocks for the allocator to find in the middle of backward.
      const char* approximate = gelu_approximation(kind);
      torch::Tensor buffer = weight_needed ? torch::gelu(first, approximate) : torch::empty_like(first);
      if (weight_needed) result[2] = dy.t().mm(buffer.view({-1, hidden_size})).to(weight_dtype);
      if (first_needed) {
        torch::Tensor rows = buffer.view({-1, hidden_size});
        at::mm_out(rows, dy, w);
        result[0] = at::gelu_backward_out(buffer, buffer, first, approximate);
      }
      return result;
    }
    const torch::Tensor silu = torch::silu(first);
    if (weight_needed) result[2] = dy.t().mm((silu * second).view({-1, hidden_size})).to(weight_dtype);
    if (first_needed || second_needed) {
      const torch::Tensor d_hidden = dy.mm(w).view(first.sizes());  // (...,H)
      if (first_needed) result[0] = torch::silu_backward(d_hidden * second, first);
      if (second_needed) result[1] = d_hidden * silu;
    }
    return result;
  }
};

}  // namespace

at::Tensor hidden_activation(FfnKind kind, const at::Tensor& first, const at::Tensor& second) {
  return is_gelu(kind) ? torch::gelu(first, gelu_approximation(kind)) : torch::silu(first) * second;
}

at::Tensor project_hidden(FfnKind kind, const at::Tensor& first, const at::Tensor& second,
                          const at::Tensor& weight, const at::Tensor& bias) {
  TORCH_CHECK(is_gelu(kind) || kind == FfnKind::kSwiglu,
              "[ffn] the recomputed hidden activation is gelu, gelu_tanh or swiglu, got relu");
  TORCH_CHECK(is_gelu(kind) || (second.defined() && second.sizes() == first.sizes()),
              "[ffn] expected swiglu's up projection shaped like its gate ", first.sizes());
  const bool records = torch::GradMode::is_enabled() &&
                       (first.requires_grad() || (second.defined() && second.requires_grad()) ||
                        weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  // The backward's products take first as it is: when autocast would cast it (fc_in's output never needs
  // that), the plain composition runs instead.
  const c10::ScalarType products =
      enabled_autocast_dtype(first.device().type()).value_or(weight.scalar_type());
  if (!records || first.scalar_type() != products)
    return torch::linear(hidden_activation(kind, first, second), weight, bias);
  return HiddenProjectionFunction::apply(first, optional_tensor(second), weight, optional_tensor(bias),
                                         static_cast<int64_t>(kind));
}

}  // namespace causal
