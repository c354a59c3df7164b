// LoRA adapters (see lora.h).
#include "model/lora.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "model/transformer.h"

namespace causal {

LoraImpl::LoraImpl(const LoraOptions& options) : options_(options) {
  TORCH_CHECK(options_.rank() > 0 && options_.in_features() > 0 && options_.out_features() > 0,
              "[lora] expected rank, in and out > 0, got r=", options_.rank(), " in=", options_.in_features(),
              " out=", options_.out_features());
  a = register_parameter("a", torch::empty({options_.rank(), options_.in_features()}));
  b = register_parameter("b", torch::empty({options_.out_features(), options_.rank()}));
  if (options_.dora()) magnitude = register_parameter("magnitude", torch::ones({options_.out_features()}));
  reset_parameters();
}

void LoraImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  if (options_.init() == LoraInit::kKaiming) {
    torch::nn::init::kaiming_uniform_(a, std::sqrt(5.0));
  } else {
    torch::nn::init::normal_(a, 0.0, 1.0 / static_cast<double>(options_.rank()));
  }
  torch::nn::init::zeros_(b);
}

double LoraImpl::scale() const {
  const auto r = static_cast<double>(options_.rank());
  return options_.alpha() / (options_.rslora() ? std::sqrt(r) : r);
}

at::Tensor LoraImpl::folded_row_norms(const at::Tensor& weight) {
  torch::NoGradGuard no_grad;
  return torch::linalg_vector_norm(weight.to(b.scalar_type()) + b.mm(a) * scale(), 2, {1});  // (out)
}

void LoraImpl::reset_magnitude(const at::Tensor& weight) {
  TORCH_CHECK(options_.dora(), "[lora] reset_magnitude on an adapter without dora");
  torch::NoGradGuard no_grad;
  magnitude.copy_(folded_row_norms(weight));
}

at::Tensor LoraImpl::delta(const at::Tensor& x, const AdaptedProduct& product) {
  const double p = options_.dropout();
  const bool dropped = p > 0.0 && is_training();
  const at::Tensor in = dropped ? torch::dropout(x, p, true) : x;
  namespace F = torch::nn::functional;
  const at::Tensor lora = F::linear(F::linear(in, a), b) * scale();  // (..., r) -> (..., out)
  if (!options_.dora()) return lora;
  // (m / n) (x W^T + lora) - x W^T, with x W^T of the dropped input where dropout is live. In this order
  // the backward keeps one (..., out) tensor, x W^T + lora, for the magnitude's gradient.
  const at::Tensor unbiased =
      dropped ? F::linear(in, product.weight)
              : (product.bias_in_y.defined() ? product.y - product.bias_in_y : product.y);  // (..., out)
  const at::Tensor s = (magnitude / folded_row_norms(product.weight)).to(product.y.scalar_type());
  return s * (unbiased + lora) - unbiased;
}

at::Tensor LoraImpl::merged(const at::Tensor& weight) {
  const at::Tensor folded = weight + b.mm(a).mul(scale()).to(weight.scalar_type());  // (out, in)
  if (!options_.dora()) return folded;
  return (magnitude / folded_row_norms(weight)).to(weight.scalar_type()).unsqueeze(1) * folded;
}

std::string lora_target_of(const std::string& product_path) {
  if (product_path == "head") return "head";
  const size_t dot = product_path.rfind('.');
  const std::string leaf = dot == std::string::npos ? product_path : product_path.substr(dot + 1);
  static const std::vector<std::pair<std::string, std::string>> kLeaves = {
      {"q_proj", "q"},   {"k_proj", "k"},       {"v_proj", "v"}, {"o_proj", "o"},   {"gate_proj", "gate"},
      {"up_proj", "up"}, {"down_proj", "down"}, {"fc_in", "up"}, {"fc_out", "down"}};
  for (const auto& [name, target] : kLeaves)
    if (leaf == name) return target;
  return "";
}

std::vector<std::pair<std::string, LoraImpl*>> lora_adapters(torch::nn::Module& model) {
  std::vector<std::pair<std::string, LoraImpl*>> out;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    auto* product = dynamic_cast<LinearImpl*>(item.value().get());
    if (product == nullptr) continue;
    if (auto* lora = dynamic_cast<LoraImpl*>(product->adapter())) out.emplace_back(item.key(), lora);
  }
  return out;
}

void hold_base_weights(torch::nn::Module& model, BaseDtype dtype) {
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    if (auto* product = dynamic_cast<LinearImpl*>(item.value().get())) product->hold_weight(dtype);
}

std::function<void(const std::string&)> hold_each_loaded(torch::nn::Module& model, BaseDtype dtype) {
  if (dtype == BaseDtype::kF32) return [](const std::string&) {};
  std::map<std::string, LinearImpl*> products;
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    if (auto* product = dynamic_cast<LinearImpl*>(item.value().get()))
      products.emplace(item.key() + ".weight", product);
  return [products = std::move(products), dtype](const std::string& name) {
    const auto found = products.find(name);
    if (found != products.end()) found->second->hold_weight(dtype);
  };
}

std::map<std::string, at::Tensor> dense_parameters(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  std::map<std::string, at::Tensor> out;
  for (const auto& item : model.named_parameters())
    if (!is_adapter_parameter(item.key())) out[item.key()] = item.value().detach();
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    auto* product = dynamic_cast<LinearImpl*>(item.value().get());
    if (product != nullptr && product->held()) out[item.key() + ".weight"] = product->dense_weight();
  }
  return out;
}

std::map<std::string, at::Tensor> folded_parameters(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  std::map<std::string, at::Tensor> out = dense_parameters(model);
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    auto* product = dynamic_cast<LinearImpl*>(item.value().get());
    if (product != nullptr && product->adapter() != nullptr)
      out[item.key() + ".weight"] = product->adapter()->merged(out[item.key() + ".weight"]).detach();
  }
  return out;
}

void reset_dora_magnitudes(torch::nn::Module& model) {
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    auto* product = dynamic_cast<LinearImpl*>(item.value().get());
    if (product == nullptr) continue;
    auto* lora = dynamic_cast<LoraImpl*>(product->adapter());
    if (lora != nullptr && lora->options().dora()) lora->reset_magnitude(product->dense_weight());
  }
}

bool is_adapter_parameter(const std::string& name) {
  return name.find(".lora.") != std::string::npos || name.rfind("lora.", 0) == 0;
}

std::vector<std::string> attach_lora(TransformerImpl& model, const LoraConfig& config) {
  TORCH_CHECK(config.enabled(), "[lora] expected train.lora.rank > 0");
  for (at::Tensor& p : model.parameters()) p.requires_grad_(false);
  std::vector<std::string> adapted;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    auto* product = dynamic_cast<LinearImpl*>(item.value().get());
    if (product == nullptr) continue;
    const std::string target = lora_target_of(item.key());
    if (std::find(config.targets.begin(), config.targets.end(), target) == config.targets.end()) continue;
    TORCH_CHECK(product->adapter() == nullptr, "[lora] ", item.key(), " has an adapter already");
    const LoraOptions options =
        LoraOptions(product->options().in_features(), product->options().out_features(), config.rank)
            .alpha(config.alpha)
            .dropout(config.dropout)
            .rslora(config.rslora)
            .init(config.init)
            .dora(config.dora);
    Lora lora(options);
    lora->to(product->weight.device());
    lora->train(product->is_training());
    product->set_adapter(lora.ptr());
    adapted.push_back(item.key());
  }
  TORCH_CHECK(!adapted.empty(), "[lora] train.lora.targets matched no product of this model");
  return adapted;
}

}  // namespace causal
