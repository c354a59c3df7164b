// Retrieval training sampler.
#include "data/retrieval_sampler.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "core/errors.h"
#include "core/rng_state.h"

namespace causal {

RetrievalSampler::RetrievalSampler(const RetrievalSplit& split, int64_t batch_size, uint64_t seed)
    : split_(split), batch_size_(batch_size), generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

Batch RetrievalSampler::next() {
  at::Tensor rows = at::randint(split_.size(), {batch_size_}, generator_, at::kLong);  // (B)
  return split_.batch(rows);
}

nlohmann::json RetrievalSampler::state() const { return {{"generator", generator_state_hex(generator_)}}; }

void RetrievalSampler::restore(const nlohmann::json& state) {
  if (!state.is_object() || !state.contains("generator") || !state["generator"].is_string())
    throw DataError("[retrieval sampler] bad sampler state " + state.dump().substr(0, 80));
  try {
    restore_generator_state(generator_, state["generator"].get<std::string>(), "retrieval sampler");
  } catch (const std::runtime_error& e) {
    throw DataError(std::string("[retrieval sampler] ") + e.what());
  }
}

}  // namespace causal
