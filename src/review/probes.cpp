// Attention and ablation probes.
#include "review/probes.h"

#include <ATen/ATen.h>
#include <spdlog/fmt/fmt.h>
#include <torch/utils.h>

#include <algorithm>

#include "review/attention_observers.h"
#include "task/objective.h"

namespace causal {
namespace {

struct Score {
  double loss = 0.0, accuracy = 0.0;
};

Score score(Transformer& model, const ProbeSet& set, const c10::Device& device) {
  double loss = 0.0, correct = 0.0, count = 0.0;
  for (const Batch& cpu : set.batches) {
    const Batch b = cpu.to(device);
    const at::Tensor logits = model->forward(model_inputs(b)).logits;
    loss += loss_sum(logits, b.labels).item<double>();
    const at::Tensor labelled = b.labels != kIgnoreLabel;
    correct += (logits.argmax(-1).eq(b.labels) & labelled).sum().item<double>();
    count += labelled.sum().item<double>();
  }
  return {count > 0 ? loss / count : 0.0, count > 0 ? correct / count : 0.0};
}

}  // namespace

nlohmann::json attention_probe(Transformer& model, const ProbeSet& set, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  model->eval();
  const Batch b = set.batches.at(0).to(device);
  AttentionWeights weights_of;
  {
    const ForwardHooks::Registration watching(model->hooks(), weights_of);
    model->forward(model_inputs(b));
  }
  // Queries that are not padding; a query's allowed keys are those with weight > 0 under the mask.
  const at::Tensor valid_query =
      b.key_valid.defined() ? b.key_valid : at::ones_like(b.labels, at::kBool);  // (B,T)
  nlohmann::json layers = nlohmann::json::array();
  for (const at::Tensor& weights : weights_of.layers()) {  // (B,H,T,Tk)
    const at::Tensor p = weights.to(at::kDouble).cpu();
    const at::Tensor entropy = -(p * p.clamp_min(1e-300).log()).sum(-1);  // (B,H,T)
    const at::Tensor uniform = (p > 0).sum(-1).clamp_min(1).to(at::kDouble).log();
    const at::Tensor mask = valid_query.cpu().unsqueeze(1).expand_as(entropy).to(at::kDouble);
    const double queries = std::max(1.0, mask.select(1, 0).sum().item<double>());
    nlohmann::json heads = nlohmann::json::array();
    for (int64_t h = 0; h < p.size(1); ++h) {
      const at::Tensor map = p[0][h].to(at::kFloat).contiguous();
      std::vector<std::vector<float>> rows(static_cast<size_t>(map.size(0)));
      for (int64_t q = 0; q < map.size(0); ++q) {
        const float* row = map[q].data_ptr<float>();
        rows[static_cast<size_t>(q)].assign(row, row + map.size(1));
      }
      heads.push_back(
          {{"entropy", (entropy.select(1, h) * mask.select(1, h)).sum().item<double>() / queries},
           {"max_entropy", (uniform.select(1, h) * mask.select(1, h)).sum().item<double>() / queries},
           {"weights", rows}});
    }
    layers.push_back({{"heads", heads}});
  }
  return {{"labels", set.labels}, {"layers", layers}};
}

nlohmann::json head_ablation(Transformer& model, const ProbeSet& set, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  model->eval();
  const Score base = score(model, set, device);
  nlohmann::json heads = nlohmann::json::array();
  const ModelConfig& config = model->config();
  for (int64_t layer = 0; layer < config.n_layers; ++layer) {
    for (int64_t head = 0; head < config.n_heads; ++head) {
      HeadAblation ablation(layer, head);
      const ForwardHooks::Registration ablating(model->hooks(), ablation);
      const Score s = score(model, set, device);
      heads.push_back({{"layer", layer},
                       {"head", head},
                       {"loss", s.loss},
                       {"accuracy", s.accuracy},
                       {"delta_loss", s.loss - base.loss},
                       {"delta_accuracy", s.accuracy - base.accuracy}});
    }
  }
  return {{"baseline", {{"loss", base.loss}, {"accuracy", base.accuracy}}}, {"heads", heads}};
}

std::string format_head_ablation(const nlohmann::json& ablation) {
  std::vector<nlohmann::json> heads(ablation["heads"].begin(), ablation["heads"].end());
  std::sort(heads.begin(), heads.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["delta_loss"].get<double>() > b["delta_loss"].get<double>();
  });
  std::string out =
      fmt::format("head ablation (baseline loss {:.4f}, accuracy {:.4f})\n",
                  ablation["baseline"]["loss"].get<double>(), ablation["baseline"]["accuracy"].get<double>());
  out += "  layer head   loss     d_loss    accuracy  d_accuracy\n";
  for (const auto& h : heads) {
    out += fmt::format("  {:5} {:4}  {:8.4f} {:+9.4f}  {:8.4f}  {:+9.4f}\n", h["layer"].get<int64_t>(),
                       h["head"].get<int64_t>(), h["loss"].get<double>(), h["delta_loss"].get<double>(),
                       h["accuracy"].get<double>(), h["delta_accuracy"].get<double>());
  }
  return out;
}

}  // namespace causal
