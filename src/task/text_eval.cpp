// Text evaluation.
#include "task/text_eval.h"

#include <ATen/ATen.h>
#include <spdlog/fmt/fmt.h>
#include <torch/autograd.h>

#include <cmath>

#include "data/tokenizer.h"
#include "task/objective.h"

namespace causal {
namespace {

// Every label of a file is scored once, so the bytes they stand for are the text bytes of all its
// documents, as the encoder recorded them: exact for any tokenizer. Unknown (-1) for imported ids.
int64_t text_bytes(const TokenFile& file) {
  if (!file.header().document_bytes_known) return -1;
  int64_t bytes = 0;
  for (int64_t d = 0; d < file.num_documents(); ++d) bytes += file.document_bytes(d);
  return bytes;
}

}  // namespace

nlohmann::json TextEvalReport::to_json(const std::string& prefix) const {
  nlohmann::json j = {
      {prefix + "loss", loss}, {prefix + "perplexity", perplexity}, {prefix + "tokens", tokens}};
  if (bytes >= 0) {
    j[prefix + "bits_per_byte"] = bits_per_byte;
    j[prefix + "bytes"] = bytes;
  }
  return j;
}

TextEvalReport evaluate_text(Transformer& model, const TokenFile& file, const TextRowOptions& options,
                             int64_t batch_size, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  double loss_total = 0.0;
  TextEvalReport report;
  for_each_eval_batch(file, options, batch_size, [&](const Batch& batch) {
    const Batch b = batch.to(device);
    loss_total += loss_sum(model->forward(model_inputs(b)).logits, b.labels).item<double>();
    const at::Tensor valid = batch.labels.ne(kIgnoreLabel);
    report.tokens += valid.sum().item<int64_t>();
  });
  if (was_training) model->train();
  report.loss = report.tokens > 0 ? loss_total / static_cast<double>(report.tokens) : 0.0;
  report.perplexity = std::exp(report.loss);
  report.bytes = text_bytes(file);
  report.bits_per_byte =
      report.bytes > 0 ? loss_total / std::log(2.0) / static_cast<double>(report.bytes) : 0.0;
  return report;
}

double text_fixed_batch_loss(Transformer& model, const TokenFile& file, const TextRowOptions& options,
                             int64_t batch_size, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  const Batch b = TextEvalBatches(file, options, batch_size).batch(0).to(device);
  const double valid = static_cast<double>(std::max<int64_t>(b.valid_tokens(), 1));
  return loss_sum(model->forward(model_inputs(b)).logits, b.labels).item<double>() / valid;
}

std::string format_text_table(const nlohmann::json& results) {
  std::string out = "text results\n";
  for (const char* key : {"initial_loss", "val_loss", "val_perplexity", "val_bits_per_byte",
                          "final_train_loss", "tokens_per_s", "train_seconds"}) {
    if (!results.contains(key)) continue;
    out += fmt::format("  {:<22} {:12.6g}\n", key, results[key].get<double>());
  }
  return out;
}

}  // namespace causal
