// The measured matmul peak, remembered per machine: it changes with the machine, not with the run, and
// measuring it costs about half a second, which is a fifth of a short run's wall time.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <filesystem>
#include <optional>
#include <string>

namespace causal {

// Where the peak is remembered: $CAUSAL_CACHE_DIR, else $XDG_CACHE_HOME/causal, else $HOME/.cache/causal,
// each joined with matmul_peak.json; nullopt when none is set. CAUSAL_CACHE_DIR=off turns the cache off.
std::optional<std::filesystem::path> peak_cache_file();

// What a remembered peak must match to be used: the device, the core count, the CPU model, the LibTorch
// version, whether its BLAS is OpenBLAS, and the dtype. Another machine or another build measures afresh.
std::string peak_cache_key(const c10::Device& device, c10::ScalarType dtype = c10::kFloat);

// A remembered peak is used for this long after it was measured.
inline constexpr double kPeakCacheMaxAgeSeconds = 24 * 3600.0;

// Now, in seconds since the Unix epoch: the clock entries are stamped and aged with.
double unix_seconds();

struct CachedPeak {
  double gflops = 0.0;
  double age_seconds = 0.0;
};

// The peak stored for `key` if it was measured at most `max_age_seconds` before `now_seconds` (Unix time);
// nullopt for a missing, unreadable or malformed file, an unknown key, or a stale or future entry.
std::optional<CachedPeak> read_cached_peak(const std::filesystem::path& file, const std::string& key,
                                           double now_seconds,
                                           double max_age_seconds = kPeakCacheMaxAgeSeconds);

// Stores `gflops` for `key`, measured at `now_seconds`, keeping the other keys' entries; the file is
// replaced atomically. Best effort: returns false (and changes nothing) when it cannot be written, since a
// cache that fails only costs the next run a measurement.
bool store_cached_peak(const std::filesystem::path& file, const std::string& key, double gflops,
                       double now_seconds);

}  // namespace causal
