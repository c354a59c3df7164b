// Frozen weights held in bfloat16 or ggml's blocks, and their tiled product (see frozen_weight.h).
#include "model/frozen_weight.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>

#include "io/gguf_quants.h"

namespace causal {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

GgufTensorType block_type(BaseDtype dtype) {
  switch (dtype) {
    case BaseDtype::kQ8_0:
      return GgufTensorType::kQ8_0;
    case BaseDtype::kQ4_0:
      return GgufTensorType::kQ4_0;
    case BaseDtype::kQ4_1:
      return GgufTensorType::kQ4_1;
    case BaseDtype::kQ4_K:
      return GgufTensorType::kQ4_K;
    default:
      break;
  }
  TORCH_CHECK(false, "[frozen_weight] ", to_string(dtype), " is no block type");
  return GgufTensorType::kF32;
}

bool quantized(BaseDtype dtype) { return dtype != BaseDtype::kF32 && dtype != BaseDtype::kBf16; }

// Rows [start, start + tile.size(0)) of the held weight written into `tile` (rows, in) float32.
void dequantize_into(const at::Tensor& tile, const at::Tensor& storage, BaseDtype dtype, int64_t in,
                     int64_t start) {
  const int64_t count = tile.size(0);
  if (!quantized(dtype)) {
    tile.copy_(storage.narrow(0, start, count));
    return;
  }
  TORCH_CHECK(storage.is_cpu(), "[frozen_weight] ", to_string(dtype),
              " blocks are dequantized by the CPU; on a GPU train.lora.base_dtype takes \"bf16\" or \"f32\"");
  TORCH_CHECK(storage.is_contiguous(), "[frozen_weight] expected contiguous blocks");
  const GgufTensorType type = block_type(dtype);
  const int64_t row_bytes = storage.size(1);
  const uint8_t* data = storage.data_ptr<uint8_t>() + start * row_bytes;
  float* out = tile.data_ptr<float>();
  // A few rows per task: a row of 512 values decodes in about a microsecond.
  at::parallel_for(0, count, 16, [&](int64_t begin, int64_t end) {
    gguf_dequantize(type, data + begin * row_bytes, (end - begin) * in, out + begin * in);
  });
}

// The tiles of the product, each (rows, in) in the products' dtype `compute`, one buffer reused.
template <class Use>
void for_each_tile(const at::Tensor& storage, BaseDtype dtype, int64_t in, c10::ScalarType compute,
                   const Use& use) {
  const int64_t out_rows = storage.size(0);
  const at::Tensor buffer =
      at::empty({std::min(kFrozenTileRows, out_rows), in}, storage.options().dtype(at::kFloat));
  for (int64_t start = 0; start < out_rows; start += kFrozenTileRows) {
    const int64_t count = std::min(kFrozenTileRows, out_rows - start);
    const at::Tensor tile = buffer.narrow(0, 0, count);
    dequantize_into(tile, storage, dtype, in, start);
    use(start, count, compute == at::kFloat ? tile : tile.to(compute));
  }
}

// y = x W^T a tile of W's rows (y's columns) at a time; backward dx = dy W, summed over the tiles in
// float32. Nothing is kept for backward but the storage, which the module holds anyway.
class FrozenProductFunction : public torch::autograd::Function<FrozenProductFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& storage,
                            BaseDtype dtype, int64_t in) {
    ctx->saved_data["storage"] = storage;
    ctx->saved_data["dtype"] = static_cast<int64_t>(dtype);
    ctx->saved_data["in"] = in;
    ctx->saved_data["sizes"] = x.sizes().vec();
    const at::Tensor x2 = x.reshape({-1, in}).contiguous();  // (N,in)
    at::Tensor y = at::empty({x2.size(0), storage.size(0)}, x2.options());
    for_each_tile(
        storage, dtype, in, x2.scalar_type(), [&](int64_t start, int64_t count, const at::Tensor& w) {
          at::Tensor columns = y.narrow(1, start, count);  // (N,rows): a strided view, written in place
          at::mm_out(columns, x2, w.t());
        });
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes.back() = storage.size(0);
    return y.view(sizes);  // (...,out)
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor storage = ctx->saved_data["storage"].toTensor();
    const auto dtype = static_cast<BaseDtype>(ctx->saved_data["dtype"].toInt());
    const int64_t in = ctx->saved_data["in"].toInt();
    const std::vector<int64_t> sizes = ctx->saved_data["sizes"].toIntVector();
    const at::Tensor dy = grads[0].reshape({-1, storage.size(0)}).contiguous();  // (N,out)
    at::Tensor dx = at::zeros({dy.size(0), in}, dy.options().dtype(at::kFloat));
    for_each_tile(storage, dtype, in, dy.scalar_type(),
                  [&](int64_t start, int64_t count, const at::Tensor& w) {
                    const at::Tensor rows = dy.narrow(1, start, count);  // (N,rows)
                    if (dy.scalar_type() == at::kFloat) {
                      dx.addmm_(rows, w);
                    } else {
                      dx.add_(at::mm(rows, w));  // a bfloat16 product has no float32 output
                    }
                  });
    return {dx.to(dy.scalar_type()).view(sizes), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor frozen_storage(const at::Tensor& weight, BaseDtype dtype) {
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == at::kFloat,
              "[frozen_weight] expected a float32 (out,in) weight, got ", weight.sizes(), " ",
              weight.scalar_type());
  if (dtype == BaseDtype::kF32) return weight;
  torch::NoGradGuard no_grad;
  if (dtype == BaseDtype::kBf16) return weight.detach().to(at::kBFloat16).contiguous();
  TORCH_CHECK(
      weight.is_cpu(), "[frozen_weight] ", to_string(dtype),
      " blocks are made and read by the CPU; on a GPU train.lora.base_dtype takes \"bf16\" or \"f32\"");
  const GgufTensorType type = block_type(dtype);
  const GgufBlockSize block = gguf_block_size(type);
  const int64_t out = weight.size(0), in = weight.size(1);
  TORCH_CHECK(in % block.elements == 0, "[frozen_weight] ", to_string(dtype), " holds rows of whole ",
              block.elements, "-element blocks; this weight's rows have ", in, " values");
  const at::Tensor w = weight.detach().contiguous();
  const int64_t row_bytes = in / block.elements * block.bytes;
  at::Tensor storage = at::empty({out, row_bytes}, w.options().dtype(at::kByte));
  const float* from = w.data_ptr<float>();
  uint8_t* to = storage.data_ptr<uint8_t>();
  at::parallel_for(0, out, 16, [&](int64_t begin, int64_t end) {
    const std::string bytes = gguf_quantize(type, from + begin * in, (end - begin) * in);
    std::memcpy(to + begin * row_bytes, bytes.data(), bytes.size());
  });
  return storage;
}

at::Tensor frozen_rows(const at::Tensor& storage, BaseDtype dtype, int64_t in, int64_t start, int64_t count) {
  const at::Tensor out = at::empty({count, in}, storage.options().dtype(at::kFloat));
  dequantize_into(out, storage, dtype, in, start);
  return out;
}

at::Tensor frozen_dense(const at::Tensor& storage, BaseDtype dtype, int64_t in) {
  return frozen_rows(storage, dtype, in, 0, storage.size(0));
}

at::Tensor frozen_product(const at::Tensor& x, const at::Tensor& storage, BaseDtype dtype, int64_t in) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == in, "[frozen_weight] expected x (...,", in, "), got ", x.sizes());
  // A weight already in the products' dtype needs no tile: the plain product, which autograd knows.
  if (dtype == BaseDtype::kF32 || (dtype == BaseDtype::kBf16 && x.scalar_type() == at::kBFloat16))
    return at::linear(x, storage);
  return FrozenProductFunction::apply(x, storage, dtype, in);
}

}  // namespace causal
