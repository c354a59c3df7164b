// Element bytes of tensors: casts through LibTorch (the rounding every consumer also uses), quantized blocks
// through io/gguf_quants (gguf-py's arithmetic, to the bit).
#include "interop/tensor_bytes.h"

#include <ATen/ATen.h>

#include <cstring>

#include "core/errors.h"
#include "core/shape_text.h"
#include "io/gguf_quants.h"

namespace causal {

at::ScalarType scalar_type_of(GgufTensorType type) {
  switch (type) {
    case GgufTensorType::kF32:
      return at::kFloat;
    case GgufTensorType::kF16:
      return at::kHalf;
    case GgufTensorType::kBf16:
      return at::kBFloat16;
    default:
      throw UsageError(
          "[interop] " + gguf_type_name(static_cast<uint32_t>(type)) +
          " is a GGUF block format, not a tensor dtype: only GGUF files hold it (f32, f16 or bf16 "
          "elsewhere)");
  }
}

std::string tensor_bytes(const at::Tensor& tensor, GgufTensorType type) {
  if (type == GgufTensorType::kQ8_0) {
    if (tensor.dim() != 2 || tensor.size(1) % 32 != 0)
      throw UsageError("[interop] Q8_0 needs a matrix whose rows are whole 32-element blocks, got " +
                       shape_text(tensor.sizes().vec()));
    const at::Tensor values = tensor.to(at::kCPU).to(at::kFloat).contiguous();
    return gguf_quantize_q8_0(values.data_ptr<float>(), values.numel());
  }
  const at::Tensor cast = tensor.to(at::kCPU).to(scalar_type_of(type)).contiguous();
  std::string bytes(static_cast<size_t>(cast.numel() * cast.element_size()), '\0');
  if (!bytes.empty()) std::memcpy(bytes.data(), cast.data_ptr(), bytes.size());
  return bytes;
}

at::Tensor tensor_from_bytes(const std::string& bytes, const std::vector<int64_t>& shape,
                             GgufTensorType type) {
  const int64_t needed = gguf_tensor_bytes(type, shape);
  if (needed != static_cast<int64_t>(bytes.size()))
    throw DataError("[interop] " + gguf_type_name(static_cast<uint32_t>(type)) + " tensor data of " +
                    std::to_string(bytes.size()) + " bytes does not fit its shape " + shape_text(shape) +
                    " (" + std::to_string(needed) + " bytes)");
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(at::kFloat));
  gguf_dequantize(type, reinterpret_cast<const uint8_t*>(bytes.data()), out.numel(), out.data_ptr<float>());
  return out;
}

GgufTensorType gguf_storage_type(const at::Tensor& tensor, GgufTensorType requested) {
  if (tensor.dim() == 1) return GgufTensorType::kF32;
  if (requested == GgufTensorType::kQ8_0 && (tensor.dim() != 2 || tensor.size(1) % 32 != 0))
    return GgufTensorType::kF16;
  return requested;
}

GgufTensorType parse_export_dtype(const std::string& dtype) {
  if (dtype == "f32") return GgufTensorType::kF32;
  if (dtype == "f16") return GgufTensorType::kF16;
  if (dtype == "bf16") return GgufTensorType::kBf16;
  if (dtype == "q8_0") return GgufTensorType::kQ8_0;
  throw UsageError("--dtype " + dtype + ": expected f32, f16, bf16 or q8_0 (GGUF only)");
}

}  // namespace causal
