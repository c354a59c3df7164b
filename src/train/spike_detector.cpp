// Rolling z-scores.
#include "train/spike_detector.h"

#include <cmath>

namespace causal {
namespace {

// z-score of x against the values; 0 when they are too few or constant.
double z_score(const std::deque<double>& values, int64_t window, double x) {
  if (static_cast<int64_t>(values.size()) < window) return 0.0;
  double mean = 0.0;
  for (double v : values) mean += v;
  mean /= static_cast<double>(values.size());
  double var = 0.0;
  for (double v : values) var += (v - mean) * (v - mean);
  const double std = std::sqrt(var / static_cast<double>(values.size() - 1));
  // A perfectly flat window has no scale; a relative floor keeps rounding noise from counting as a spike.
  const double scale = std::max(std, 1e-3 * std::abs(mean) + 1e-12);
  return (x - mean) / scale;
}

void push(std::deque<double>& values, int64_t window, double x) {
  values.push_back(x);
  while (static_cast<int64_t>(values.size()) > window) values.pop_front();
}

}  // namespace

SpikeDetector::SpikeDetector(int64_t window, double threshold) : window_(window), threshold_(threshold) {}

SpikeFlags SpikeDetector::observe(double loss, double grad_norm) {
  SpikeFlags flags;
  if (!std::isfinite(loss) || !std::isfinite(grad_norm)) return flags;
  flags.loss_z = z_score(losses_, window_, loss);
  flags.grad_norm_z = z_score(grad_norms_, window_, grad_norm);
  flags.spike = flags.loss_z > threshold_ || flags.grad_norm_z > threshold_;
  push(losses_, window_, loss);
  push(grad_norms_, window_, grad_norm);
  return flags;
}

nlohmann::json SpikeDetector::state() const {
  return {{"loss", std::vector<double>(losses_.begin(), losses_.end())},
          {"grad_norm", std::vector<double>(grad_norms_.begin(), grad_norms_.end())}};
}

void SpikeDetector::restore(const nlohmann::json& state) {
  const auto losses = state.at("loss").get<std::vector<double>>();
  const auto norms = state.at("grad_norm").get<std::vector<double>>();
  losses_.assign(losses.begin(), losses.end());
  grad_norms_.assign(norms.begin(), norms.end());
}

}  // namespace causal
