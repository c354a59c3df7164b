// Loss-spike detection: a rolling z-score of the loss and of the pre-clip gradient norm over the last
// `window` finite steps. Its state is saved in checkpoints so a resumed run flags the same steps.
#pragma once

#include <deque>
#include <nlohmann/json.hpp>

namespace causal {

struct SpikeFlags {
  double loss_z = 0.0;       // (loss - mean) / std of the previous window; 0 until the window is full
  double grad_norm_z = 0.0;  // the same for the gradient norm
  bool spike = false;        // either z-score above the threshold
};

class SpikeDetector {
 public:
  SpikeDetector(int64_t window, double threshold);
  // Scores a step against the window before it, then adds it to the window. Non-finite values are
  // neither scored nor remembered.
  SpikeFlags observe(double loss, double grad_norm);

  nlohmann::json state() const;  // {"loss": [...], "grad_norm": [...]}, oldest first
  void restore(const nlohmann::json& state);

 private:
  int64_t window_;
  double threshold_;
  std::deque<double> losses_, grad_norms_;
};

}  // namespace causal
