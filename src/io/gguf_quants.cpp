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
// kHigh: the block has a fifth bit per quant in `high`; kMin: a min `m` is added. Both are template
// parameters so that each format's loop has no branch and vectorizes: a LoRA base held in Q4 blocks
// (model/frozen_weight.h) decodes its whole weight twice a step.
template <bool kHigh, bool kMin>
void decode_32(float d, const uint8_t* qs, uint32_t high, int offset, float m, float* out) {
  for (int l = 0; l < 16; ++l) {
    int lo = qs[l] & 0x0F;
    int hi = qs[l] >> 4;
    if constexpr (kHigh) {
      lo |= static_cast<int>(((high >> l) & 1u) << 4);
      hi |= static_cast<int>(((high >> (l + 16)) & 1u) << 4);
    }
    const float a = d * static_cast<float>(lo - offset);
    const float b = d * static_cast<float>(hi - offset);
    if constexpr (kMin) {
      out[l] = a + m;
      out[l + 16] = b + m;
    } else {
      out[l] = a;
      out[l + 16] = b;
    }
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

// Q4_K without `qh` (kHigh false), Q5_K with it.
template <bool kHigh>
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
      if constexpr (kHigh) v |= ((qh[l] >> j) & 1) << 4;
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
      return decode_32<false, false>(gguf_f16_to_f32(b.d), b.qs, 0, 8, 0.0f, out);
    }
    case GgufTensorType::kQ4_1: {
      const auto b = load_block<BlockQ4_1>(src);
      return decode_32<false, true>(gguf_f16_to_f32(b.d), b.qs, 0, 0, gguf_f16_to_f32(b.m), out);
    }
    case GgufTensorType::kQ5_0: {
      const auto b = load_block<BlockQ5_0>(src);
      uint32_t qh;
      std::memcpy(&qh, b.qh, 4);
      return decode_32<true, false>(gguf_f16_to_f32(b.d), b.qs, qh, 16, 0.0f, out);
    }
    case GgufTensorType::kQ5_1: {
      const auto b = load_block<BlockQ5_1>(src);
      uint32_t qh;
      std::memcpy(&qh, b.qh, 4);
      return decode_32<true, true>(gguf_f16_to_f32(b.d), b.qs, qh, 0, gguf_f16_to_f32(b.m), out);
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
      return decode_k4<false>(gguf_f16_to_f32(b.d), gguf_f16_to_f32(b.dmin), b.scales, b.qs, nullptr, out);
    }
    case GgufTensorType::kQ5_K: {
      const auto b = load_block<BlockQ5_K>(src);
      return decode_k4<true>(gguf_f16_to_f32(b.d), gguf_f16_to_f32(b.dmin), b.scales, b.qs, b.qh, out);
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

// Refuses what no block holds: a length that is not whole blocks, or a value that is not finite.
void check_quantizable(const char* type, int elements, const float* x, int64_t n_elements) {
  if (n_elements < 0 || n_elements % elements != 0)
    throw DataError(std::string("[gguf] ") + type + " quantization of " + std::to_string(n_elements) +
                    " values: expected a multiple of " + std::to_string(elements) +
                    " (rows of whole blocks)");
  for (int64_t i = 0; i < n_elements; ++i)
    if (!std::isfinite(x[i]))
      throw DataError(std::string("[gguf] ") + type + " quantization: value " + std::to_string(i) + " is " +
                      std::to_string(x[i]) + "; expected finite values");
}

// A float32 rounded here, on its own: kept from fusing into a multiply-add with what follows, which
// would round once where gguf-py rounds twice.
float rounded(float v) {
  volatile float r = v;
  return r;
}

// Elements l and l + 16 of a 32-element block share byte l: low nibble, high nibble.
void pack_nibbles(const uint8_t* q, uint8_t* qs) {
  for (int l = 0; l < 16; ++l) qs[l] = static_cast<uint8_t>(q[l] | (q[l + 16] << 4));
}

// numpy's float -> uint8 cast then clip(0, 15) of a value trunc() made whole; a non-finite one (a 1/d that
// overflowed) becomes 0, as the cast does on x86.
uint8_t nibble_of(float whole) {
  if (!std::isfinite(whole)) return 0;
  return static_cast<uint8_t>(std::clamp(whole, 0.0f, 15.0f));
}

// gguf-py's Q4_0.quantize_blocks: d = (the value of largest magnitude, the first of ties) / -8, q =
// trunc(x / d + 8.5) computed in float64 and cast to float32, clipped to 15.
void quantize_q4_0_block(const float* v, uint8_t* out) {
  float max = 0.0f, amax = 0.0f;
  for (int l = 0; l < 32; ++l)
    if (std::fabs(v[l]) > amax) {
      amax = std::fabs(v[l]);
      max = v[l];
    }
  const float d = max / -8.0f;
  const float id = d == 0.0f ? 0.0f : 1.0f / d;
  uint8_t q[32];
  for (int l = 0; l < 32; ++l) {
    const auto scaled = static_cast<float>(static_cast<double>(v[l]) * static_cast<double>(id) + 8.5);
    q[l] = nibble_of(std::trunc(scaled));
  }
  BlockQ4_0 b;
  b.d = gguf_f32_to_f16(d);
  pack_nibbles(q, b.qs);
  std::memcpy(out, &b, sizeof(b));
}

// gguf-py's Q4_1.quantize_blocks: d = (max - min) / 15, m = min, q = trunc((x - min) / d + 0.5), each
// step rounded in float32.
void quantize_q4_1_block(const float* v, uint8_t* out) {
  const float max = *std::max_element(v, v + 32);
  const float min = *std::min_element(v, v + 32);
  const float d = rounded(max - min) / 15.0f;
  const float id = d == 0.0f ? 0.0f : 1.0f / d;
  uint8_t q[32];
  for (int l = 0; l < 32; ++l) q[l] = nibble_of(std::trunc(rounded(rounded(v[l] - min) * id) + 0.5f));
  BlockQ4_1 b;
  b.d = gguf_f32_to_f16(d);
  b.m = gguf_f32_to_f16(min);
  pack_nibbles(q, b.qs);
  std::memcpy(out, &b, sizeof(b));
}

// causal's Q4_K fit (see gguf_quantize): sub-block j of 32 spans [lo_j, hi_j] with lo_j = min(0, its
// least value); its scale (hi_j - lo_j) / 15 and its min -lo_j become 6-bit multiples of the block's d
// and dmin (the largest over 63, in float16), rounded up so that the range stays covered; each value
// then takes the nearest of its sub-block's 16 levels.
void quantize_q4_k_block(const float* v, uint8_t* out) {
  float scale[8], min[8], max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const float* sub = v + 32 * j;
    const float lo = std::min(0.0f, *std::min_element(sub, sub + 32));
    const float hi = *std::max_element(sub, sub + 32);
    scale[j] = (hi - lo) / 15.0f;
    min[j] = -lo;
    max_scale = std::max(max_scale, scale[j]);
    max_min = std::max(max_min, min[j]);
  }
  BlockQ4_K b;
  b.d = gguf_f32_to_f16(max_scale / 63.0f);
  b.dmin = gguf_f32_to_f16(max_min / 63.0f);
  const float d = gguf_f16_to_f32(b.d), dmin = gguf_f16_to_f32(b.dmin);
  const auto sixbit = [](float value, float unit) {
    return unit > 0.0f ? static_cast<int>(std::min(63.0f, std::ceil(value / unit))) : 0;
  };
  int sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = sixbit(scale[j], d);
    mn[j] = sixbit(min[j], dmin);
  }
  // The inverse of the decoder's scale_min_k4: sub-blocks 0-3 in the low 6 bits of bytes 0-7, 4-7 split
  // into low nibbles (bytes 8-11) and the top 2 bits of bytes 0-7.
  for (int k = 0; k < 4; ++k) {
    b.scales[k] = static_cast<uint8_t>(sc[k] | ((sc[k + 4] >> 4) << 6));
    b.scales[k + 4] = static_cast<uint8_t>(mn[k] | ((mn[k + 4] >> 4) << 6));
    b.scales[k + 8] = static_cast<uint8_t>((sc[k + 4] & 0x0F) | ((mn[k + 4] & 0x0F) << 4));
  }
  std::memset(b.qs, 0, sizeof(b.qs));
  for (int j = 0; j < 8; ++j) {
    const float dj = d * static_cast<float>(sc[j]);
    const float mj = dmin * static_cast<float>(mn[j]);
    for (int l = 0; l < 32; ++l) {
      const float level = dj > 0.0f ? std::nearbyint((v[32 * j + l] + mj) / dj) : 0.0f;
      const int q = static_cast<int>(std::clamp(level, 0.0f, 15.0f));
      b.qs[32 * (j / 2) + l] |= static_cast<uint8_t>(q << (4 * (j % 2)));
    }
  }
  std::memcpy(out, &b, sizeof(b));
}

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
  check_quantizable("Q8_0", BlockQ8_0::kElements, x, n_elements);
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

