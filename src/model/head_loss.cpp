// The chunked head and loss (see head_loss.h).
#include "model/head_loss.h"

#include <torch/torch.h>

#include <algorithm>

#include "model/gpu_products.h"
#include "model/optional_tensor.h"

#ifdef CAUSAL_CUDA_KERNELS
#include "model/cross_entropy_rows.h"
#include "model/kernel_launch.h"
#endif

namespace causal {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// One chunk's figures: the loss of each row, its largest |logit| when asked, and when asked the gradient of
// the chunk's loss with respect to its logits, padding columns included (as zeros).
struct ChunkFigures {
  at::Tensor loss_rows;  // (c) float32, 0 for rows outside the loss
  at::Tensor max_abs;    // () float32 or undefined
  at::Tensor gradient;   // (c, padded V) in the logits' dtype, or undefined
};

// The plain ATen composition; the reference the CUDA kernel is tested against.
ChunkFigures chunk_figures_aten(const at::Tensor& padded_logits, int64_t vocab, const at::Tensor& labels,
                                const HeadLossOptions& options, bool gradient) {
  ChunkFigures out;
  const at::Tensor logits = padded_logits.narrow(1, 0, vocab);
  const at::Tensor in_loss = labels != options.ignore_label;                                 // (c)
  const at::Tensor safe_labels = labels.masked_fill(in_loss.logical_not(), 0).unsqueeze(1);  // (c,1)
  // In float32 products this is the chunk's own logits tensor, which nothing reads after: its gradient is
  // made in place.
  at::Tensor wide = logits.to(at::kFloat);
  const at::Tensor lse = at::logsumexp(wide, {1});  // (c)
  out.loss_rows = (lse - wide.gather(1, safe_labels).squeeze(1)).masked_fill(in_loss.logical_not(), 0.0);
  if (options.max_abs_logit) out.max_abs = wide.abs().max();
  if (!gradient) return out;
  wide.sub_(lse.unsqueeze(1)).exp_();
  wide.scatter_add_(1, safe_labels, in_loss.to(at::kFloat).neg().unsqueeze(1));
  wide.masked_fill_(in_loss.logical_not().unsqueeze(1), 0.0);
  const int64_t pad = padded_logits.size(1) - vocab;
  out.gradient = wide.to(padded_logits.scalar_type());
  if (pad > 0) out.gradient = at::constant_pad_nd(out.gradient, {0, pad});
  return out;
}

#ifdef CAUSAL_CUDA_KERNELS
ChunkFigures chunk_figures_cuda(const at::Tensor& padded_logits, int64_t vocab, const at::Tensor& labels,
                                const HeadLossOptions& options, bool gradient) {
  TORCH_CHECK(padded_logits.stride(1) == 1 && labels.is_contiguous(),
              "[head_loss] the row kernel expects logits rows and labels contiguous");
  ChunkFigures out;
  const int64_t rows = padded_logits.size(0);
  const auto float_options = padded_logits.options().dtype(at::kFloat);
  out.loss_rows = at::empty({rows}, float_options);
  const at::Tensor max_abs_rows = options.max_abs_logit ? at::empty({rows}, float_options) : at::Tensor();
  CrossEntropyRowsArgs args;
  args.logits = padded_logits.data_ptr();
  args.dtype = kernel_dtype(padded_logits.scalar_type(), "[head_loss] the row kernel");
  args.rows = rows;
  args.vocab = vocab;
  args.row_stride = padded_logits.stride(0);
  args.labels = labels.data_ptr<int64_t>();
  args.ignore_label = options.ignore_label;
  args.loss = out.loss_rows.data_ptr<float>();
  args.max_abs = options.max_abs_logit ? max_abs_rows.data_ptr<float>() : nullptr;
  args.write_gradient = gradient;
  args.stream = current_stream(padded_logits);
  check_launch(launch_cross_entropy_rows(args), "[head_loss] the row kernel");
  if (options.max_abs_logit) out.max_abs = max_abs_rows.max();
  if (gradient) out.gradient = padded_logits;  // overwritten in place
  return out;
}
#endif

ChunkFigures chunk_figures(const at::Tensor& padded_logits, int64_t vocab, const at::Tensor& labels,
                           const HeadLossOptions& options, bool gradient) {
#ifdef CAUSAL_CUDA_KERNELS
  if (padded_logits.is_cuda()) return chunk_figures_cuda(padded_logits, vocab, labels, options, gradient);
#endif
  return chunk_figures_aten(padded_logits, vocab, labels, options, gradient);
}

// Every chunk of one call: the loss, and the gradients of the summed loss when asked. The weight is cast
// to the products' dtype once per call, as autocast does once per forward.
struct ChunkedPass {
  at::Tensor sum;          // () float32
  at::Tensor max_abs;      // () float32 (0 when not asked for)
  at::Tensor grad_hidden;  // (N,D) in hidden's dtype
  at::Tensor grad_weight;  // (V,D) in weight's dtype
  at::Tensor grad_bias;    // (V) in bias's dtype, or undefined
};

ChunkedPass run_chunks(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias,
                       const at::Tensor& labels, const HeadLossOptions& options, bool gradients,
                       const at::Tensor& padded_weight) {
  const int64_t rows = hidden.size(0), vocab = weight.size(0);
  const at::Tensor h = hidden.to(options.products);
  // Aligned rows for cuBLAS on a GPU, as the logits path's head has (gpu_products.h).
  const HeadParameters head =
      padded_head(padded_weight.defined() ? weight : weight.to(options.products),
                  bias.defined() ? bias.to(options.products) : at::Tensor(), padded_weight);
  const at::Tensor &w = head.weight, &b = head.bias;
  const auto float_options = hidden.options().dtype(at::kFloat);
  ChunkedPass out;
  out.sum = at::zeros({}, float_options);
  out.max_abs = at::zeros({}, float_options);
  // A frozen head (an adapter run's) needs no gradient of its own: the largest product of a step saved.
  at::Tensor grad_h, grad_w, grad_b;
  if (gradients) {
    grad_h = at::empty_like(h);
    if (weight.requires_grad()) grad_w = at::zeros(w.sizes(), float_options);
    if (b.defined() && bias.requires_grad()) grad_b = at::zeros(b.sizes(), float_options);
  }
  const int64_t step = std::max<int64_t>(options.chunk_rows, 1);
  for (int64_t start = 0; start < rows; start += step) {
    const int64_t count = std::min(step, rows - start);
    const at::Tensor chunk = h.narrow(0, start, count);                                         // (c,D)
    const at::Tensor logits = b.defined() ? at::addmm(b, chunk, w.t()) : at::mm(chunk, w.t());  // (c,Vp)
    const ChunkFigures figures =
        chunk_figures(logits, vocab, labels.narrow(0, start, count), options, gradients);
    out.sum.add_(figures.loss_rows.sum());
    if (figures.max_abs.defined()) out.max_abs = at::maximum(out.max_abs, figures.max_abs);  // NaN stays
    if (!gradients) continue;
    at::Tensor grad_rows = grad_h.narrow(0, start, count);  // contiguous: whole rows
    at::mm_out(grad_rows, figures.gradient, w);
    // Summed in float32 over the chunks: in place where the products are float32, else through the
    // product's own dtype (a bfloat16 product has no float32 output).
    if (!grad_w.defined()) {
      // a frozen head: no weight gradient
    } else if (options.products == at::kFloat) {
      grad_w.addmm_(figures.gradient.t(), chunk);
    } else {
      grad_w.add_(at::mm(figures.gradient.t(), chunk));
    }
    if (grad_b.defined()) grad_b.add_(figures.gradient.sum({0}, false, at::kFloat));
  }
  if (gradients) {
    out.grad_hidden = grad_h.to(hidden.scalar_type());
    if (grad_w.defined()) out.grad_weight = grad_w.narrow(0, 0, vocab).to(weight.scalar_type());
    if (grad_b.defined()) out.grad_bias = grad_b.narrow(0, 0, vocab).to(bias.scalar_type());
  }
  return out;
}

// The loss as an autograd node whose gradients were made in forward. `bias` is a zero-size tensor when the
// head has none (apply() needs tensors to route gradients).
class ChunkedHeadLossFunction : public torch::autograd::Function<ChunkedHeadLossFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight,
                               const at::Tensor& bias, const at::Tensor& labels,
                               const HeadLossOptions& options,
                               const c10::optional<at::Tensor>& padded_weight) {
    const at::Tensor head_bias = bias.numel() > 0 ? bias : at::Tensor();
    ChunkedPass pass = run_chunks(hidden, weight, head_bias, labels, options, /*gradients=*/true,
                                  padded_weight.value_or(at::Tensor()));
    ctx->saved_data["grad_hidden"] = pass.grad_hidden;
    if (pass.grad_weight.defined()) ctx->saved_data["grad_weight"] = pass.grad_weight;
    if (pass.grad_bias.defined()) ctx->saved_data["grad_bias"] = pass.grad_bias;
    ctx->mark_non_differentiable({pass.max_abs});
    return {pass.sum, pass.max_abs};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor& scale = grads[0];  // () float32: d(result)/d(loss sum)
    if (!scale.defined()) return variable_list(6);
    const auto scaled = [&](const char* name) {
      const at::Tensor g = ctx->saved_data[name].toTensor();
      return g * scale.to(g.scalar_type());
    };
    const at::Tensor grad_bias = ctx->saved_data.count("grad_bias") > 0 ? scaled("grad_bias") : at::Tensor();
    const at::Tensor grad_weight =
        ctx->saved_data.count("grad_weight") > 0 ? scaled("grad_weight") : at::Tensor();
    return {scaled("grad_hidden"), grad_weight, grad_bias, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

HeadLoss chunked_head_loss(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias,
                           const at::Tensor& labels, const HeadLossOptions& options,
                           const at::Tensor& padded_weight) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1),
              "[head_loss] expected hidden (N,D) and weight (V,D), got ", hidden.sizes(), " and ",
              weight.sizes());
  TORCH_CHECK(labels.dim() == 1 && labels.size(0) == hidden.size(0) && labels.scalar_type() == at::kLong,
              "[head_loss] expected int64 labels (N=", hidden.size(0), "), got ", labels.sizes(), " ",
              labels.scalar_type());
  TORCH_CHECK(options.chunk_rows >= 1, "[head_loss] expected chunk_rows >= 1, got ", options.chunk_rows);
  const at::Tensor rows_labels = labels.contiguous();
  const bool wants_gradients =
      at::GradMode::is_enabled() &&
      (hidden.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  HeadLoss out;
  if (wants_gradients) {
    const at::Tensor bias_argument = bias.defined() ? bias : at::empty({0}, weight.options());
    const variable_list result = ChunkedHeadLossFunction::apply(hidden, weight, bias_argument, rows_labels,
                                                                options, optional_tensor(padded_weight));
    out.sum = result[0];
    if (options.max_abs_logit) out.max_abs_logit = result[1];
  } else {
    const ChunkedPass pass =
        run_chunks(hidden, weight, bias, rows_labels, options, /*gradients=*/false, padded_weight);
    out.sum = pass.sum;
    if (options.max_abs_logit) out.max_abs_logit = pass.max_abs;
  }
  return out;
}

int64_t head_loss_chunk_rows(int64_t vocab, int64_t bytes) {
  const int64_t rows = bytes / (std::max<int64_t>(vocab, 1) * static_cast<int64_t>(sizeof(float)));
  return std::max<int64_t>(kHeadRowMultiple, rows / kHeadRowMultiple * kHeadRowMultiple);
}

}  // namespace causal
