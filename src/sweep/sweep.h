// `causal sweep`: runs every point of a grid as its own `causal train` child process (a crash in one
// cannot take down the others), up to `jobs` at once, each in an ordinary run folder of the sweep folder.
// Resumable: a finished point is skipped and an interrupted one continues from its checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/errors.h"
#include "sweep/sweep_spec.h"

namespace causal {

// One or more points of a sweep failed (each point's error is in the summary); the others ran to the end.
class SweepPointsFailed : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return kExitFailure; }
};

enum class PointState {
  kPending,   // not started (yet, or the sweep was stopped first)
  kRunning,   // its child process is training
  kFinished,  // trained in this sweep: results.json written
  kSkipped,   // finished before this sweep started: results.json read, nothing run
  kFailed,    // its child exited non-zero (or was killed): exit_code and error say how
  kStopped,   // stopped by a signal forwarded from the sweep after saving its checkpoint
};
const char* point_state_name(PointState state);  // "pending", "running", "finished", ...

struct PointResult {
  SweepPoint point;
  std::string run_dir;  // out/<point name>
  std::string log;      // out/logs/<point name>.log: the child's stdout and stderr, appended per attempt
  int64_t threads = 0;  // the point's resolved threads (cores / jobs where its config left 0)
  PointState state = PointState::kPending;
  int exit_code = 0;       // the child's exit status (128 + N when killed by signal N)
  std::string error;       // its "causal: error: ..." line (or how it died); "" when it succeeded
  double seconds = 0.0;    // wall time of this sweep's attempt
  nlohmann::json results;  // results.json of a finished or skipped point, else null
};

struct SweepOptions {
  std::string executable = "/proc/self/exe";  // the `causal` binary the points run as
  int64_t jobs = 1;                           // points trained at once
  int64_t cores = 0;                          // split between jobs; 0 = this machine's cores
  std::ostream* progress = nullptr;           // one line per point started and ended; nullptr = silent
};

struct SweepOutcome {
  std::vector<PointResult> points;  // in grid order
  int signal = 0;                   // SIGINT/SIGTERM that stopped the sweep, 0 if none
  size_t failed() const;
};

// Called in the sweep's own thread at the start (skipped points known) and after each point ends.
using SweepObserver = std::function<void(const std::vector<PointResult>& points)>;

// Prepares the sweep folder (sweep.json, lock) and runs the points not yet finished. `configs` are the
// resolved configs of `points` (resolve_points). A finished point whose config.json differs from its
// config in model, data, train or seed fails the sweep before anything runs (RunFolderError), as does a
// sweep folder locked by another sweep. SIGINT/SIGTERM are forwarded to the running points (a second
// one too, which makes them exit at once); no new point starts after one. Point failures do not throw:
// they are in the outcome.
SweepOutcome run_sweep(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                       const std::vector<RunConfig>& configs, const SweepOptions& options,
                       const SweepObserver& observer = nullptr);

}  // namespace causal
