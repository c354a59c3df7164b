// libFuzzer harness: ggml's block decoders (io/gguf_quants) on any bytes, and the Q8_0 encoder on any
// floats. The first byte picks the type (one of those read_gguf accepts) or the encoder (modulo 14: 0..12
// the types in kTypes' order, 13 the encoder); the rest are whole blocks (a trailing partial block is
// dropped, as read_gguf never hands one out) or float32 values.
#include <cmath>
#include <cstring>
#include <vector>

#include "fuzz_support.h"
#include "io/gguf_file.h"
#include "io/gguf_quants.h"

using namespace causal;

namespace {

constexpr GgufTensorType kTypes[] = {GgufTensorType::kF32,  GgufTensorType::kF16,  GgufTensorType::kBf16,
                                     GgufTensorType::kQ4_0, GgufTensorType::kQ4_1, GgufTensorType::kQ5_0,
                                     GgufTensorType::kQ5_1, GgufTensorType::kQ8_0, GgufTensorType::kQ2_K,
                                     GgufTensorType::kQ3_K, GgufTensorType::kQ4_K, GgufTensorType::kQ5_K,
                                     GgufTensorType::kQ6_K};
constexpr size_t kTypeCount = sizeof(kTypes) / sizeof(kTypes[0]);

uint16_t u16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Byte offsets of a block's float16 scales (d, and m or dmin), as io/gguf_quants.h lays the blocks out.
std::vector<int> scale_offsets(GgufTensorType type) {
  switch (type) {
    case GgufTensorType::kQ4_1:
    case GgufTensorType::kQ5_1:
    case GgufTensorType::kQ4_K:
    case GgufTensorType::kQ5_K:
      return {0, 2};
    case GgufTensorType::kQ2_K:
      return {80, 82};
    case GgufTensorType::kQ3_K:
      return {108};
    case GgufTensorType::kQ6_K:
      return {208};
    default:
      return {0};
  }
}

void decode(GgufTensorType type, const uint8_t* data, size_t size) {
  const GgufBlockSize block = gguf_block_size(type);
  const int64_t blocks = static_cast<int64_t>(size) / block.bytes;
  const int64_t n = blocks * block.elements;
  std::vector<float> out(static_cast<size_t>(n));
  gguf_dequantize(type, data, n, out.data());
  if (block.elements == 1) {
    // Unquantized: each float16/bfloat16 widens exactly, so narrowing gives the input back.
    for (int64_t i = 0; i < n && type == GgufTensorType::kF16; ++i)
      if (!std::isnan(out[i]))
        fuzz::require(gguf_f32_to_f16(out[i]) == u16_at(data + 2 * i), "f16 round trip");
    return;
  }
  // With finite scales every value is finite (|d x scale x q| stays far below float32's range); a value
  // read from outside its block would not keep to that.
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* src = data + b * block.bytes;
    bool finite = true;
    for (int at : scale_offsets(type)) finite = finite && std::isfinite(gguf_f16_to_f32(u16_at(src + at)));
    if (!finite) continue;
    for (int64_t i = 0; i < block.elements; ++i)
      fuzz::require(std::isfinite(out[static_cast<size_t>(b * block.elements + i)]),
                    "finite scales, finite values");
  }
}

void encode(const uint8_t* data, size_t size) {
  const int64_t n = static_cast<int64_t>(size / 4) / 32 * 32;
  std::vector<float> x(static_cast<size_t>(n));
  if (n > 0) std::memcpy(x.data(), data, static_cast<size_t>(n) * 4);
  for (float& v : x)
    if (!std::isfinite(v)) v = 0.0f;  // non-finite values are refused (a DataError), tested in tests/io
  const std::string q = gguf_quantize_q8_0(x.data(), n);
  fuzz::require(q.size() == static_cast<size_t>(n / 32 * 34), "34 bytes per 32 values");
  std::vector<float> back(static_cast<size_t>(n));
  gguf_dequantize(GgufTensorType::kQ8_0, reinterpret_cast<const uint8_t*>(q.data()), n, back.data());
  for (int64_t i = 0; i < n; ++i) {
    const float d = gguf_f16_to_f32(u16_at(reinterpret_cast<const uint8_t*>(q.data()) + i / 32 * 34));
    const int8_t quant = static_cast<int8_t>(q[static_cast<size_t>(i / 32 * 34 + 2 + i % 32)]);
    fuzz::require(quant >= -127, "Q8_0 quants stay within -127..127");
    // Within half a step plus the step's own float16 rounding, where the step is a normal float16.
    if (std::isfinite(d) && d >= 0x1p-14f)
      fuzz::require(std::fabs(back[i] - x[i]) <= 0.57f * d, "Q8_0 values within half a step");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t pick = data[0] % (kTypeCount + 1);
  if (pick < kTypeCount) {
    decode(kTypes[pick], data + 1, size - 1);
  } else {
    encode(data + 1, size - 1);
  }
  return 0;
}
