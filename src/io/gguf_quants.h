// ggml's quantized blocks: their layouts, their float32 values exactly as gguf-py's `gguf.quants` computes
// them (the reference the tests hold it to), and quantization: Q8_0 for export, Q8_0/Q4_0/Q4_1/Q4_K for a
// LoRA run's frozen base (model/frozen_weight.h).
#pragma once

#include <cstdint>
#include <string>

#include "io/gguf_file.h"

namespace causal {

// The blocks as ggml lays them out (ggml-common.h), little-endian, no padding. `d`, `m` and `dmin` are
// float16 bits. A block holds `kElements` consecutive values of one row. The quants of element i of a
// 32-element block: Q4_0/Q4_1/Q5_x keep elements 0..15 in the low nibbles of qs[0..15] and 16..31 in the
// high ones; Q5_x add bit i of qh as the fifth bit. Value = d * q (q offset by 8 or 16 when there is no m)
// or d * q + m.
struct BlockQ4_0 {
  static constexpr int kElements = 32;
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ4_1 {
  static constexpr int kElements = 32;
  uint16_t d, m;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  static constexpr int kElements = 32;
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {
  static constexpr int kElements = 32;
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ8_0 {
  static constexpr int kElements = 32;
  uint16_t d;
  int8_t qs[32];
};
// The K-quants: 256 elements in sub-blocks of 16 or 32, each with its own small integer scale (and min)
// that multiplies the block's float16 d (and dmin).
// Q2_K: 16 sub-blocks of 16; scales[j] = scale (low nibble) | min (high nibble); 2-bit quants, element
// 128h + 32s + l in bits 2s..2s+1 of qs[32h + l]. Value = (d * scale) * q - (dmin * min).
struct BlockQ2_K {
  static constexpr int kElements = 256;
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d, dmin;
};
// Q3_K: 16 sub-blocks of 16 with 6-bit signed scales (low 4 bits in scales[0..7]'s nibbles, high 2 bits
// in scales[8..11]'s bit pairs, minus 32); 2 low bits as in Q2_K, and a third from hmask: bit e/32 of
// hmask[e % 32], where a clear bit subtracts 4. Value = (d * scale) * q.
struct BlockQ3_K {
  static constexpr int kElements = 256;
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
// Q4_K: 8 sub-blocks of 32, 6-bit scales and mins packed in 12 bytes; 4-bit quants, sub-block 2g in the
// low and 2g+1 in the high nibbles of qs[32g..32g+31]. Value = (d * scale) * q - (dmin * min).
struct BlockQ4_K {
  static constexpr int kElements = 256;
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
// Q5_K: Q4_K plus a fifth bit: bit s of qh[l] for element l of sub-block s.
struct BlockQ5_K {
  static constexpr int kElements = 256;
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
// Q6_K: 16 sub-blocks of 16 with int8 scales; 6-bit quants minus 32: element 128h + 64k + m has its low 4
// bits in nibble k of ql[64h + m] and its high 2 in bits 2j..2j+1 of qh[32h + l] (element 128h + 32j + l).
// Value = (d * scale) * q.
struct BlockQ6_K {
  static constexpr int kElements = 256;
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};

// float16 bits -> float32, exactly (subnormals, infinities and NaN payloads kept).
float gguf_f16_to_f32(uint16_t h);
// float32 -> float16 bits, rounded to nearest even (overflow to infinity), as numpy's astype(float16).
uint16_t gguf_f32_to_f16(float f);

// The `n_elements` float32 values of `data` (n_elements / block elements whole blocks of `type`, any
// readable type, F32/F16/BF16 included) into `out`. Equal bit for bit to gguf-py 0.17.1's
// gguf.quants.dequantize. Throws UsageError when n_elements is not a whole number of blocks.
void gguf_dequantize(GgufTensorType type, const uint8_t* data, int64_t n_elements, float* out);

// Q8_0 blocks of `n_elements` finite values (a multiple of 32), byte for byte gguf-py's
// gguf.quants.quantize(x, Q8_0) (ggml's reference quantize_row_q8_0: d = max|x| / 127, q = round(x / d)
// half away from zero). Throws DataError for a non-finite value or a length not a multiple of 32.
std::string gguf_quantize_q8_0(const float* x, int64_t n_elements);

// `n_elements` finite values (whole blocks) as blocks of `type`: Q8_0 as above; Q4_0 and Q4_1 byte for
// byte gguf-py's gguf.quants.quantize (its Q4_0 rounds x / d + 8.5 in float64); Q4_K, which gguf-py does
// not quantize, by causal's own min/max fit (each sub-block's range, 6-bit scales and mins rounded up so
// the range stays covered), not ggml's iterative search: the blocks decode by ggml's layout, with a
// larger error than llama-quantize's. Throws DataError for another type, a non-finite value or a length
// that is not whole blocks.
std::string gguf_quantize(GgufTensorType type, const float* x, int64_t n_elements);

}  // namespace causal
