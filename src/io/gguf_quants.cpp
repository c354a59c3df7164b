// Block decoders for ggml's quantized types, and the Q8_0 encoder. Bit-exactness with gguf-py rests on
// doing its float32 operations in its order, each rounded on its own (tests/io/test_gguf_quants.cpp checks
// the bits). Fused multiply-adds cannot change a result here: the products that an addition follows,
// (d * scale) * q and dmin * min, are exact in float32 (a float16 of 11 significant bits times integers of
// at most 6 and 5 bits), so fused or not, only the addition rounds. Hence no FP_CONTRACT pragma (which a
// unity build would carry into the sources after this one): -ffp-contract and -march=native leave the bits
// alone, checked with GCC 12 -O2 -march=native, which does emit FMAs here, and clang 14.
#include "io/gguf_quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/errors.h"

namespace causal {
namespace {

template <class Block>
Block load_block(const uint8_t* src) {
  static_assert(sizeof(Block) % 2 == 0, "ggml blocks have no padding");
  Block b;
  std::memcpy(&b, src, sizeof(Block));
  return b;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The 32-element types: element l and l + 16 share byte qs[l]. `high` holds each element's fifth bit (Q5),
// `offset` is subtracted from the integer quant (8 or 16; 0 where the block has a min).
void decode_32(float d, const uint8_t* qs, uint32_t high, int offset, bool has_min, float m, float* out) {
  for (int l = 0; l < 16; ++l) {
    const int lo = (qs[l] & 0x0F) | static_cast<int>(((high >> l) & 1u) << 4);
    const int hi = (qs[l] >> 4) | static_cast<int>(((high >> (l + 16)) & 1u) << 4);
    const float a = d * static_cast<float>(lo - offset);
    const float b = d * static_cast<float>(hi - offset);
    out[l] = has_min ? a + m : a;
    out[l + 16] = has_min ? b + m : b;
  }
}

void decode_q2_k(const uint8_t* src, float* out) {
  const auto b = load_block<BlockQ2_K>(src);
  const float d = gguf_f16_to_f32(b.d);
  const float dmin = gguf_f16_to_f32(b.dmin);
  for (int h = 0; h < 2; ++h) {
    for (int s = 0; s < 4; ++s) {
      for (int half = 0; half < 2; ++half) {  // 32 elements are two sub-blocks of 16
        const int j = 8 * h + 2 * s + half;
        const float dl = d * static_cast<float>(b.scales[j] & 0x0F);
        const float ml = dmin * static_cast<float>(b.scales[j] >> 4);
        float* o = out + 16 * j;
        for (int l = 0; l < 16; ++l) {
          const int q = (b.qs[32 * h + 16 * half + l] >> (2 * s)) & 3;
          const float p = dl * static_cast<float>(q);
          o[l] = p - ml;
        }
      }
    }
  }
}

void decode_q3_k(const uint8_t* src, float* out) {
  const auto b = load_block<BlockQ3_K>(src);
  const float d = gguf_f16_to_f32(b.d);
  float dl[16];
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? (b.scales[j] & 0x0F) : (b.scales[j - 8] >> 4);
    const int high = (b.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    dl[j] = d * static_cast<float>((low | (high << 4)) - 32);
  }
  for (int h = 0; h < 2; ++h) {
    for (int s = 0; s < 4; ++s) {
      for (int l = 0; l < 32; ++l) {
        const int e = 128 * h + 32 * s + l;
        const int low2 = (b.qs[32 * h + l] >> (2 * s)) & 3;
        const int set = (b.hmask[l] >> (e / 32)) & 1;
        out[e] = dl[e / 16] * static_cast<float>(low2 - (set ? 0 : 4));
      }
    }
  }
}

// Q4_K and Q5_K's 6-bit scale and min of sub-block j from their 12 packed bytes.
void scale_min_k4(const uint8_t* scales, int j, int* sc, int* mn) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *mn = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4);
    *mn = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Q4_K without `qh`, Q5_K with it.
void decode_k4(float d, float dmin, const uint8_t* scales, const uint8_t* qs, const uint8_t* qh, float* out) {
  for (int j = 0; j < 8; ++j) {
    int sc, mn;
    scale_min_k4(scales, j, &sc, &mn);
    const float dj = d * static_cast<float>(sc);
    const float mj = dmin * static_cast<float>(mn);
    const uint8_t* q = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    float* o = out + 32 * j;
    for (int l = 0; l < 32; ++l) {
      int v = (q[l] >> shift) & 0x0F;
      if (qh != nullptr) v |= ((qh[l] >> j) & 1) << 4;
      const float p = dj * static_cast<float>(v);
      o[l] = p - mj;
    }
  }
}

void decode_q6_k(const uint8_t* src, float* out) {
  const auto b = load_block<BlockQ6_K>(src);
  const float d = gguf_f16_to_f32(b.d);
  float dl[16];
  for (int j = 0; j < 16; ++j) dl[j] = d * static_cast<float>(b.scales[j]);
  for (int h = 0; h < 2; ++h) {
    for (int e = 0; e < 128; ++e) {  // element 128h + e
      const int low4 = (b.ql[64 * h + e % 64] >> (4 * (e / 64))) & 0x0F;
      const int high2 = (b.qh[32 * h + e % 32] >> (2 * (e / 32))) & 3;
      out[128 * h + e] = dl[(128 * h + e) / 16] * static_cast<float>((low4 | (high2 << 4)) - 32);
    }
  }
}

void decode_block(GgufTensorType type, const uint8_t* src, float* out) {
  switch (type) {
    case GgufTensorType::kQ4_0: {
      const auto b = load_block<BlockQ4_0>(src);
      return decode_32(gguf_f16_to_f32(b.d), b.qs, 0, 8, false, 0.0f, out);
    }
    case GgufTensorType::kQ4_1: {
      const auto b = load_block<BlockQ4_1>(src);
      return decode_32(gguf_f16_to_f32(b.d), b.qs, 0, 0, true, gguf_f16_to_f32(b.m), out);
    }
    case GgufTensorType::kQ5_0: {
      const auto b = load_block<BlockQ5_0>(src);
      uint32_t qh;
      std::memcpy(&qh, b.qh, 4);
      return decode_32(gguf_f16_to_f32(b.d), b.qs, qh, 16, false, 0.0f, out);
    }
    case GgufTensorType::kQ5_1: {
      const auto b = load_block<BlockQ5_1>(src);
      uint32_t qh;
      std::memcpy(&qh, b.qh, 4);
      return decode_32(gguf_f16_to_f32(b.d), b.qs, qh, 0, true, gguf_f16_to_f32(b.m), out);
    }
    case GgufTensorType::kQ8_0: {
      const auto b = load_block<BlockQ8_0>(src);
      const float d = gguf_f16_to_f32(b.d);
      for (int i = 0; i < 32; ++i) out[i] = static_cast<float>(b.qs[i]) * d;
      return;
    }
    case GgufTensorType::kQ2_K:
      return decode_q2_k(src, out);
    case GgufTensorType::kQ3_K:
      return decode_q3_k(src, out);
    case GgufTensorType::kQ4_K: {
      const auto b = load_block<BlockQ4_K>(src);
      return decode_k4(gguf_f16_to_f32(b.d), gguf_f16_to_f32(b.dmin), b.scales, b.qs, nullptr, out);
    }
    case GgufTensorType::kQ5_K: {
      const auto b = load_block<BlockQ5_K>(src);
      return decode_k4(gguf_f16_to_f32(b.d), gguf_f16_to_f32(b.dmin), b.scales, b.qs, b.qh, out);
    }
    case GgufTensorType::kQ6_K:
      return decode_q6_k(src, out);
    default:
      throw UsageError("[gguf] no block decoder for " + gguf_type_name(static_cast<uint32_t>(type)));
  }
}

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
                  sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34,
              "32-element blocks as ggml lays them out");
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
                  sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210,
              "K-quant blocks as ggml lays them out");

}  // namespace

