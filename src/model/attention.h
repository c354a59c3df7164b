// Multi-head causal self-attention module: projections, optional qk-norm, RoPE, KV cache, kernel choice.
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "config/enums.h"
#include "model/attention_kernels.h"
#include "model/forward_hooks.h"
#include "model/linear.h"
#include "model/mask.h"
#include "model/norm.h"
#include "model/rope.h"
#include "model/weight_shadow.h"

namespace causal {

class KVCache;

struct AttentionOptions {
  AttentionOptions(int64_t d_model, int64_t n_heads, int64_t n_kv_heads)
      : d_model_(d_model), n_heads_(n_heads), n_kv_heads_(n_kv_heads) {}
  TORCH_ARG(int64_t, d_model);                                   // D = n_heads * dk
  TORCH_ARG(int64_t, n_heads);                                   // Hq
  TORCH_ARG(int64_t, n_kv_heads);                                // Hkv, divides Hq (GQA; 1 = MQA)
  TORCH_ARG(bool, bias) = true;                                  // biases in the four projections
  TORCH_ARG(bool, qkv_bias) = false;                             // biases in q/k/v_proj even without bias
  TORCH_ARG(bool, qk_norm) = false;                              // RMSNorm over dk on q and k, per head
  TORCH_ARG(double, norm_eps) = 1e-5;                            // eps of the qk norms
  TORCH_ARG(AttentionKind, kernel) = AttentionKind::kReference;  // attention_kernel(kind)
  TORCH_ARG(int64_t, block) = 64;                                // keys per block of the "flash" kernel
  TORCH_ARG(double, dropout) = 0.0;        // on attention weights, train mode only ("flash": must be 0)
  TORCH_ARG(double, init_std) = 0.02;      // std of q/k/v_proj weights
  TORCH_ARG(double, out_init_std) = 0.02;  // std of o_proj weights
  TORCH_ARG(WeightShadows, weight_shadows) = WeightShadows::kOff;  // model.weight_shadows
};

// Everything one layer's attention needs besides its input; built once per forward by the Transformer.
struct AttentionContext {
  AttentionMask mask;  // Tq new queries against Tk keys (cached ones included); undefined = every key
  RopeTables rope;     // tables for the new tokens' absolute positions; undefined = no RoPE
  RopePairing pairing = RopePairing::kInterleaved;
  KVCache* cache = nullptr;  // append this layer's K/V here and attend over all cached keys
  int64_t layer = 0;         // this layer's index (cache, hook sites)
  const ForwardHooks* hooks = &ForwardHooks::none();  // the model's observers
};

// Parameters, in forward order: q_proj, k_proj, v_proj, [q_norm, k_norm], o_proj. q/k/v_proj have biases
// when bias or qkv_bias (Qwen2's layout), o_proj only when bias.
class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const AttentionOptions& options);
  // x (B,T,D) -> (B,T,D).
  torch::Tensor forward(const torch::Tensor& x, const AttentionContext& context);
  // normal(0, init_std) q/k/v weights, normal(0, out_init_std) o_proj weight, zero biases, unit qk norms.
  void reset_parameters();
  const AttentionOptions& options() const { return options_; }
  int64_t head_dim() const { return options_.d_model() / options_.n_heads(); }
  // Brings the weight shadows up to date for products in `products` (the forward's autocast dtype) now, not
  // in the next forward (a CUDA graph's replay runs no host code).
  void refresh_shadows(c10::optional<c10::ScalarType> products);

 private:
  AttentionOptions options_;
  Linear q_proj_{nullptr};                         // D -> Hq*dk
  Linear k_proj_{nullptr};                         // D -> Hkv*dk
  Linear v_proj_{nullptr};                         // D -> Hkv*dk
  Norm q_norm_{nullptr};                           // (dk) RMSNorm, only with qk_norm
  Norm k_norm_{nullptr};                           // (dk) RMSNorm, only with qk_norm
  Linear o_proj_{nullptr};                         // Hq*dk -> D
  std::vector<Linear> qkv_layers() const;          // q_proj, k_proj and v_proj, in that order
  std::vector<torch::Tensor> qkv_weights() const;  // their weights
  WeightShadow qkv_shadow_;                        // qkv_weights() stacked: one product for the three
};
TORCH_MODULE(Attention);

}  // namespace causal
