// Fault spec parsing, the injected weight, activation and gradient faults, and the checkpoint-write faults.
#include "train/fault_injection.h"

#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>

#include "core/errors.h"
#include "train/forward_observers.h"

namespace causal {
namespace fs = std::filesystem;

std::string FaultInjection::describe() const {
  static const char* kinds[] = {"none", "weight", "activation", "gradient", "save"};
  return std::string(kinds[static_cast<int>(kind)]) + ":" + name + "@" + std::to_string(step);
}

FaultInjection FaultInjection::parse(const std::string& spec) {
  const auto colon = spec.find(':'), at = spec.rfind('@');
  const std::string usage = "--inject-fault " + spec +
                            ": expected KIND:NAME@STEP with KIND weight, activation or gradient, or "
                            "save:partial@STEP or save:pause@STEP";
  if (colon == std::string::npos || at == std::string::npos || at < colon + 2) throw UsageError(usage);
  FaultInjection fault;
  const std::string kind = spec.substr(0, colon);
  if (kind == "weight") {
    fault.kind = Kind::kWeight;
  } else if (kind == "activation") {
    fault.kind = Kind::kActivation;
  } else if (kind == "gradient") {
    fault.kind = Kind::kGradient;
  } else if (kind == "save") {
    fault.kind = Kind::kSave;
  } else {
    throw UsageError(usage);
  }
  fault.name = spec.substr(colon + 1, at - colon - 1);
  if (fault.kind == Kind::kSave && fault.name != "partial" && fault.name != "pause") throw UsageError(usage);
  const std::string digits = spec.substr(at + 1);
  if (digits.empty() || digits.size() > 12 ||
      !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
    throw UsageError(usage);
  fault.step = std::stoll(digits);  // at most 12 digits: cannot overflow
  if (fault.step < 1) throw UsageError(usage);
  return fault;
}

void apply_save_fault(const FaultInjection& fault, const fs::path& dir, int64_t step) {
  if (fault.kind != FaultInjection::Kind::kSave || !fault.at(step)) return;
  if (fault.name == "pause") {
    // Plain write(2): the drill waits for this exact line before it kills the process.
    const std::string line = "causal: injected fault " + fault.describe() + ": checkpoint write of step " +
                             std::to_string(step) + " paused in " + dir.string() + "\n";
    [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
    std::this_thread::sleep_for(std::chrono::seconds(3));
    return;
  }
  const fs::path file = dir / "optimizer.safetensors";
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  if (!ec) fs::resize_file(file, size / 2, ec);
  throw IoError("[io] cannot write " + file.string() + ": " + std::strerror(ENOSPC) + " (injected fault " +
                fault.describe() + ")");
}

void check_fault_target(torch::nn::Module& model, const FaultInjection& fault, int64_t n_layers) {
  if (fault.kind == FaultInjection::Kind::kActivation) {
    ActivationFault(fault.name, n_layers, fault.describe());
  } else if ((fault.kind == FaultInjection::Kind::kWeight || fault.kind == FaultInjection::Kind::kGradient) &&
             !model.named_parameters().contains(fault.name)) {
    throw UsageError("--inject-fault " + fault.describe() + ": no parameter " + fault.name +
                     " (names in docs/model.md)");
  }
}

void poison_parameter(torch::nn::Module& model, const std::string& name, bool gradient) {
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) {
    if (item.key() != name) continue;
    torch::Tensor target = gradient ? item.value().mutable_grad() : item.value();
    if (target.defined()) target.fill_(std::numeric_limits<float>::quiet_NaN());
    return;
  }
}

ActivationFault::ActivationFault(const std::string& name, int64_t n_layers, const std::string& spec) {
  for (const HookSite& site : traced_sites(n_layers)) {
    if (site.name() != name) continue;
    site_ = site;
    return;
  }
  throw UsageError("--inject-fault " + spec + ": no sub-layer " + name +
                   " (embed, blocks.<i>.attn, blocks.<i>.ffn, final_norm, logits)");
}

at::Tensor ActivationFault::observe(const HookSite& site, const at::Tensor& value) {
  if (site.layer != site_.layer) return value;
  return value + std::numeric_limits<float>::quiet_NaN();
}

}  // namespace causal
