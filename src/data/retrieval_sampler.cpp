// Retrieval training sampler.
#include "data/retrieval_sampler.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace causal {

RetrievalSampler::RetrievalSampler(const RetrievalSplit& split, int64_t batch_size, uint64_t seed)
    : split_(split), batch_size_(batch_size), generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

Batch RetrievalSampler::next() {
  at::Tensor rows = at::randint(split_.size(), {batch_size_}, generator_, at::kLong);  // (B)
  return split_.batch(rows);
}

}  // namespace causal
