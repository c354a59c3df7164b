// Health figures computed from parameters, gradients and traced activations.
#include "train/diagnostics.h"

#include <sys/resource.h>

#include <cmath>

#include "model/count_parameters.h"

namespace causal {
namespace {

// -1 for embed, n_layers for head, else the block index of a parameter name.
int64_t layer_of(const std::string& name, int64_t n_layers) {
  if (name.rfind("embed.", 0) == 0 || name.rfind("pos_embed.", 0) == 0) return -1;
  if (name.rfind("blocks.", 0) == 0) return std::stoll(name.substr(7, name.find('.', 7) - 7));
  return n_layers;
}

bool finite(const torch::Tensor& t) { return t.isfinite().all().item<bool>(); }

}  // namespace

LayerValues gradient_norms_by_layer(torch::nn::Module& model, int64_t n_layers) {
  torch::NoGradGuard no_grad;
  std::vector<double> squares(static_cast<size_t>(n_layers) + 2, 0.0);  // embed, blocks..., head
  for (const auto& item : model.named_parameters()) {
    const torch::Tensor& grad = item.value().grad();
    if (!grad.defined()) continue;
    const double norm = grad.norm().item<double>();
    squares[static_cast<size_t>(layer_of(item.key(), n_layers) + 1)] += norm * norm;
  }
  LayerValues out;
  out.embed = std::sqrt(squares.front());
  out.head = std::sqrt(squares.back());
  for (int64_t i = 0; i < n_layers; ++i) out.blocks.push_back(std::sqrt(squares[static_cast<size_t>(i) + 1]));
  return out;
}

std::vector<std::vector<torch::Tensor>> snapshot_blocks(torch::nn::Module& model, int64_t n_layers) {
  torch::NoGradGuard no_grad;
  std::vector<std::vector<torch::Tensor>> blocks(static_cast<size_t>(n_layers));
  // What trains: a frozen base would be copied whole each time, to show a ratio of 0.
  for (const auto& item : trainable_parameters(model)) {
    const int64_t layer = layer_of(item.key(), n_layers);
    if (layer >= 0 && layer < n_layers) blocks[static_cast<size_t>(layer)].push_back(item.value().clone());
  }
  return blocks;
}

std::vector<double> update_ratios(torch::nn::Module& model,
                                  const std::vector<std::vector<torch::Tensor>>& before) {
  torch::NoGradGuard no_grad;
  const int64_t n_layers = static_cast<int64_t>(before.size());
  std::vector<double> change(before.size(), 0.0), weight(before.size(), 0.0);
  std::vector<size_t> next(before.size(), 0);
  for (const auto& item : trainable_parameters(model)) {
    const int64_t layer = layer_of(item.key(), n_layers);
    if (layer < 0 || layer >= n_layers) continue;
    const auto l = static_cast<size_t>(layer);
    const torch::Tensor& old = before[l][next[l]++];
    change[l] += (item.value() - old).pow(2).sum().item<double>();
    weight[l] += old.pow(2).sum().item<double>();
  }
  std::vector<double> ratios;
  for (size_t l = 0; l < before.size(); ++l)
    ratios.push_back(weight[l] > 0 ? std::sqrt(change[l]) / std::sqrt(weight[l]) : 0.0);
  return ratios;
}

std::string first_nonfinite_parameter(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters()) {
    if (!finite(item.value())) return item.key();
  }
  return "";
}

std::string first_nonfinite_gradient(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters()) {
    const torch::Tensor& grad = item.value().grad();
    if (grad.defined() && !finite(grad)) return item.key();
  }
  return "";
}

std::string first_nonfinite_activation(const SublayerTrace& trace) {
  torch::NoGradGuard no_grad;
  for (const auto& [site, output] : trace.outputs()) {
    if (!finite(output)) return site.name();
  }
  return "";
}

double peak_rss_mib() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

}  // namespace causal
