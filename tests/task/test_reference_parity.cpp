// Independent check: tests/reference/reference_model.py (our own float64 PyTorch implementation of the same
// architecture) reads model.safetensors + config.json and reproduces causal's logits and loss within the
// float32 rounding bounds of tests/support/tolerance.h.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "config/config_io.h"
#include "io/safetensors.h"
#include "model/transformer.h"
#include "support/cli.h"
#include "support/skip.h"
#include "support/tolerance.h"
#include "task/objective.h"

using namespace causal;
namespace fs = std::filesystem;

namespace {

// A packed batch: two documents and padding in row 0, one document in row 1, positions per document.
Batch packed_batch(int64_t vocab) {
  Batch b;
  b.tokens = torch::randint(vocab, {2, 8, 1}, torch::kLong);
  b.positions = torch::tensor({0, 1, 2, 0, 1, 2, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7}, torch::kLong).view({2, 8});
  b.segment_ids = torch::tensor({1, 1, 1, 2, 2, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}, torch::kLong).view({2, 8});
  b.key_valid = b.segment_ids > 0;
  b.labels = torch::randint(vocab, {2, 8}, torch::kLong).masked_fill(~b.key_valid, kIgnoreLabel);
  return b;
}

struct Comparison {
  int exit_code = -1;
  nlohmann::json figures;
  double logit_bound = 0.0, loss_bound = 0.0;  // causal's float32 against exact (tolerance.h (4))
  double tol() const { return std::max(logit_bound, loss_bound); }  // the tool's --tol
};

// Writes the checkpoint files and the batch with causal's logits (+ `shift` times the bound) and loss; runs
// the tool with --tol at the bound.
Comparison compare_with_reference(const RunConfig& config, const fs::path& dir, double shift = 0.0) {
  fs::create_directories(dir);
  torch::manual_seed(3);
  Transformer model(config.model);
  model->eval();
  Batch b = packed_batch(config.model.output_vocab);
  torch::NoGradGuard no_grad;
  // Biases start at zero: moved off it, so that the reference must add each one where causal does.
  for (auto& p : model->named_parameters()) {
    const std::string& name = p.key();
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0) p.value().normal_(0.0, 0.2);
  }
  const at::Tensor logits = model->forward(model_inputs(b)).logits;
  const at::Tensor loss = loss_sum(logits, b.labels) / b.valid_tokens();
  Comparison result;
  result.logit_bound = testing::logits_bound(config.model, logits, 8, 8).max().item<double>();
  result.loss_bound = testing::loss_bound(result.logit_bound, loss.item<double>(), b.valid_tokens());
  NamedTensors weights;
  for (const auto& item : model->named_parameters()) weights.emplace_back(item.key(), item.value());
  save_safetensors((dir / "model.safetensors").string(), weights);
  std::ofstream(dir / "config.json") << config_to_json(config).dump(2);
  save_safetensors((dir / "batch.safetensors").string(), {{"tokens", b.tokens},
                                                          {"positions", b.positions},
                                                          {"segment_ids", b.segment_ids},
                                                          {"key_valid", b.key_valid},
                                                          {"labels", b.labels},
                                                          {"logits", logits + shift * result.tol()},
                                                          {"loss", loss}});
  const std::string cmd = std::string("/usr/bin/python3 ") + CAUSAL_SOURCE_DIR +
                          "/tests/reference/reference_model.py --checkpoint " + dir.string() + " --batch " +
                          (dir / "batch.safetensors").string() + " --tol " +
                          nlohmann::json(result.tol()).dump() + " --json >" + (dir / "out.json").string();
  const int status = std::system(cmd.c_str());
  result.exit_code = WEXITSTATUS(status);
  result.figures = nlohmann::json::parse(testing::slurp(dir / "out.json"));
  return result;
}

RunConfig model_config(const std::string& json) {
  RunConfig c = parse_config_text(R"({"model": )" + json + "}", "parity test", {}, ConfigScope::kModel);
  return c;
}

}  // namespace

