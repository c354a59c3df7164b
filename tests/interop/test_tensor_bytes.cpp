// Tensors to and from GGUF bytes: quantized tensors go through gguf-py's arithmetic (the fixtures of
// tests/io/fixtures/gguf_quants, from tools/gguf-quant-fixtures.py), and export picks each tensor's type.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/errors.h"
#include "interop/tensor_bytes.h"

using namespace causal;

namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(CAUSAL_SOURCE_DIR) + "/tests/io/fixtures/gguf_quants/" + name,
                   std::ios::binary);
  CATCH_REQUIRE(in.good());
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

// The invariant: `causal export --dtype q8_0` writes a matrix as the bytes gguf-py's quantizer writes for
// it, and import reads quantized bytes as the float32 values gguf-py reads.
CATCH_TEST_CASE("tensor bytes: Q8_0 out and K-quants in are gguf-py's", "[unit][interop]") {
  const std::string input = fixture("q8_0_quantize.f32");
  const int64_t rows = static_cast<int64_t>(input.size() / 4 / 64);
  CATCH_REQUIRE(rows >= 4);
  torch::Tensor matrix = torch::empty({rows, 64}, torch::kFloat);
  std::memcpy(matrix.data_ptr<float>(), input.data(), input.size());
  CATCH_CHECK(tensor_bytes(matrix, GgufTensorType::kQ8_0) == fixture("q8_0_quantize.blocks"));
  // A bfloat16 weight is quantized from its exact float32 value.
  const torch::Tensor bf16 = matrix.to(torch::kBFloat16);
  CATCH_CHECK(tensor_bytes(bf16, GgufTensorType::kQ8_0) ==
              tensor_bytes(bf16.to(torch::kFloat), GgufTensorType::kQ8_0));

  const std::string blocks = fixture("q4_k.blocks");
  const std::string values = fixture("q4_k.f32");
  const int64_t n = static_cast<int64_t>(values.size() / 4);
  const torch::Tensor back = tensor_from_bytes(blocks, {n / 512, 512}, GgufTensorType::kQ4_K);
  CATCH_CHECK(back.scalar_type() == torch::kFloat);
  CATCH_CHECK(back.sizes() == torch::IntArrayRef({n / 512, 512}));
  CATCH_CHECK(std::memcmp(back.data_ptr<float>(), values.data(), values.size()) == 0);
  CATCH_CHECK_THROWS_AS(tensor_from_bytes(blocks, {n / 256 + 1, 256}, GgufTensorType::kQ4_K), DataError);
  CATCH_CHECK_THROWS_AS(tensor_from_bytes(blocks, {n / 128, 128}, GgufTensorType::kQ4_K), DataError);
}

CATCH_TEST_CASE("tensor bytes: what q8_0 export stores each tensor as", "[unit][interop]") {
  CATCH_CHECK(parse_export_dtype("q8_0") == GgufTensorType::kQ8_0);
  CATCH_CHECK_THROWS_AS(parse_export_dtype("q4_0"), UsageError);
  CATCH_CHECK(gguf_storage_type(torch::zeros({64}), GgufTensorType::kQ8_0) == GgufTensorType::kF32);
  CATCH_CHECK(gguf_storage_type(torch::zeros({8, 64}), GgufTensorType::kQ8_0) == GgufTensorType::kQ8_0);
  // Rows of 48: not whole blocks, F16 as llama.cpp's converter falls back.
  CATCH_CHECK(gguf_storage_type(torch::zeros({8, 48}), GgufTensorType::kQ8_0) == GgufTensorType::kF16);
  CATCH_CHECK(gguf_storage_type(torch::zeros({8, 48}), GgufTensorType::kBf16) == GgufTensorType::kBf16);
  CATCH_CHECK_THROWS_AS(tensor_bytes(torch::zeros({8, 48}), GgufTensorType::kQ8_0), UsageError);
  CATCH_CHECK_THROWS_AS(tensor_bytes(torch::zeros({8, 64}), GgufTensorType::kQ4_0), UsageError);
  // HF folders hold tensor dtypes only.
  CATCH_CHECK_THROWS_AS(scalar_type_of(GgufTensorType::kQ8_0), UsageError);
}
