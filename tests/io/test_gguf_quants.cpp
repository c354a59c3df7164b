// Quantized GGUF tensors: causal's block decoders and Q8_0 encoder against gguf-py's own output (fixtures
// from tools/gguf-quant-fixtures.py), bit for bit, and read_gguf's checks of quantized tensors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/errors.h"
#include "io/gguf_file.h"
#include "io/gguf_quants.h"
#include "support/scratch_dir.h"

using namespace causal;
using causal::testing::ScratchDir;

namespace {

const std::string kFixtures = std::string(CAUSAL_SOURCE_DIR) + "/tests/io/fixtures/gguf_quants/";

std::string slurp_fixture(const std::string& name) {
  std::ifstream in(kFixtures + name, std::ios::binary);
  if (!in) throw IoError("missing fixture " + kFixtures + name + " (tools/gguf-quant-fixtures.py writes it)");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// read_gguf on `bytes` must throw a DataError naming the file and containing `words`.
void refused_with(const std::string& path, const std::string& bytes, const std::string& words) {
  write(path, bytes);
  try {
    read_gguf(path);
  } catch (const DataError& e) {
    CATCH_CHECK(std::string(e.what()).find(words) != std::string::npos);
    CATCH_CHECK(std::string(e.what()).find(path) != std::string::npos);
    return;
  }
  CATCH_FAIL("read_gguf accepted a bad file; expected: " << words);
}

}  // namespace

// The invariant: for every readable type, causal's float32 values are gguf-py's, to the bit, including
// the blocks whose scales are zero, negative, subnormal, infinite or NaN. A decoder that rounds once
// where gguf-py rounds twice (an FMA), reads a nibble from the wrong byte or a scale from the wrong bits
// fails here.
CATCH_TEST_CASE("gguf quants: every type dequantizes to gguf-py's float32 bits", "[unit][io]") {
  const std::vector<std::pair<std::string, GgufTensorType>> types = {
      {"f16", GgufTensorType::kF16},   {"bf16", GgufTensorType::kBf16}, {"q4_0", GgufTensorType::kQ4_0},
      {"q4_1", GgufTensorType::kQ4_1}, {"q5_0", GgufTensorType::kQ5_0}, {"q5_1", GgufTensorType::kQ5_1},
      {"q8_0", GgufTensorType::kQ8_0}, {"q2_k", GgufTensorType::kQ2_K}, {"q3_k", GgufTensorType::kQ3_K},
      {"q4_k", GgufTensorType::kQ4_K}, {"q5_k", GgufTensorType::kQ5_K}, {"q6_k", GgufTensorType::kQ6_K}};
  for (const auto& [name, type] : types) {
    CATCH_INFO("type " << name);
    const std::string blocks = slurp_fixture(name + ".blocks");
    const std::string expected = slurp_fixture(name + ".f32");
    const GgufBlockSize block = gguf_block_size(type);
    CATCH_REQUIRE(blocks.size() % block.bytes == 0);
    const int64_t n = static_cast<int64_t>(blocks.size()) / block.bytes * block.elements;
    CATCH_REQUIRE(n >= 256);  // not vacuous: a dozen K-quant blocks, 40 small ones
    CATCH_REQUIRE(expected.size() == static_cast<size_t>(n) * 4);
    std::vector<float> out(static_cast<size_t>(n), -1.0f);
    gguf_dequantize(type, reinterpret_cast<const uint8_t*>(blocks.data()), n, out.data());
    int64_t first_difference = -1, nan = 0, inf = 0;
    for (int64_t i = 0; i < n; ++i) {
      float want;
      std::memcpy(&want, expected.data() + 4 * i, 4);
      if (first_difference < 0 && bits(out[i]) != bits(want)) {
        first_difference = i;
        CATCH_INFO("element " << i << " (block " << i / block.elements << "): causal " << out[i] << " ("
                              << std::hex << bits(out[i]) << "), gguf-py " << want << " (" << bits(want)
                              << ")");
        CATCH_CHECK(bits(out[i]) == bits(want));
      }
      nan += std::isnan(want) ? 1 : 0;
      inf += std::isinf(want) ? 1 : 0;
    }
    CATCH_CHECK(first_difference == -1);
    CATCH_CHECK(std::memcmp(out.data(), expected.data(), expected.size()) == 0);
    // The fixtures reach the special values they were made for.
    CATCH_CHECK(nan > 0);
    CATCH_CHECK(inf > 0);
  }
}

// The invariant: what `causal export --dtype q8_0` writes is byte for byte what gguf-py's quantizer writes
// (ggml's reference rounding: half away from zero), including d = 0, float16-subnormal and overflowing d.
CATCH_TEST_CASE("gguf quants: Q8_0 quantization is gguf-py's, byte for byte", "[unit][io]") {
  const std::string input = slurp_fixture("q8_0_quantize.f32");
  const std::string expected = slurp_fixture("q8_0_quantize.blocks");
  const int64_t n = static_cast<int64_t>(input.size() / 4);
  CATCH_REQUIRE(n % 32 == 0);
  CATCH_REQUIRE(expected.size() == static_cast<size_t>(n / 32 * 34));
  std::vector<float> x(static_cast<size_t>(n));
  std::memcpy(x.data(), input.data(), input.size());
  const std::string got = gguf_quantize_q8_0(x.data(), n);
  CATCH_REQUIRE(got.size() == expected.size());
  for (size_t b = 0; b < got.size() / 34; ++b) {
    CATCH_INFO("block " << b);
    CATCH_CHECK(got.substr(b * 34, 34) == expected.substr(b * 34, 34));
  }
  // Read back, every value is within half a step of its input, plus the float16 rounding of the step
  // (127 x 2^-11 of it).
  std::vector<float> back(static_cast<size_t>(n));
  gguf_dequantize(GgufTensorType::kQ8_0, reinterpret_cast<const uint8_t*>(got.data()), n, back.data());
  for (int64_t i = 0; i < n; ++i) {
    uint16_t d16;
    std::memcpy(&d16, got.data() + i / 32 * 34, 2);
    const float d = gguf_f16_to_f32(d16);
    if (std::isfinite(d) && d > 1e-3f) CATCH_CHECK(std::fabs(back[i] - x[i]) <= 0.57f * d);
  }
  const float bad[32] = {std::nanf("")};
  CATCH_CHECK_THROWS_AS(gguf_quantize_q8_0(bad, 32), DataError);
  CATCH_CHECK_THROWS_AS(gguf_quantize_q8_0(x.data(), 31), DataError);
}

// The invariant: a LoRA run's Q4_0 and Q4_1 base (train.lora.base_dtype) is byte for byte what gguf-py's
// quantizer writes for the same values: Q4_0's float64 rounding of x / d + 8.5 and its first-of-ties
// largest magnitude, Q4_1's float32 steps, on the Q8_0 fixture's rows (d = 0, subnormal, overflowing).
CATCH_TEST_CASE("gguf quants: Q4_0 and Q4_1 quantization is gguf-py's, byte for byte", "[unit][io]") {
  const std::string input = slurp_fixture("q8_0_quantize.f32");
  const int64_t n = static_cast<int64_t>(input.size() / 4);
  std::vector<float> x(static_cast<size_t>(n));
  std::memcpy(x.data(), input.data(), input.size());
  for (const auto& [name, type] : std::vector<std::pair<std::string, GgufTensorType>>{
           {"q4_0", GgufTensorType::kQ4_0}, {"q4_1", GgufTensorType::kQ4_1}}) {
    CATCH_INFO(name);
    const std::string expected = slurp_fixture(name + "_quantize.blocks");
    const int64_t bytes = gguf_block_size(type).bytes;
    CATCH_REQUIRE(expected.size() == static_cast<size_t>(n / 32 * bytes));
    const std::string got = gguf_quantize(type, x.data(), n);
    CATCH_REQUIRE(got.size() == expected.size());
    int64_t differing = 0;
    for (size_t b = 0; b < got.size() / bytes; ++b) {
      CATCH_INFO("block " << b);
      differing += got.substr(b * bytes, bytes) != expected.substr(b * bytes, bytes);
      CATCH_CHECK(got.substr(b * bytes, bytes) == expected.substr(b * bytes, bytes));
    }
    CATCH_CHECK(differing == 0);
  }
}

// The invariant: every block type a base may be held in reads back within its format's error: half a
// quantization step (plus the float16 rounding of the scales; Q4_K's 6-bit scales and mins are rounded up,
// so a value may sit up to one dmin step further). Rows of trained-like weights, and ones with an outlier.
CATCH_TEST_CASE("gguf quants: quantize then dequantize stays within each block type's error", "[unit][io]") {
  std::vector<float> x(4096);
  uint32_t state = 12345;
  for (size_t i = 0; i < x.size(); ++i) {
    state = state * 1664525u + 1013904223u;
    const float u = static_cast<float>(state >> 8) / 16777216.0f;  // [0, 1)
    x[i] = 0.04f * (u - 0.5f) + (i % 509 == 0 ? 0.3f : 0.0f);
  }
  const int64_t n = static_cast<int64_t>(x.size());
  for (const GgufTensorType type :
       {GgufTensorType::kQ8_0, GgufTensorType::kQ4_0, GgufTensorType::kQ4_1, GgufTensorType::kQ4_K}) {
    const GgufBlockSize block = gguf_block_size(type);
    CATCH_INFO(gguf_type_name(static_cast<uint32_t>(type)));
    const std::string blocks = gguf_quantize(type, x.data(), n);
    CATCH_REQUIRE(blocks.size() == static_cast<size_t>(n / block.elements * block.bytes));
    std::vector<float> back(x.size());
    gguf_dequantize(type, reinterpret_cast<const uint8_t*>(blocks.data()), n, back.data());
    // Each sub-block of 32 (Q4_K's scale groups too) against the step its own range allows.
    double worst = 0;
    for (int64_t s = 0; s < n; s += 32) {
      float lo = x[s], hi = x[s], amax = 0;
      for (int64_t i = s; i < s + 32; ++i) {
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
        amax = std::max(amax, std::fabs(x[i]));
      }
      float step = 0;
      if (type == GgufTensorType::kQ8_0) step = amax / 127;
      if (type == GgufTensorType::kQ4_0) step = amax / 8;
      if (type == GgufTensorType::kQ4_1) step = (hi - lo) / 15;
      if (type == GgufTensorType::kQ4_K) step = (hi - std::min(lo, 0.0f)) / 15;
      for (int64_t i = s; i < s + 32; ++i) {
        const double error = std::fabs(back[i] - x[i]) / step;
        worst = std::max(worst, error);
      }
    }
    // Half a step, and room for the float16 scales (Q8_0's 127 x 2^-11 of a step); Q4_0 has 16 levels for
    // [-amax, amax] with the far end clipped, a whole step there; Q4_K's up-rounded 6-bit scale and min
    // add up to 1/63 of the block's largest range and min each.
    double bound = 0.53;
    if (type == GgufTensorType::kQ8_0) bound = 0.57;
    if (type == GgufTensorType::kQ4_0) bound = 1.01;
    if (type == GgufTensorType::kQ4_K) bound = 1.6;
    CATCH_CHECK(worst <= bound);
    CATCH_CHECK(worst > 0.2);  // not vacuous: the values really were rounded
  }
  std::vector<float> bad(256, 0.0f);
  bad[7] = std::nanf("");
  CATCH_CHECK_THROWS_AS(gguf_quantize(GgufTensorType::kQ4_K, bad.data(), 256), DataError);
  CATCH_CHECK_THROWS_AS(gguf_quantize(GgufTensorType::kQ4_K, x.data(), 128), DataError);
  CATCH_CHECK_THROWS_AS(gguf_quantize(GgufTensorType::kQ5_0, x.data(), 32), DataError);
}

// The invariant: float16 -> float32 -> float16 is the identity on every non-NaN float16 (so both
// directions agree on subnormals and the exponent range), and float32 -> float16 rounds ties to even.
CATCH_TEST_CASE("gguf quants: float16 conversions round-trip and round to even", "[unit][io]") {
  int64_t checked = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = gguf_f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    CATCH_CHECK(gguf_f32_to_f16(f) == h);
    ++checked;
  }
  CATCH_CHECK(checked == 65536 - 2 * 1023);
  CATCH_CHECK(gguf_f32_to_f16(1.0f + 0x1p-11f) == 0x3C00);      // tie, even below
  CATCH_CHECK(gguf_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3C02);  // tie, even above
  CATCH_CHECK(gguf_f32_to_f16(0x1p-25f) == 0x0000);             // subnormal tie to even (0)
  CATCH_CHECK(gguf_f32_to_f16(3 * 0x1p-25f) == 0x0002);         // subnormal tie to even (2)
  CATCH_CHECK(gguf_f32_to_f16(65519.0f) == 0x7BFF);             // below the tie: the largest
  CATCH_CHECK(gguf_f32_to_f16(65520.0f) == 0x7C00);             // the tie: infinity
  CATCH_CHECK(std::isnan(gguf_f16_to_f32(gguf_f32_to_f16(std::nanf("")))));
}

