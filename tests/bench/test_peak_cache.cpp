// Contracts of the matmul peak cache: an entry is used only for the machine and build it was measured on
// and only while fresh, a bad file costs a measurement and never an error, and a run names where its
// peak came from.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "bench/matmul_peak.h"
#include "bench/peak_cache.h"
#include "support/scoped_env.h"
#include "support/scratch_dir.h"

using namespace causal;
using causal::testing::ScopedEnv;
using causal::testing::ScratchDir;
namespace fs = std::filesystem;

CATCH_TEST_CASE("peak cache: a stored peak is read back for its key only, and only while fresh",
                "[unit][train]") {
  ScratchDir dir("peak_cache_fresh");
  const fs::path file = dir.path / "nested" / "matmul_peak.json";
  CATCH_CHECK_FALSE(read_cached_peak(file, "cpu; 2 cores", 1000.0).has_value());  // no file yet

  CATCH_REQUIRE(store_cached_peak(file, "cpu; 2 cores", 143.5, 1000.0));
  CATCH_REQUIRE(store_cached_peak(file, "cuda:0; 16 cores", 900.0, 1000.0));
  const auto back = read_cached_peak(file, "cpu; 2 cores", 1060.0);
  CATCH_REQUIRE(back.has_value());
  CATCH_CHECK(back->gflops == 143.5);
  CATCH_CHECK(back->age_seconds == 60.0);
  CATCH_CHECK(read_cached_peak(file, "cuda:0; 16 cores", 1000.0)->gflops == 900.0);  // other keys kept

  CATCH_CHECK_FALSE(read_cached_peak(file, "cpu; 4 cores", 1000.0).has_value());  // another machine
  CATCH_CHECK_FALSE(read_cached_peak(file, "cpu; 2 cores", 1000.0 + kPeakCacheMaxAgeSeconds + 1).has_value());
  CATCH_CHECK_FALSE(read_cached_peak(file, "cpu; 2 cores", 999.0).has_value());  // measured "in the future"

  // Measuring again replaces the entry.
  CATCH_REQUIRE(store_cached_peak(file, "cpu; 2 cores", 120.0, 2000.0));
  CATCH_CHECK(read_cached_peak(file, "cpu; 2 cores", 2000.0)->gflops == 120.0);
}

CATCH_TEST_CASE("peak cache: a malformed or unwritable cache is ignored, never an error", "[unit][train]") {
  ScratchDir dir("peak_cache_bad");
  const fs::path file = dir.path / "matmul_peak.json";
  for (const char* text : {"not json", "[1, 2]", R"({"k": {"gflops": "fast", "measured_at": 1}})",
                           R"({"k": {"gflops": -5, "measured_at": 1}})", R"({"k": 3})"}) {
    std::ofstream(file) << text;
    CATCH_CHECK_FALSE(read_cached_peak(file, "k", 10.0).has_value());
  }
  CATCH_REQUIRE(store_cached_peak(file, "k", 50.0, 10.0));  // a malformed file is replaced
  CATCH_CHECK(read_cached_peak(file, "k", 10.0)->gflops == 50.0);

  std::ofstream(dir.path / "a_file") << "x";  // a folder that cannot be made: its parent is a file
  CATCH_CHECK_FALSE(store_cached_peak(dir.path / "a_file" / "matmul_peak.json", "k", 50.0, 10.0));
}

CATCH_TEST_CASE("peak cache: a run takes this machine's fresh entry and names the file", "[unit][train]") {
  ScratchDir dir("peak_cache_run");
  const ScopedEnv cache{{"CAUSAL_CACHE_DIR", dir.path.c_str()}};
  const ScopedEnv inherited{{kMatmulPeakVariable, nullptr}};
  const c10::Device cpu(c10::kCPU);
  CATCH_REQUIRE(peak_cache_file() == dir.path / "matmul_peak.json");
  CATCH_REQUIRE(store_cached_peak(*peak_cache_file(), peak_cache_key(cpu), 77.25, unix_seconds() - 300));

  const MatmulPeak peak = matmul_peak(cpu);
  CATCH_CHECK(peak.flops == 77.25e9);
  CATCH_CHECK(peak.source ==
              "measured on this machine 5 min ago, kept in " + (dir.path / "matmul_peak.json").string());

  // A bfloat16 peak (model.autocast) is kept apart; the float32 key stays the one written before dtypes.
  CATCH_CHECK(peak_cache_key(cpu, c10::kBFloat16) == peak_cache_key(cpu) + "; BFloat16");
  CATCH_REQUIRE(
      store_cached_peak(*peak_cache_file(), peak_cache_key(cpu, c10::kBFloat16), 3.5, unix_seconds()));
  CATCH_CHECK(matmul_peak(cpu, c10::kBFloat16).flops == 3.5e9);
  CATCH_CHECK(matmul_peak(cpu).flops == 77.25e9);

  // A parent's value still wins over the cache; "off" turns the cache off.
  {
    const ScopedEnv parent{{kMatmulPeakVariable, "12.5"}};
    CATCH_CHECK(matmul_peak(cpu).flops == 12.5e9);
  }
  const ScopedEnv off{{"CAUSAL_CACHE_DIR", "off"}};
  CATCH_CHECK_FALSE(peak_cache_file().has_value());
}
