// Multi-head causal self-attention module (see attention.h).
#include "model/attention.h"

#include <torch/torch.h>

#include <algorithm>

#include "model/autocast_scope.h"
#include "model/gpu_products.h"
#include "model/kv_cache.h"
#include "model/weight_init.h"

namespace causal {

AttentionImpl::AttentionImpl(const AttentionOptions& options) : options_(options) {
  const int64_t d = options_.d_model();
  const int64_t hq = options_.n_heads();
  const int64_t hkv = options_.n_kv_heads();
  TORCH_CHECK(hq > 0 && d % hq == 0, "[attention] expected d_model divisible by n_heads, got d_model=", d,
              " n_heads=", hq);
  TORCH_CHECK(hkv > 0 && hq % hkv == 0,
              "[attention] expected n_heads divisible by n_kv_heads, got n_heads=", hq, " n_kv_heads=", hkv,
              " (hint: resolve the config so that n_kv_heads 0 becomes n_heads)");
  const int64_t dk = d / hq;
  const bool bias = options_.bias(), qkv_bias = bias || options_.qkv_bias();
  const auto linear = [&](int64_t in, int64_t out, bool with_bias) {
    return Linear(LinearOptions(in, out).bias(with_bias).weight_shadows(options_.weight_shadows()));
  };
  q_proj_ = register_module("q_proj", linear(d, hq * dk, qkv_bias));
  k_proj_ = register_module("k_proj", linear(d, hkv * dk, qkv_bias));
  v_proj_ = register_module("v_proj", linear(d, hkv * dk, qkv_bias));
  if (options_.qk_norm()) {
    const NormOptions norm = NormOptions(dk).kind(NormKind::kRmsNorm).eps(options_.norm_eps());
    q_norm_ = register_module("q_norm", Norm(norm));
    k_norm_ = register_module("k_norm", Norm(norm));
  }
  o_proj_ = register_module("o_proj", linear(hq * dk, d, bias));
  reset_parameters();
}

void AttentionImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  for (Linear* layer : {&q_proj_, &k_proj_, &v_proj_, &o_proj_}) {
    const double std = layer == &o_proj_ ? options_.out_init_std() : options_.init_std();
    if (draws_initial_weights()) torch::nn::init::normal_((*layer)->weight, 0.0, std);
    if ((*layer)->bias.defined()) torch::nn::init::zeros_((*layer)->bias);
  }
  for (Norm* norm : {&q_norm_, &k_norm_}) {
    if (!norm->is_empty()) (*norm)->reset_parameters();
  }
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const AttentionContext& context) {
  const int64_t d = options_.d_model();
  TORCH_CHECK(x.dim() == 3 && x.size(2) == d, "[attention] expected x (B,T,D) with D=", d, ", got ",
              x.sizes());
  const int64_t batch = x.size(0);
  const int64_t time = x.size(1);
  const int64_t hq = options_.n_heads();
  const int64_t hkv = options_.n_kv_heads();
  const int64_t dk = head_dim();

  std::vector<Linear> layers = qkv_layers();
  std::vector<torch::Tensor> qkv;
  if (std::any_of(layers.begin(), layers.end(), [](const Linear& l) { return l->held(); })) {
    // A held base (train.lora.base_dtype) has no float32 weights to stack: each product reads its own.
    for (Linear& layer : layers) qkv.push_back(layer->product(x));
  } else {
    const std::vector<torch::Tensor> masters = qkv_weights();
    const c10::optional<c10::ScalarType> shadow =
        shadow_dtype(options_.weight_shadows(), enabled_autocast_dtype(x.device().type()), masters.front());
    qkv = qkv_products(x, masters, {q_proj_->bias, k_proj_->bias, v_proj_->bias},
                       shadow ? qkv_shadow_.weight(masters, *shadow) : torch::Tensor());
  }
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = layers[i]->adapted(x, qkv[i]);
  torch::Tensor q = qkv[0].view({batch, time, hq, dk}).transpose(1, 2);   // (B,Hq,T,dk)
  torch::Tensor k = qkv[1].view({batch, time, hkv, dk}).transpose(1, 2);  // (B,Hkv,T,dk)
  torch::Tensor v = qkv[2].view({batch, time, hkv, dk}).transpose(1, 2);  // (B,Hkv,T,dk)
  if (options_.qk_norm()) {
    q = q_norm_(q);
    k = k_norm_(k);
  }
  if (context.rope.defined()) {
    // Rotated before caching, so cached keys already carry their own absolute positions.
    q = rotate_pairs(q, context.rope, context.pairing);
    k = rotate_pairs(k, context.rope, context.pairing);
  }
  if (context.cache != nullptr) {
    std::tie(k, v) = context.cache->append(context.layer, k, v);  // (B,Hkv,Tcache+T,dk)
  }

  const ForwardHooks& hooks = *context.hooks;
  const bool weights_watched = hooks.watched(HookPoint::kAttentionWeights);
  KernelOptions kernel;
  kernel.dropout_p = is_training() ? options_.dropout() : 0.0;
  kernel.want_weights = weights_watched;
  kernel.block = options_.block();
  // Only the reference returns weights: an observer of them gets the reference's.
  const AttentionResult result = attention_kernel(
      weights_watched ? AttentionKind::kReference : options_.kernel())(q, k, v, context.mask, kernel);
  torch::Tensor out = result.out;  // (B,Hq,T,dk)
  if (weights_watched) hooks.at(HookPoint::kAttentionWeights, context.layer, result.weights);
  out = hooks.at(HookPoint::kHeads, context.layer, out);
  out = out.transpose(1, 2).reshape({batch, time, hq * dk});  // (B,T,D)
  return o_proj_(out);                                        // (B,T,D)
}

std::vector<Linear> AttentionImpl::qkv_layers() const { return {q_proj_, k_proj_, v_proj_}; }

std::vector<torch::Tensor> AttentionImpl::qkv_weights() const {
  return {q_proj_->weight, k_proj_->weight, v_proj_->weight};
}

void AttentionImpl::refresh_shadows(c10::optional<c10::ScalarType> products) {
  const c10::optional<c10::ScalarType> shadow =
      shadow_dtype(options_.weight_shadows(), products, q_proj_->weight);
  if (!shadow) return;
  qkv_shadow_.copy(qkv_weights(), *shadow);
  o_proj_->refresh_shadow(products);
}

}  // namespace causal