CATCH_TEST_CASE("reference: an independent PyTorch model reproduces causal's logits and loss",
                "[e2e][parity][numerics]") {
  if (std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0)
    CAUSAL_SKIP_TEST("/usr/bin/python3 cannot import torch (Debian python3-torch)");
  const fs::path root = fs::temp_directory_path() / ("causal_parity_" + std::to_string(::getpid()));
  const std::vector<std::pair<std::string, std::string>> models = {
      {"gelu-layernorm-learned",
       R"({"inputs": [{"name": "token", "vocab": 37}], "output_vocab": 37, "d_model": 32, "n_layers": 2,
           "n_heads": 4, "ffn": "gelu", "norm": "layernorm", "position": "learned", "max_seq_len": 8,
           "bias": true, "init_std": 0.2})"},
      // GPT-2's tanh GELU with q/k/v biases only; Qwen2's shape (q/k/v biases, GQA, halves, tied).
      {"gelu-tanh-layernorm-learned-qkv-bias",
       R"({"inputs": [{"name": "token", "vocab": 37}], "output_vocab": 37, "d_model": 32, "n_layers": 2,
           "n_heads": 4, "ffn": "gelu_tanh", "norm": "layernorm", "position": "learned", "max_seq_len": 8,
           "bias": false, "qkv_bias": true, "init_std": 0.2})"},
      {"qwen2-swiglu-rmsnorm-rope-qkv-bias",
       R"({"inputs": [{"name": "token", "vocab": 37}], "output_vocab": 37, "d_model": 32, "n_layers": 2,
           "n_heads": 4, "n_kv_heads": 2, "ffn": "swiglu", "norm": "rmsnorm", "position": "rope",
           "rope": {"pairing": "halves"}, "max_seq_len": 8, "bias": false, "qkv_bias": true,
           "tie_embeddings": true, "init_std": 0.2})"},
      {"swiglu-rmsnorm-rope-gqa",
       R"({"inputs": [{"name": "token", "vocab": 37}], "output_vocab": 37, "d_model": 32, "n_layers": 2,
           "n_heads": 4, "n_kv_heads": 2, "ffn": "swiglu", "norm": "rmsnorm", "position": "rope",
           "rope": {"pairing": "halves"}, "max_seq_len": 8, "bias": false, "qk_norm": true,
           "tie_embeddings": true, "init_std": 0.2})"},
      // Evaluation-time RoPE scaling against the reference's own per-pair formulas: yarn with a partial
      // ramp (original length 64: pairs keep 1, .5, 0, 0 of their frequency) and its temperature, ntk.
      {"relu-layernorm-rope-yarn",
       R"({"inputs": [{"name": "token", "vocab": 37}], "output_vocab": 37, "d_model": 32, "n_layers": 2,
           "n_heads": 4, "ffn": "relu", "norm": "layernorm", "position": "rope", "max_seq_len": 8,
           "rope": {"scaling": "yarn", "factor": 4, "original_max_seq_len": 64}, "init_std": 0.2})"},
      {"relu-rmsnorm-rope-ntk",
       R"({"inputs": [{"name": "token", "vocab": 37}], "output_vocab": 37, "d_model": 32, "n_layers": 2,
           "n_heads": 4, "ffn": "relu", "norm": "rmsnorm", "position": "rope", "max_seq_len": 8,
           "rope": {"scaling": "ntk", "factor": 8, "pairing": "halves"}, "init_std": 0.2})"},
      // A sliding window of 3 keys on the flash kernel: the reference applies the window rule itself.
      {"swiglu-rmsnorm-rope-window-flash",
       R"({"inputs": [{"name": "token", "vocab": 37}], "output_vocab": 37, "d_model": 32, "n_layers": 2,
           "n_heads": 4, "ffn": "swiglu", "norm": "rmsnorm", "position": "rope", "max_seq_len": 8,
           "attention": "flash", "attention_block": 3, "attention_window": 3, "bias": false,
           "init_std": 0.2})"}};
  for (const auto& [name, json] : models) {
    CATCH_INFO(name);
    const Comparison result = compare_with_reference(model_config(json), root / name);
    const nlohmann::json& out = result.figures;
    CATCH_CHECK(result.exit_code == 0);
    CATCH_CHECK(testing::scalars_close(out["max_abs_logit_diff"].get<double>(), 0.0, result.logit_bound,
                                       "max |logit diff|"));
    CATCH_CHECK(testing::scalars_close(out["loss_diff"].get<double>(), 0.0, result.loss_bound, "loss diff"));
    CATCH_CHECK(out["loss_ref"].get<double>() > 1.0);  // logits far from uniform would show a real mismatch
    CATCH_WARN(name << ": max |logit diff| " << out["max_abs_logit_diff"].get<double>() << " (bound "
                    << result.logit_bound << "), loss diff " << out["loss_diff"].get<double>() << " (bound "
                    << result.loss_bound << ")");
  }
  // The comparison can fail: logits off by twice the tolerance are reported (exit code 1).
  const Comparison off = compare_with_reference(model_config(models[0].second), root / "shifted", 2.0);
  CATCH_CHECK(off.exit_code == 1);
  CATCH_CHECK(off.figures["max_abs_logit_diff"].get<double>() > off.tol());
  fs::remove_all(root);
}
