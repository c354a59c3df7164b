// Skipping the initial draws of a model to be loaded (see weight_init.h).
#include "model/weight_init.h"

namespace causal {
namespace {

thread_local bool skip_draws = false;

}  // namespace

SkipWeightInit::SkipWeightInit(bool skip) : before_(skip_draws) { skip_draws = skip_draws || skip; }

SkipWeightInit::~SkipWeightInit() { skip_draws = before_; }

bool draws_initial_weights() { return !skip_draws; }

}  // namespace causal
