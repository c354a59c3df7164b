// One example through a run's newest valid checkpoint with attention weights collected, for the report's
// heatmaps: retrieval -> the first test example; text -> the first (up to 32) positions of the first
// validation row.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace causal {

struct AttentionSample {
  int64_t step = 0;                 // the checkpoint's step
  std::string checkpoint;           // its directory
  std::string input;                // one line saying which example this is
  std::string outcome;              // retrieval: the model's answer vs the true one; text: the snippet
  std::vector<std::string> tokens;  // a short label per position (a byte as its character, "k3:v5", ...)
  int64_t layers = 0, heads = 0, length = 0;  // L, Hq, T
  std::vector<float> weights;                 // (L,Hq,T,T) row-major: weights[l][h][query][key]
  std::vector<bool> allowed;  // (T,T): the mask lets query t see key s (causal, padding, segments)

  float weight(int64_t layer, int64_t head, int64_t query, int64_t key) const {
    return weights[((layer * heads + head) * length + query) * length + key];
  }
};

// Loads the newest valid checkpoint of `run_dir` (on the CPU) and runs the example. Throws
// CheckpointError when there is none, DataError when the data it needs cannot be read.
AttentionSample sample_attention(const std::string& run_dir, int64_t max_text_tokens = 32);

}  // namespace causal
