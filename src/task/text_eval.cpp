// Text evaluation.
#include "task/text_eval.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <cmath>
#include <cstdio>

#include "data/tokenizer.h"
#include "task/objective.h"

namespace causal {
namespace {

// Bytes each id decodes to, so bits per byte holds for any tokenizer, not only the byte-level one.
at::Tensor bytes_per_id(const TokenizerInfo& info) {
  auto tokenizer = make_tokenizer(info.name);
  at::Tensor table = at::zeros({info.vocab_size}, at::kLong);
  auto t = table.accessor<int64_t, 1>();
  for (int64_t id = 0; id < info.vocab_size; ++id)
    t[id] = static_cast<int64_t>(tokenizer->decode({id}).size());
  return table;
}

}  // namespace

nlohmann::json TextEvalReport::to_json(const std::string& prefix) const {
  return {{prefix + "loss", loss},
          {prefix + "perplexity", perplexity},
          {prefix + "bits_per_byte", bits_per_byte},
          {prefix + "tokens", tokens},
          {prefix + "bytes", bytes}};
}

TextEvalReport evaluate_text(Transformer& model, const TokenFile& file, const TextRowOptions& options,
                             int64_t batch_size, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const at::Tensor byte_table = bytes_per_id(file.tokenizer());
  double loss_total = 0.0;
  TextEvalReport report;
  for_each_eval_batch(file, options, batch_size, [&](const Batch& batch) {
    const Batch b = batch.to(device);
    loss_total += loss_sum(model->forward(model_inputs(b)).logits, b.labels).item<double>();
    const at::Tensor valid = batch.labels.ne(kIgnoreLabel);
    report.tokens += valid.sum().item<int64_t>();
    report.bytes += byte_table.index_select(0, batch.labels.masked_select(valid)).sum().item<int64_t>();
  });
  if (was_training) model->train();
  report.loss = report.tokens > 0 ? loss_total / static_cast<double>(report.tokens) : 0.0;
  report.perplexity = std::exp(report.loss);
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
  char line[160];
  for (const char* key : {"initial_loss", "val_loss", "val_perplexity", "val_bits_per_byte",
                          "final_train_loss", "tokens_per_s", "train_seconds"}) {
    if (!results.contains(key)) continue;
    std::snprintf(line, sizeof(line), "  %-22s %12.6g\n", key, results[key].get<double>());
    out += line;
  }
  return out;
}

}  // namespace causal
