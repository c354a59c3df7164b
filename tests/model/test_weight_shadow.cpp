// model/weight_shadow.h: a shadow is its masters stacked, padded and cast as autocast casts them; it is made
// again exactly when a master changed; its backward gives each master what autocast's cast would.
#include <torch/torch.h>
// Torch first: its glog macros must not replace Catch's.
#include <catch2/catch.hpp>

#include "model/weight_shadow.h"

using namespace causal;

namespace {

// q, k and v weights of 4 columns: 6, 2 and 2 rows.
std::vector<torch::Tensor> qkv_masters(bool requires_grad) {
  torch::manual_seed(5);
  std::vector<torch::Tensor> out;
  for (const int64_t rows : {6, 2, 2}) out.push_back(torch::randn({rows, 4}).requires_grad_(requires_grad));
  return out;
}

// The composition a shadow stands for: the masters stacked, padded with zero rows to `rows`, cast.
torch::Tensor stacked_cast(const std::vector<torch::Tensor>& masters, int64_t rows) {
  const torch::Tensor stacked = torch::cat(masters);
  return torch::constant_pad_nd(stacked, {0, 0, 0, rows - stacked.size(0)}).to(torch::kBFloat16);
}

}  // namespace

CATCH_TEST_CASE("weight shadow: the masters stacked, padded with zero rows and cast", "[unit][model]") {
  const std::vector<torch::Tensor> masters = qkv_masters(false);
  WeightShadow shadow;
  const torch::Tensor copy = shadow.copy(masters, torch::kBFloat16, 16);
  CATCH_CHECK(copy.sizes() == torch::IntArrayRef({16, 4}));
  CATCH_CHECK(copy.scalar_type() == torch::kBFloat16);
  CATCH_CHECK(torch::equal(copy, stacked_cast(masters, 16)));
  WeightShadow unpadded;
  CATCH_CHECK(torch::equal(unpadded.copy(masters, torch::kBFloat16), stacked_cast(masters, 10)));
}

CATCH_TEST_CASE("weight shadow: made again exactly when a master changed or moved", "[unit][model]") {
  std::vector<torch::Tensor> masters = qkv_masters(true);
  WeightShadow shadow;
  const torch::Tensor first = shadow.copy(masters, torch::kBFloat16, 16);
  const int64_t version = first._version();
  // Unchanged masters: the same storage, not written again.
  const torch::Tensor again = shadow.copy(masters, torch::kBFloat16, 16);
  CATCH_CHECK(again.data_ptr() == first.data_ptr());
  CATCH_CHECK(again._version() == version);
  {
    torch::NoGradGuard no_grad;
    masters[1].add_(1.0);  // an in-place write bumps the version
  }
  const torch::Tensor after_write = shadow.copy(masters, torch::kBFloat16, 16);
  CATCH_CHECK(after_write.data_ptr() == first.data_ptr());  // rewritten in place
  CATCH_CHECK(torch::equal(after_write, stacked_cast(masters, 16)));
  // New storage under the same parameter (an optimizer's re-layout, a load).
  masters[2].set_data(torch::full({2, 4}, 3.0));
  CATCH_CHECK(torch::equal(shadow.copy(masters, torch::kBFloat16, 16), stacked_cast(masters, 16)));
}

CATCH_TEST_CASE("weight shadow: gradients reach the masters as autocast's cast gives them, bit for bit",
                "[unit][model]") {
  const std::vector<torch::Tensor> masters = qkv_masters(true);
  torch::manual_seed(6);
  const torch::Tensor x = torch::randn({5, 4}).to(torch::kBFloat16);
  const torch::Tensor weights = torch::randn({5, 16});
  const auto loss = [&](const torch::Tensor& w) {
    return (torch::linear(x, w).to(torch::kFloat) * weights).sum();
  };
  WeightShadow shadow;
  const torch::Tensor through_shadow = loss(shadow.weight(masters, torch::kBFloat16, 16));
  std::vector<torch::Tensor> shadow_grads = torch::autograd::grad({through_shadow}, masters);
  const torch::Tensor through_cast = loss(stacked_cast(masters, 16));
  std::vector<torch::Tensor> cast_grads = torch::autograd::grad({through_cast}, masters);
  CATCH_CHECK(torch::equal(through_shadow, through_cast));
  for (size_t i = 0; i < masters.size(); ++i) {
    CATCH_CHECK(shadow_grads[i].scalar_type() == torch::kFloat);
    CATCH_CHECK(torch::equal(shadow_grads[i], cast_grads[i]));
  }
}

CATCH_TEST_CASE("weight shadow: kept for float32 masters under autocast, as model.weight_shadows says",
                "[unit][model]") {
  const torch::Tensor master = torch::zeros({2, 2});
  const c10::optional<c10::ScalarType> bf16 = torch::kBFloat16;
  CATCH_CHECK(shadow_dtype(WeightShadows::kOn, bf16, master) == bf16);
  CATCH_CHECK(!shadow_dtype(WeightShadows::kAuto, bf16, master));  // "auto": on a GPU only
  CATCH_CHECK(!shadow_dtype(WeightShadows::kOff, bf16, master));
  CATCH_CHECK(!shadow_dtype(WeightShadows::kOn, c10::nullopt, master));  // no autocast
  CATCH_CHECK(!shadow_dtype(WeightShadows::kOn, bf16, master.to(torch::kDouble)));
}
