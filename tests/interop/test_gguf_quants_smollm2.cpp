// A real quantized GGUF file (SmolLM2-135M-Instruct, Q4_1/Q8_0/F32; tools/setup.sh fetches it and points
// CAUSAL_SMOLLM2_GGUF at it): every tensor causal dequantizes has gguf-py's float32 bytes. Hidden tag
// [interop-gguf-quants]: it needs the interop Python (tests/interop/python.sh) and the file, and prints
// SKIPPED without either.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "io/gguf_file.h"
#include "io/gguf_quants.h"
#include "io/sha256.h"
#include "support/scratch_dir.h"
#include "support/skip.h"

using namespace causal;
using causal::testing::ScratchDir;

namespace {

// tests/interop/gguf_dequantize.py through the interop Python; its exit status, its output in `out`.
int reference_hashes(const std::string& gguf, const std::filesystem::path& out) {
  const std::string cmd = std::string("cd ") + CAUSAL_SOURCE_DIR +
                          " && tests/interop/python.sh tests/interop/gguf_dequantize.py '" + gguf + "' >" +
                          out.string() + " 2>" + out.string() + ".err";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string file_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

// The invariant: causal imports a quantized model with exactly the weights gguf-py (and so llama.cpp's own
// Python tooling) reads from it: for every tensor, the SHA-256 of its float32 bytes agrees.
CATCH_TEST_CASE("interop: SmolLM2's quantized GGUF dequantizes to gguf-py's float32 bytes",
                "[.][interop-gguf-quants]") {
  const char* env = std::getenv("CAUSAL_SMOLLM2_GGUF");
  if (env == nullptr || *env == '\0')
    CAUSAL_SKIP_TEST("CAUSAL_SMOLLM2_GGUF is unset (tools/setup.sh sets it)");
  const std::string path = env;
  if (!std::filesystem::exists(path)) CAUSAL_SKIP_TEST("CAUSAL_SMOLLM2_GGUF=" << path << " does not exist");
  ScratchDir dir("gguf_quants_smollm2");
  const std::filesystem::path hashes = dir.path / "gguf-py.txt";
  if (reference_hashes(path, hashes) != 0) {
    std::string why = file_text(hashes.string() + ".err");
    while (!why.empty() && why.back() == '\n') why.pop_back();
    CAUSAL_SKIP_TEST("gguf-py did not run (" << why.substr(why.size() > 400 ? why.size() - 400 : 0)
                                             << "); install it with: bash -c 'source tools/setup.sh && "
                                                "ensure_interop_python'");
  }
  std::map<std::string, std::string> expected;
  {
    std::istringstream lines(file_text(hashes));
    std::string name, hex;
    while (lines >> name >> hex) expected[name] = hex;
  }

  const GgufFile file = read_gguf(path);
  CATCH_REQUIRE(file.tensors.size() == expected.size());
  std::map<GgufTensorType, int> types;
  double seconds = 0;
  int64_t elements = 0;
  for (const GgufTensor& t : file.tensors) {
    CATCH_INFO("tensor " << t.name << " (" << gguf_type_name(static_cast<uint32_t>(t.type)) << ")");
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    std::vector<float> values(static_cast<size_t>(n));
    const auto start = std::chrono::steady_clock::now();
    gguf_dequantize(t.type, reinterpret_cast<const uint8_t*>(t.data.data()), n, values.data());
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CATCH_REQUIRE(expected.count(t.name) == 1);
    CATCH_CHECK(sha256_hex(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4)) ==
                expected[t.name]);
    ++types[t.type];
    elements += n;
  }
  // Not vacuous: the file's quantized types are among those compared.
  CATCH_CHECK(types.count(GgufTensorType::kQ4_1) == 1);
  CATCH_CHECK(types.count(GgufTensorType::kQ8_0) == 1);
  std::cout << "[interop-gguf-quants] " << file.tensors.size() << " tensors, " << elements
            << " values equal to gguf-py's; dequantized in " << seconds << " s on one thread\n";
}
