// A product's weight kept in the dtype autocast runs the products in, between forwards: autocast would cast
// the float32 weight again in every forward, and the stacked q/k/v and the GPU's padded head would be
// stacked and padded again too (docs/model.md#weight-shadows).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Optional.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "config/enums.h"

namespace causal {

// The dtype a shadow of `master` is kept in: `products` (the dtype autocast runs this forward's products in)
// for a float32 master, with mode "on", or "auto" on a GPU; nullopt when the products take the master itself.
c10::optional<c10::ScalarType> shadow_dtype(WeightShadows mode, c10::optional<c10::ScalarType> products,
                                            const at::Tensor& master);

// One product's weight: the rows of its float32 masters stacked in order (one master, or q, k and v) and
// padded with zero rows up to `rows`, in the shadow's dtype. The copy is made again only when a master has
// moved (its storage) or changed (its version counter, which every in-place write bumps) since it was
// made. Its values are the masters' cast as autocast casts them, so products read the same numbers.
class WeightShadow {
 public:
  // The copy, fresh, without autograd: for a product whose own backward returns the masters' gradients.
  // `rows` 0: the masters' rows, unpadded.
  const at::Tensor& copy(const std::vector<at::Tensor>& masters, c10::ScalarType dtype, int64_t rows = 0);
  // The fresh copy as the output of an autograd node whose backward gives each master its rows of the
  // gradient in the master's dtype: what autocast's cast (and the stacking and padding) would give it.
  at::Tensor weight(const std::vector<at::Tensor>& masters, c10::ScalarType dtype, int64_t rows = 0);

 private:
  at::Tensor copy_;
  std::vector<std::pair<const void*, int64_t>> made_from_;  // each master's data and version at the copy
};

}  // namespace causal