std::string gguf_quantize(GgufTensorType type, const float* x, int64_t n_elements) {
  using Quantize = void (*)(const float*, uint8_t*);
  Quantize quantize = nullptr;
  switch (type) {
    case GgufTensorType::kQ8_0:
      return gguf_quantize_q8_0(x, n_elements);
    case GgufTensorType::kQ4_0:
      quantize = quantize_q4_0_block;
      break;
    case GgufTensorType::kQ4_1:
      quantize = quantize_q4_1_block;
      break;
    case GgufTensorType::kQ4_K:
      quantize = quantize_q4_k_block;
      break;
    default:
      throw DataError("[gguf] no quantizer for " + gguf_type_name(static_cast<uint32_t>(type)) +
                      "; expected Q8_0, Q4_0, Q4_1 or Q4_K");
  }
  const GgufBlockSize block = gguf_block_size(type);
  check_quantizable(gguf_type_name(static_cast<uint32_t>(type)).c_str(), static_cast<int>(block.elements), x,
                    n_elements);
  const int64_t blocks = n_elements / block.elements;
  std::string bytes(static_cast<size_t>(blocks * block.bytes), '\0');
  for (int64_t i = 0; i < blocks; ++i)
    quantize(x + i * block.elements,
             reinterpret_cast<uint8_t*>(&bytes[static_cast<size_t>(i * block.bytes)]));
  return bytes;
}

}  // namespace causal
