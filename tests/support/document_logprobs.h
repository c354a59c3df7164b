// Test helper: a run's per-token log-probabilities of token sequences (every document in a token file, or
// given ids), as the interop tests hand them to the consumers (llama.cpp, transformers) to compare.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/token_file.h"
#include "review/checkpoint_model.h"

namespace causal::testing {

// {"docs": [[ids...]...], "logprobs": [[log p(ids[i+1] | ids[..i])...]...]}: float64 log-softmax of the
// newest checkpoint's float32 logits, each sequence alone from its first id.
inline nlohmann::json sequence_logprobs(const std::filesystem::path& run,
                                        const std::vector<std::vector<int64_t>>& sequences) {
  CheckpointModel loaded = load_checkpoint_model(run.string(), "", {});
  nlohmann::json docs = {{"docs", nlohmann::json::array()}, {"logprobs", nlohmann::json::array()}};
  torch::NoGradGuard no_grad;
  for (const std::vector<int64_t>& ids : sequences) {
    const torch::Tensor tokens = torch::tensor(std::vector<int64_t>(ids.begin(), ids.end() - 1)).unsqueeze(0);
    const torch::Tensor logp = loaded.model->forward({tokens}).logits[0].to(torch::kDouble).log_softmax(-1);
    const torch::Tensor labels = torch::tensor(std::vector<int64_t>(ids.begin() + 1, ids.end()));
    const torch::Tensor picked = logp.gather(1, labels.unsqueeze(1)).squeeze(1).contiguous();
    docs["docs"].push_back(ids);
    docs["logprobs"].push_back(
        std::vector<double>(picked.data_ptr<double>(), picked.data_ptr<double>() + picked.numel()));
  }
  return docs;
}

// sequence_logprobs of every document in a token file, each from its BOS.
inline nlohmann::json document_logprobs(const std::filesystem::path& run, const std::filesystem::path& held) {
  const TokenFile file(held.string());
  std::vector<std::vector<int64_t>> documents;
  for (int64_t d = 0; d < file.num_documents(); ++d) documents.push_back(file.document(d));
  return sequence_logprobs(run, documents);
}

}  // namespace causal::testing
