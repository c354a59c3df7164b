// Training batches for the retrieval task: rows drawn uniformly with replacement, as in the lab
// (docs/retrieval-lab.md).
#pragma once

#include <ATen/core/Generator.h>

#include "data/batch_source.h"
#include "data/retrieval_data.h"

namespace causal {

class RetrievalSampler : public BatchSource {
 public:
  // `split` must outlive the sampler; `seed` drives only the row draws.
  RetrievalSampler(const RetrievalSplit& split, int64_t batch_size, uint64_t seed);
  Batch next() override;
  nlohmann::json state() const override;  // {"generator": hex state of the row-draw generator}
  void restore(const nlohmann::json& state) override;

 private:
  const RetrievalSplit& split_;
  int64_t batch_size_;
  at::Generator generator_;
};

}  // namespace causal