CATCH_TEST_CASE("gguf quants: tensor sizes follow the block layout", "[unit][io]") {
  CATCH_CHECK(gguf_tensor_bytes(GgufTensorType::kQ4_K, {3, 512}) == 3 * 2 * 144);
  CATCH_CHECK(gguf_tensor_bytes(GgufTensorType::kQ8_0, {64}) == 2 * 34);
  CATCH_CHECK(gguf_tensor_bytes(GgufTensorType::kF16, {5, 7}) == 70);
  CATCH_CHECK_THROWS_AS(gguf_tensor_bytes(GgufTensorType::kQ4_0, {2, 48}), DataError);
  CATCH_CHECK(gguf_element_size(GgufTensorType::kBf16) == 2);
  CATCH_CHECK_THROWS_AS(gguf_element_size(GgufTensorType::kQ6_K), UsageError);
  CATCH_CHECK(gguf_type_name(16) == "IQ2_XXS");
  CATCH_CHECK(gguf_type_name(13) == "Q5_K");
  CATCH_CHECK(gguf_type_name(99) == "type 99 (unknown)");
}

// The invariant: read_gguf hands out a quantized tensor only when its bytes are whole blocks inside the
// file, and refuses the types it cannot decode by their ggml names.
CATCH_TEST_CASE(
    "gguf quants: quantized tensors read back, and misaligned, truncated and unknown ones are refused",
    "[unit][io]") {
  ScratchDir dir("gguf_quants");
  const std::string path = (dir.path / "q.gguf").string();
  GgufFile f;
  f.metadata = {{"general.architecture", GgufValue::string("llama")}};
  std::vector<float> values(2 * 64);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(static_cast<float>(i));
  f.tensors.push_back({"w.q8", {2, 64}, GgufTensorType::kQ8_0, gguf_quantize_q8_0(values.data(), 128)});
  f.tensors.push_back({"w.q4k", {1, 256}, GgufTensorType::kQ4_K, std::string(144, '\x5a')});
  write_gguf(path, f);
  const GgufFile read = read_gguf(path);
  CATCH_REQUIRE(read.tensors.size() == 2);
  CATCH_CHECK(read.tensors[0].type == GgufTensorType::kQ8_0);
  CATCH_CHECK(read.tensors[0].data == f.tensors[0].data);
  CATCH_CHECK(read.tensors[1].shape == std::vector<int64_t>{1, 256});
  CATCH_CHECK(read.tensors[1].data == f.tensors[1].data);

  // Writing checks the same: data that is not the shape's whole blocks is refused before any byte.
  GgufFile odd = f;
  odd.tensors[0].shape = {2, 48};
  CATCH_CHECK_THROWS_AS(write_gguf((dir.path / "odd.gguf").string(), odd), IoError);

  const std::string bytes = slurp(path);
  const std::string bad = (dir.path / "bad.gguf").string();
  // w.q8's innermost dimension (listed first, ggml order): 64 -> 48, not a whole number of 32-blocks.
  const size_t dims = bytes.find("w.q8") + 4 + 4;
  CATCH_REQUIRE(static_cast<uint8_t>(bytes[dims]) == 64);
  std::string misaligned = bytes;
  misaligned[dims] = 48;
  refused_with(bad, misaligned, "tensor w.q8 is Q8_0 with rows of 48 elements");
  // w.q4k's one block cut short by the end of the file.
  refused_with(bad, bytes.substr(0, bytes.size() - 100), "tensor w.q4k runs past the end");
  // w.q8's type field: IQ2_XXS (16), which needs gguf-py's lookup grids, then a number ggml never used.
  const size_t type_at = dims + 2 * 8;
  CATCH_REQUIRE(bytes[type_at] == 8);
  std::string iq = bytes;
  iq[type_at] = 16;
  refused_with(bad, iq, "tensor w.q8 is IQ2_XXS");
  iq[type_at] = 99;
  refused_with(bad, iq, "tensor w.q8 is type 99 (unknown)");
}
