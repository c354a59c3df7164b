// Matmul peak cache file.
#include "bench/peak_cache.h"

#include <torch/version.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "core/environment.h"
#include "core/runtime.h"
#include "io/atomic_file.h"

namespace causal {
namespace fs = std::filesystem;

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
  }
  return "unknown CPU";
}

nlohmann::json read_entries(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return nlohmann::json::object();
  nlohmann::json entries = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return entries.is_object() ? entries : nlohmann::json::object();
}

}  // namespace

std::optional<fs::path> peak_cache_file() {
  const std::string own = environment_variable("CAUSAL_CACHE_DIR").value_or("");
  if (own == "off") return std::nullopt;
  if (!own.empty()) return fs::path(own) / "matmul_peak.json";
  if (const std::string xdg = environment_variable("XDG_CACHE_HOME").value_or(""); !xdg.empty())
    return fs::path(xdg) / "causal" / "matmul_peak.json";
  if (const std::string home = environment_variable("HOME").value_or(""); !home.empty())
    return fs::path(home) / ".cache" / "causal" / "matmul_peak.json";
  return std::nullopt;
}

std::string peak_cache_key(const c10::Device& device, c10::ScalarType dtype) {
  // float32 keys carry no dtype: they are the keys written before other dtypes were measured.
  return device.str() + "; " + std::to_string(machine_cores()) + " cores; " + cpu_model() + "; LibTorch " +
         TORCH_VERSION + (has_openblas() ? "; OpenBLAS" : "") +
         (dtype == c10::kFloat ? std::string() : std::string("; ") + c10::toString(dtype));
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::optional<CachedPeak> read_cached_peak(const fs::path& file, const std::string& key, double now_seconds,
                                           double max_age_seconds) {
  const nlohmann::json entries = read_entries(file);
  const auto entry = entries.find(key);
  if (entry == entries.end() || !entry->is_object()) return std::nullopt;
  const auto gflops = entry->find("gflops");
  const auto measured_at = entry->find("measured_at");
  if (gflops == entry->end() || measured_at == entry->end() || !gflops->is_number() ||
      !measured_at->is_number())
    return std::nullopt;
  const double value = gflops->get<double>();
  const double age = now_seconds - measured_at->get<double>();
  if (!std::isfinite(value) || value <= 0 || !(age >= 0 && age <= max_age_seconds)) return std::nullopt;
  return CachedPeak{value, age};
}

bool store_cached_peak(const fs::path& file, const std::string& key, double gflops, double now_seconds) {
  try {
    std::error_code error;
    fs::create_directories(file.parent_path(), error);
    nlohmann::json entries = read_entries(file);
    entries[key] = {{"gflops", gflops}, {"measured_at", now_seconds}};
    write_file_atomically(file, entries.dump(2) + "\n");
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace causal
