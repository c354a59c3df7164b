// Hook points of the forward pass (see forward_hooks.h).
#include "model/forward_hooks.h"

#include <c10/util/Exception.h>

#include <algorithm>

namespace causal {

std::string HookSite::name() const {
  const std::string block = "blocks." + std::to_string(layer);
  switch (point) {
    case HookPoint::kEmbed:
      return "embed";
    case HookPoint::kHeads:
      return block + ".heads";
    case HookPoint::kAttentionWeights:
      return block + ".attn_weights";
    case HookPoint::kAttention:
      return block + ".attn";
    case HookPoint::kFeedForward:
      return block + ".ffn";
    case HookPoint::kBlock:
      return block;
    case HookPoint::kFinalNorm:
      return "final_norm";
    case HookPoint::kLogits:
      return "logits";
  }
  return "?";
}

const ForwardHooks& ForwardHooks::none() {
  static const ForwardHooks hooks;
  return hooks;
}

ForwardHooks::Registration::Registration(ForwardHooks& hooks, ForwardObserver& observer)
    : hooks_(hooks), observer_(observer) {
  hooks_.add(observer_);
}

ForwardHooks::Registration::~Registration() { hooks_.remove(observer_); }

void ForwardHooks::add(ForwardObserver& observer) {
  TORCH_CHECK(std::find(observers_.begin(), observers_.end(), &observer) == observers_.end(),
              "[hooks] observer registered twice");
  observers_.push_back(&observer);
  update_watched();
}

void ForwardHooks::remove(ForwardObserver& observer) {
  observers_.erase(std::remove(observers_.begin(), observers_.end(), &observer), observers_.end());
  update_watched();
}

void ForwardHooks::update_watched() {
  watched_ = 0;
  for (ForwardObserver* o : observers_)
    for (uint32_t p = 0; p <= static_cast<uint32_t>(HookPoint::kLogits); ++p)
      if (o->watches(static_cast<HookPoint>(p))) watched_ |= bit(static_cast<HookPoint>(p));
}

at::Tensor ForwardHooks::call(const HookSite& site, const at::Tensor& value) const {
  at::Tensor current = value;
  for (ForwardObserver* observer : observers_)
    if (observer->watches(site.point)) current = observer->observe(site, current);
  return current;
}

}  // namespace causal
