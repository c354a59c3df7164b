// Element bytes of tensors, through LibTorch's casts (the rounding every consumer also uses).
#include "interop/tensor_bytes.h"

#include <ATen/ATen.h>

#include <cstring>

#include "core/errors.h"

namespace causal {
at::ScalarType scalar_type_of(GgufTensorType type) {
  switch (type) {
    case GgufTensorType::kF16:
      return at::kHalf;
    case GgufTensorType::kBf16:
      return at::kBFloat16;
    default:
      return at::kFloat;
  }
}

std::string tensor_bytes(const at::Tensor& tensor, GgufTensorType type) {
  const at::Tensor cast = tensor.to(at::kCPU).to(scalar_type_of(type)).contiguous();
  std::string bytes(static_cast<size_t>(cast.numel() * cast.element_size()), '\0');
  if (!bytes.empty()) std::memcpy(bytes.data(), cast.data_ptr(), bytes.size());
  return bytes;
}

at::Tensor tensor_from_bytes(const std::string& bytes, const std::vector<int64_t>& shape,
                             GgufTensorType type) {
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(scalar_type_of(type)));
  if (static_cast<size_t>(out.numel() * out.element_size()) != bytes.size())
    throw DataError("[interop] tensor data of " + std::to_string(bytes.size()) +
                    " bytes does not fit its shape");
  if (!bytes.empty()) std::memcpy(out.data_ptr(), bytes.data(), bytes.size());
  return out.to(at::kFloat);
}

GgufTensorType parse_export_dtype(const std::string& dtype) {
  if (dtype == "f32") return GgufTensorType::kF32;
  if (dtype == "f16") return GgufTensorType::kF16;
  if (dtype == "bf16") return GgufTensorType::kBf16;
  throw UsageError("--dtype " + dtype + ": expected f32, f16 or bf16");
}

}  // namespace causal
