// Replay of a forensics bundle.
#include "train/replay.h"

#include <sstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/forensics_bundle.h"
#include "config/config_io.h"
#include "core/runtime.h"
#include "model/lora.h"

namespace causal {

ReplayResult replay_step(const std::filesystem::path& bundle_dir) {
  const ForensicsBundle bundle = read_forensics(bundle_dir);
  const RunConfig config =
      parse_config_text(bundle.config.dump(), (bundle_dir / "config.json").string(), {kWithoutEvalTasks});
  // The run's own split: another one would round the step's products differently.
  if (bundle.threads) {
    apply_thread_split(*bundle.threads);
  } else {
    configure_threads(config.threads);
  }
  const c10::Device device = resolve_device(config.device);

  ReplayResult result;
  result.step = bundle.step;
  result.original_message = bundle.message;
  std::vector<Batch> micro_batches;
  for (const Batch& b : bundle.micro_batches) micro_batches.push_back(b.to(device));

  Transformer model(config.model);
  if (config.train.lora.enabled()) attach_lora(*model, config.train.lora);
  // A bundle keeps an adapter run's adapters alone; its float32 base is read from the base checkpoint, then
  // held as the run held it (quantized the same way from the same values: bit for bit what the step used).
  load_forensics_weights(bundle_dir, bundle, *model);
  if (config.train.lora.enabled()) hold_base_weights(*model, config.train.lora.base_dtype);
  model->to(device);
  model->train();
  const FaultInjection fault = bundle.fault.empty() ? FaultInjection{} : FaultInjection::parse(bundle.fault);
  restore_global_rng(bundle.rng_before, device);  // last: dropout must draw what the original step drew
  result.outcome = compute_step(model, micro_batches, config.train, /*log_row=*/true, /*diagnose=*/true,
                                fault, result.step);
  return result;
}

std::string format_replay(const ReplayResult& replay) {
  std::ostringstream out;
  out << "step " << replay.step << " as recorded: " << replay.original_message << "\n"
      << "step " << replay.step << " replayed:    loss=" << replay.outcome.grads.loss
      << " grad_norm=" << replay.outcome.grad_norm << " finite=" << std::boolalpha << replay.outcome.finite
      << (replay.outcome.finite ? "" : "; " + replay.outcome.nonfinite_cause) << "\n";
  return out.str();
}

}  // namespace causal
