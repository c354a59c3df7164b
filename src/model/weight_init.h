// Whether the modules built now draw their initial weights. A model whose every weight is loaded next (an
// adapter run's base) skips the draws: its float32 weights then stay unwritten, so their pages are not yet
// resident, until the load writes each one, and a base held in less than float32 (train.lora.base_dtype)
// frees each before the next is read. Without this the whole float32 model would be resident once, at
// construction, and set the run's peak memory whatever the base is held in.
#pragma once

namespace causal {

// For its lifetime, on this thread, the model's constructors leave their weights as allocated: random,
// uninitialised values that something must overwrite before a forward. Norm scales (ones) and biases
// (zeros) are still set: they are small and no draw. So is the frontend's Embedding, which draws its own
// init in its constructor (a table that is loaded as float32 anyway). With `skip` false it changes nothing,
// for a caller that skips only sometimes.
class SkipWeightInit {
 public:
  explicit SkipWeightInit(bool skip = true);
  ~SkipWeightInit();
  SkipWeightInit(const SkipWeightInit&) = delete;
  SkipWeightInit& operator=(const SkipWeightInit&) = delete;

 private:
  bool before_;
};

// False inside a SkipWeightInit: the constructors' draws (normal, kaiming) are skipped.
bool draws_initial_weights();

}  // namespace causal
