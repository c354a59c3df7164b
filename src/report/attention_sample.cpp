// A checkpoint's attention weights on one example (see attention_sample.h).
#include "report/attention_sample.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "data/data_error.h"
#include "data/retrieval_task.h"
#include "data/text_batches.h"
#include "data/token_file.h"
#include "eval/checkpoint_model.h"
#include "eval/objective.h"

namespace causal {
namespace {

// The first `t` positions of a one-row batch.
Batch first_positions(const Batch& b, int64_t t) {
  auto cut = [t](const at::Tensor& x) { return x.defined() ? x.slice(1, 0, t).contiguous() : x; };
  return Batch{cut(b.tokens), cut(b.positions), cut(b.segment_ids), cut(b.key_valid), cut(b.labels)};
}

// A 1-D integer or bool tensor as int64 values.
std::vector<int64_t> values_of(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// What the mask lets query t see: key s <= t, both real positions, and the same segment when segments
// are used. Cells outside it are drawn as masked rather than as weight 0.
std::vector<bool> allowed_cells(const Batch& b) {
  const int64_t t = b.tokens.size(1);
  std::vector<bool> allowed(static_cast<size_t>(t * t), false);
  const std::vector<int64_t> ok =
      values_of(b.key_valid.defined() ? b.key_valid[0] : at::ones({t}, at::kLong));
  const std::vector<int64_t> sg =
      values_of(b.segment_ids.defined() ? b.segment_ids[0] : at::zeros({t}, at::kLong));
  for (int64_t q = 0; q < t; ++q) {
    for (int64_t k = 0; k <= q; ++k) allowed[q * t + k] = ok[q] != 0 && ok[k] != 0 && sg[q] == sg[k];
  }
  return allowed;
}

}  // namespace

std::string byte_token_label(int64_t id, int64_t bos_id, int64_t eos_id, int64_t pad_id) {
  if (id == bos_id) return "BOS";
  if (id == eos_id) return "EOS";
  if (id == pad_id) return "PAD";
  if (id == ' ') return "\u2423";   // ␣
  if (id == '\n') return "\u21b5";  // ↵
  if (id == '\t') return "\u21e5";  // ⇥
  if (id >= 33 && id < 127) return std::string(1, static_cast<char>(id));
  char buf[16];
  std::snprintf(buf, sizeof(buf), "x%02llX", static_cast<unsigned long long>(id));
  return buf;
}

AttentionSample sample_attention(const std::string& run_dir, int64_t max_text_tokens) {
  // The CPU is enough for one example and keeps a GPU run's report readable anywhere.
  CheckpointModel loaded = load_checkpoint_model(run_dir, "", {"device=cpu"});
  const RunConfig& config = loaded.config;
  AttentionSample sample;
  sample.step = loaded.checkpoint.state.step;
  sample.checkpoint = loaded.checkpoint.dir.string();

  Batch batch;
  at::Tensor answer;  // retrieval: (1) the true value id
  if (config.data.kind == DataKind::kRetrieval) {
    const RetrievalData data = build_retrieval_data(config.data);
    const at::Tensor first = at::zeros({1}, at::kLong);
    batch = data.test.batch(first);
    answer = data.test.answers.index_select(0, first);
    const int64_t t = batch.tokens.size(1);
    const std::vector<int64_t> keys = values_of(batch.tokens.select(2, 0)[0]);
    const std::vector<int64_t> values = values_of(batch.tokens.select(2, 1)[0]);
    const std::vector<int64_t> valid = values_of(batch.key_valid[0]);
    for (int64_t i = 0; i < t; ++i) {
      if (!valid[i]) {
        sample.tokens.push_back("pad");
      } else if (values[i] == data.mask_symbol) {
        sample.tokens.push_back("k" + std::to_string(keys[i]) + ":?");
      } else {
        sample.tokens.push_back("k" + std::to_string(keys[i]) + ":v" + std::to_string(values[i]));
      }
    }
    sample.input = "first test example: the query asks for context record " +
                   std::to_string(data.test.evidence[0].item<int64_t>()) + " (from 0), " +
                   std::to_string(data.test.distractors[0].item<int64_t>()) + " distractor records";
  } else {
    if (std::filesystem::path(config.data.val).is_relative() && !std::filesystem::exists(config.data.val)) {
      throw DataError(
          "[report] " + config.data.val + " not found from " + std::filesystem::current_path().string() +
          "; relative data paths are read from the directory the run was trained in: run the report "
          "from there");
    }
    const TokenFile file(config.data.val);
    const TextRowOptions options = TextRowOptions::from(config.data);
    const TextEvalBatches rows(file, options, /*batch_size=*/1);
    if (rows.num_rows() == 0) throw std::runtime_error("[report] " + config.data.val + " has no rows");
    const Batch row = rows.batch(0);
    const int64_t t = std::min<int64_t>(row.tokens.size(1), std::max<int64_t>(max_text_tokens, 1));
    batch = first_positions(row, t);
    const TokenizerInfo& info = file.tokenizer();
    const std::vector<int64_t> ids = values_of(batch.tokens.select(2, 0)[0]);
    std::string snippet;
    for (int64_t i = 0; i < t; ++i) {
      sample.tokens.push_back(byte_token_label(ids[i], info.bos_id, info.eos_id, info.pad_id));
      if (ids[i] < 256) snippet += static_cast<char>(ids[i]);
    }
    sample.input =
        "first " + std::to_string(t) + " positions of the first validation row of " + config.data.val;
    sample.outcome = snippet;
  }

  torch::NoGradGuard no_grad;
  ForwardOptions options;
  options.collect_attention = true;
  const ModelOutput out = loaded.model->forward(model_inputs(batch.to(loaded.device)), options);
  TORCH_CHECK(!out.attention.empty(), "[report] the model returned no attention weights");
  const int64_t t = batch.tokens.size(1);
  // (L,Hq,T,T): the first (only) example of each layer's (B,Hq,T,Tk).
  const at::Tensor weights = at::stack(out.attention, 0).select(1, 0).to(at::kCPU, at::kFloat).contiguous();
  TORCH_CHECK(weights.dim() == 4 && weights.size(2) == t && weights.size(3) == t,
              "[report] expected attention (L,Hq,T,T) with T=", t, ", got ", weights.sizes());
  sample.layers = weights.size(0);
  sample.heads = weights.size(1);
  sample.length = t;
  sample.weights.assign(weights.data_ptr<float>(), weights.data_ptr<float>() + weights.numel());
  sample.allowed = allowed_cells(batch);

  if (answer.defined()) {
    const int64_t predicted = out.logits[0][t - 1].argmax().item<int64_t>();
    const int64_t truth = answer[0].item<int64_t>();
    sample.outcome = "model answers v" + std::to_string(predicted) + ", correct answer v" +
                     std::to_string(truth) + (predicted == truth ? " (right)" : " (wrong)");
  }
  return sample;
}

}  // namespace causal
