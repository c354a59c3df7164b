// Named points of the forward pass where observers registered from outside the model see a value and may
// replace it. The model only calls its hooks; what watches it (health checks, fault injection, ablation,
// probes) is an observer that train/ and review/ register.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace causal {

enum class HookPoint {
  kEmbed,             // (B,T,D) summed input embeddings (and learned positions)
  kHeads,             // (B,Hq,T,dk) one layer's attention output per head, before o_proj
  kAttentionWeights,  // (B,Hq,T,Tk) one layer's softmax probabilities; observing them runs the reference
  kAttention,         // (B,T,D) one layer's attention sub-layer output (after o_proj)
  kFeedForward,       // (B,T,D) one layer's feed-forward sub-layer output
  kBlock,             // (B,T,D) the residual stream after one block
  kFinalNorm,         // (B,T,D) the final norm's output
  kLogits,            // (B,T,V) the head's output, in the parameters' dtype
};

// Where a value was seen: the point and, for per-layer points, the layer.
struct HookSite {
  HookPoint point = HookPoint::kEmbed;
  int64_t layer = -1;  // -1 for embed, final_norm and logits
  // "embed", "blocks.<i>.heads", "blocks.<i>.attn_weights", "blocks.<i>.attn", "blocks.<i>.ffn",
  // "blocks.<i>", "final_norm", "logits": the sub-layer names of docs/model.md.
  std::string name() const;
};

class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  // The points this observer is called at; the model skips the others (and computes attention weights
  // only when an observer watches them).
  virtual bool watches(HookPoint point) const = 0;
  // Sees `value` at `site`; returns what the forward continues with (`value` itself to only watch).
  virtual at::Tensor observe(const HookSite& site, const at::Tensor& value) = 0;
};

// The observers of one model. Observers are called in registration order; an unwatched point costs one
// bit test.
class ForwardHooks {
 public:
  // Removes its observer when destroyed; observers must outlive their registration.
  class Registration {
   public:
    Registration(ForwardHooks& hooks, ForwardObserver& observer);
    ~Registration();
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;

   private:
    ForwardHooks& hooks_;
    ForwardObserver& observer_;
  };

  // Hooks without observers, for modules run outside a Transformer.
  static const ForwardHooks& none();

  bool watched(HookPoint point) const { return (watched_ & bit(point)) != 0; }
  bool any_watched() const { return watched_ != 0; }
  at::Tensor at(HookPoint point, int64_t layer, const at::Tensor& value) const {
    return watched(point) ? call(HookSite{point, layer}, value) : value;
  }

 private:
  static uint32_t bit(HookPoint point) { return 1u << static_cast<uint32_t>(point); }
  at::Tensor call(const HookSite& site, const at::Tensor& value) const;
  void add(ForwardObserver& observer);
  void remove(ForwardObserver& observer);
  void update_watched();

  std::vector<ForwardObserver*> observers_;
  uint32_t watched_ = 0;
};

}  // namespace causal
