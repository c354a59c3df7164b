// safetensors files: exact round trip, the standard layout (read back by an independent Python reader),
// and clear errors for damaged files.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/errors.h"
#include "io/safetensors.h"
#include "support/skip.h"

using namespace causal;
namespace fs = std::filesystem;

namespace {

fs::path temp_file(const std::string& name) {
  return fs::temp_directory_path() / ("causal_st_" + std::to_string(::getpid()) + "_" + name);
}

NamedTensors sample_tensors() {
  torch::manual_seed(0);
  return {{"blocks.0.attn.q_proj.weight", torch::randn({3, 4})},
          {"embed.token.weight", torch::randn({5, 2}).to(torch::kBFloat16)},
          {"step", torch::tensor({42}, torch::kLong)},
          {"mask", torch::tensor({true, false, true})},
          {"scalar", torch::tensor(1.5, torch::kDouble)}};
}

void write_raw(const fs::path& path, const std::string& header, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(n >> (8 * i)));
  out << header << data;
}

}  // namespace

// Every dtype and shape comes back bitwise equal, in order, with the metadata.
CATCH_TEST_CASE("safetensors round trip is exact", "[unit][checkpoint]") {
  const fs::path path = temp_file("round_trip.safetensors");
  const NamedTensors tensors = sample_tensors();
  save_safetensors(path.string(), tensors, {{"format", "causal"}});
  std::map<std::string, std::string> metadata;
  const NamedTensors back = load_safetensors(path.string(), &metadata);
  CATCH_REQUIRE(back.size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    CATCH_CHECK(back[i].first == tensors[i].first);
    CATCH_CHECK(back[i].second.scalar_type() == tensors[i].second.scalar_type());
    CATCH_CHECK(torch::equal(back[i].second, tensors[i].second));
  }
  CATCH_CHECK(metadata.at("format") == "causal");
  fs::remove(path);
}

// The layout is the standard one: an independent reader (Python's struct + json, no causal code)
// finds the header, the byte ranges and the float values.
CATCH_TEST_CASE("safetensors files follow the standard layout", "[unit][checkpoint]") {
  if (std::system("/usr/bin/python3 -c 'import json, struct' 2>/dev/null") != 0)
    CAUSAL_SKIP_TEST("/usr/bin/python3 is not available");
  const fs::path path = temp_file("layout.safetensors");
  const NamedTensors tensors = sample_tensors();
  save_safetensors(path.string(), tensors);
  const std::string script =
      "import json, struct, sys\n"
      "raw = open(sys.argv[1], 'rb').read()\n"
      "n = struct.unpack('<Q', raw[:8])[0]\n"
      "h = json.loads(raw[8:8 + n])\n"
      "b, e = h['blocks.0.attn.q_proj.weight']['data_offsets']\n"
      "vals = struct.unpack('<12f', raw[8 + n + b:8 + n + e])\n"
      "print(n % 8, h['step']['dtype'], h['embed.token.weight']['shape'], repr(sum(vals)))\n";
  std::ofstream(temp_file("read.py")) << script;
  FILE* pipe =
      ::popen(("/usr/bin/python3 " + temp_file("read.py").string() + " " + path.string()).c_str(), "r");
  CATCH_REQUIRE(pipe != nullptr);
  char line[256] = {};
  const bool got = std::fgets(line, sizeof(line), pipe) != nullptr;
  ::pclose(pipe);
  CATCH_REQUIRE(got);
  const std::string out(line);
  CATCH_CHECK(out.rfind("0 I64 [5, 2] ", 0) == 0);  // 8-byte aligned header, dtype and shape as written
  const double sum = std::stod(out.substr(std::string("0 I64 [5, 2] ").size()));
  CATCH_CHECK(sum == Catch::Detail::Approx(tensors[0].second.sum().item<double>()).epsilon(1e-6));
  fs::remove(path);
  fs::remove(temp_file("read.py"));
}

// Damaged files are refused with a message naming the file and the problem, never loaded.
CATCH_TEST_CASE("safetensors damage is refused with a clear error", "[unit][checkpoint]") {
  const fs::path path = temp_file("damaged.safetensors");
  auto error_of = [&]() -> std::string {
    try {
      load_safetensors(path.string());
    } catch (const CheckpointError& e) {
      return e.what();
    }
    return "no error";
  };
  save_safetensors(path.string(), sample_tensors());
  fs::resize_file(path, fs::file_size(path) - 3);  // truncated data
  CATCH_CHECK_THAT(error_of(),
                   Catch::Matchers::Contains(path.string()) && Catch::Matchers::Contains("inside the"));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "abc";
  CATCH_CHECK_THAT(error_of(), Catch::Matchers::Contains("has no header"));
  write_raw(path, "{\"a\":", "");
  CATCH_CHECK_THAT(error_of(), Catch::Matchers::Contains("not JSON"));
  write_raw(
      path,
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      std::string(12, '\0'));
  CATCH_CHECK_THAT(error_of(), Catch::Matchers::Contains("overlap"));
  write_raw(path, R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0'));
  CATCH_CHECK_THAT(error_of(), Catch::Matchers::Contains("unknown dtype Q4"));
  write_raw(path, R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0'));
  CATCH_CHECK_THAT(error_of(), Catch::Matchers::Contains("does not hold its 12 bytes"));
  fs::remove(path);
  CATCH_CHECK_THROWS_AS(load_safetensors(path.string()), CheckpointError);
}