float gguf_f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return float_of(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0) return float_of(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa x 2^-24, exact in float32.
  return float_of(sign | bits_of(static_cast<float>(mantissa) * 0x1p-24f));
}

uint16_t gguf_f32_to_f16(float f) {
  uint32_t x = bits_of(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7FFFFFFFu;
  if (x > 0x7F800000u) return sign | 0x7E00u | static_cast<uint16_t>((x >> 13) & 0x3FFu);  // NaN, quiet
  if (x >= 0x477FF000u) return sign | 0x7C00u;  // from 65520 up: infinity (65520 ties to even upwards)
  if (x < 0x38800000u) {
    // Below 2^-14, a float16 subnormal: adding 0.5 aligns the float32 mantissa's last place with 2^-24,
    // so the hardware's round-to-nearest-even does the rounding; the sum's low bits are the result.
    const float sum = float_of(x) + 0.5f;
    return sign | static_cast<uint16_t>(bits_of(sum) - bits_of(0.5f));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest even.
  const uint32_t odd = (x >> 13) & 1u;
  x += 0xC8000FFFu + odd;
  return sign | static_cast<uint16_t>(x >> 13);
}

void gguf_dequantize(GgufTensorType type, const uint8_t* data, int64_t n_elements, float* out) {
  const GgufBlockSize block = gguf_block_size(type);
  if (n_elements < 0 || n_elements % block.elements != 0)
    throw UsageError("[gguf] " + std::to_string(n_elements) + " " +
                     gguf_type_name(static_cast<uint32_t>(type)) + " elements: expected a multiple of " +
                     std::to_string(block.elements));
  switch (type) {
    case GgufTensorType::kF32:
      if (n_elements > 0) std::memcpy(out, data, static_cast<size_t>(n_elements) * 4);
      return;
    case GgufTensorType::kF16:
      for (int64_t i = 0; i < n_elements; ++i) {
        uint16_t h;
        std::memcpy(&h, data + 2 * i, 2);
        out[i] = gguf_f16_to_f32(h);
      }
      return;
    case GgufTensorType::kBf16:
      // bfloat16 is float32's upper half.
      for (int64_t i = 0; i < n_elements; ++i) {
        uint16_t h;
        std::memcpy(&h, data + 2 * i, 2);
        out[i] = float_of(static_cast<uint32_t>(h) << 16);
      }
      return;
    default:
      break;
  }
  const int64_t blocks = n_elements / block.elements;
  for (int64_t i = 0; i < blocks; ++i) decode_block(type, data + i * block.bytes, out + i * block.elements);
}

std::string gguf_quantize_q8_0(const float* x, int64_t n_elements) {
  if (n_elements < 0 || n_elements % BlockQ8_0::kElements != 0)
    throw DataError("[gguf] Q8_0 quantization of " + std::to_string(n_elements) +
                    " values: expected a multiple of 32 (rows of whole blocks)");
  for (int64_t i = 0; i < n_elements; ++i)
    if (!std::isfinite(x[i]))
      throw DataError("[gguf] Q8_0 quantization: value " + std::to_string(i) + " is " + std::to_string(x[i]) +
                      "; expected finite values");
  const int64_t blocks = n_elements / BlockQ8_0::kElements;
  std::string bytes(static_cast<size_t>(blocks) * sizeof(BlockQ8_0), '\0');
  for (int64_t i = 0; i < blocks; ++i) {
    const float* v = x + i * BlockQ8_0::kElements;
    float amax = 0.0f;
    for (int l = 0; l < 32; ++l) amax = std::max(amax, std::fabs(v[l]));
    const float d = amax / 127.0f;
    const float id = d == 0.0f ? 0.0f : 1.0f / d;
    BlockQ8_0 b;
    b.d = gguf_f32_to_f16(d);
    for (int l = 0; l < 32; ++l) {
      // Half away from zero, as gguf-py's np_roundf: floor(a) + floor(2 * fraction), both steps exact.
      const float scaled = v[l] * id;
      // A block whose largest value is below 127 x 2^-128 has d below 2^-128 and an infinite 1/d, so
      // x * id is infinite or NaN; numpy's cast to int8 makes those 0 (and ggml's C is undefined there).
      // Any finite 1/d keeps |x * id| within 127.5.
      if (!std::isfinite(scaled)) {
        b.qs[l] = 0;
        continue;
      }
      const float a = std::fabs(scaled);
      const float whole = std::floor(a);
      const float rounded = whole + std::floor(2.0f * (a - whole));
      const int q = static_cast<int>(rounded);
      b.qs[l] = static_cast<int8_t>(scaled < 0.0f ? -q : q);
    }
    std::memcpy(&bytes[static_cast<size_t>(i) * sizeof(BlockQ8_0)], &b, sizeof(BlockQ8_0));
  }
  return bytes;
}

}  // namespace causal
