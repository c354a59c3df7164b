// A sweep folder's summary.html: one self-contained page (inline CSS and SVG, no script) with the chosen
// metric charted against the grouping key (mean +- std over seeds, each seed's value as a ring), the
// groups' table, one row per point with links to its report, and every numeric field.
#pragma once

#include <filesystem>
#include <string>

#include "sweep/sweep_summary.h"

namespace causal {

// The page for the sweep in `out` (links are relative to it, so the folder can be moved or copied).
std::string render_sweep_page(const SweepSummary& summary, const SweepSpec& spec,
                              const std::filesystem::path& out);

// render_sweep_page written atomically to out/summary.html; returns its path. Throws RunFolderError.
std::string write_sweep_page(const SweepSummary& summary, const SweepSpec& spec,
                             const std::filesystem::path& out);

}  // namespace causal
