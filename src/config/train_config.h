// Train section of the run config: every field declared once, with its default and a one-line comment.
// visit_fields() is the single list of fields that JSON in/out, --set overrides and docs walk.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/enums.h"

namespace causal {

struct OptimizerConfig {
  double lr = 3e-4;                         // peak learning rate
  std::vector<double> betas = {0.9, 0.95};  // AdamW moment decay rates
  double eps = 1e-8;                        // AdamW denominator epsilon
  double weight_decay = 0.1;                // decoupled weight decay
  bool decay_norms_and_embeddings = false;  // also decay norm weights, biases and embeddings
  // "auto": fused on a GPU (LibTorch 2.x), else "separate" | "fused": one multi-tensor kernel a step
  // (LibTorch 2.x) | "separate": whole-tensor operations, LibTorch 1.13's arithmetic bit for bit
  OptimizerKernel kernel = OptimizerKernel::kAuto;

  template <class V>
  void visit_fields(V& v) {
    v.field("lr", lr);
    v.field("betas", betas);
    v.field("eps", eps);
    v.field("weight_decay", weight_decay);
    v.field("decay_norms_and_embeddings", decay_norms_and_embeddings);
    v.field("kernel", kernel);
  }
};

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::kCosine;  // "constant" | "linear" | "cosine" | "wsd"
  int64_t warmup_steps = 0;                   // linear ramp from lr/warmup_steps to lr
  double min_lr_ratio = 0.1;                  // floor of the decay, as a fraction of lr
  double decay_fraction = 0.2;                // wsd: final fraction of steps spent decaying

  template <class V>
  void visit_fields(V& v) {
    v.field("kind", kind);
    v.field("warmup_steps", warmup_steps);
    v.field("min_lr_ratio", min_lr_ratio);
    v.field("decay_fraction", decay_fraction);
  }
};

// LoRA adapters (docs/finetune.md): with rank > 0 the model's weights are frozen and only a low-rank
// update B A (B zero at the start) of each targeted product trains: y = x W^T + scale (x A^T) B^T.
struct LoraConfig {
  int64_t rank = 0;      // r; 0 = no adapters: every weight trains
  double alpha = 16.0;   // scale = alpha / r (alpha / sqrt(r) with rslora)
  double dropout = 0.0;  // on the adapter's input, train mode only
  // products adapted: any of "q", "k", "v", "o", "gate", "up", "down" (a GELU FFN's fc_in is "up", fc_out
  // "down"; "gate" is SwiGLU's) and "head" (an untied output head)
  std::vector<std::string> targets = {"q", "k", "v", "o", "gate", "up", "down"};
  bool rslora = false;  // rank-stabilised scale alpha / sqrt(r)
  // "kaiming": A kaiming-uniform (a = sqrt(5)), as PEFT's default | "gaussian": A normal(0, 1/r); B zero
  LoraInit init = LoraInit::kKaiming;
  // DoRA: each adapted product also trains a magnitude per output row (docs/finetune.md#dora)
  bool dora = false;
  // how the frozen base's product weights are held (docs/finetune.md#base-dtypes): "f32" | "bf16" |
  // ggml blocks "q8_0", "q4_0", "q4_1", "q4_k", each dequantized a tile of rows at a time in the product
  BaseDtype base_dtype = BaseDtype::kF32;

  bool enabled() const { return rank > 0; }

  template <class V>
  void visit_fields(V& v) {
    v.field("rank", rank);
    v.field("alpha", alpha);
    v.field("dropout", dropout);
    v.field("targets", targets);
    v.field("rslora", rslora);
    v.field("init", init);
    v.field("dora", dora);
    v.field("base_dtype", base_dtype);
  }
};

// The target names train.lora.targets accepts, in the order products run.
inline const std::vector<std::string>& lora_target_names() {
  static const std::vector<std::string> names = {"q", "k", "v", "o", "gate", "up", "down", "head"};
  return names;
}

struct TrainConfig {
  int64_t steps = 1000;     // optimizer steps
  int64_t batch_size = 32;  // sequences per micro-batch
  int64_t grad_accum = 1;   // micro-batches per optimizer step
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  double grad_clip = 1.0;  // max global grad norm; 0 = no clipping (norm still logged)
  int64_t log_every = 10;  // steps between metrics rows (the first and last step always log)
  int64_t eval_every = 0;  // steps between evaluations; 0 = only at the end
  std::vector<std::string> eval_tasks =
      {};                        // text: multiple-choice benchmarks (JSONL) scored at each evaluation
  int64_t checkpoint_every = 0;  // steps between checkpoints; 0 = only at the end
  int64_t keep_checkpoints = 3;  // newest checkpoints kept
  NonfiniteAction nonfinite = NonfiniteAction::kAbort;  // "abort" | "skip" on a non-finite loss/grad
  int64_t max_consecutive_skips = 5;  // "skip": abort (exit 5) after this many skipped steps in a row
  int64_t diag_every = 50;            // steps between per-layer grad norms and update/weight ratios
  int64_t spike_window = 100;         // steps in the rolling mean/std of loss and grad norm
  double spike_threshold = 6.0;       // z-score above which a step is flagged as a spike
  // "auto": "chunked" when a micro-batch's float32 logits would pass 256 MiB, else "logits" | "logits": the
  // whole (rows, V) logits, then the loss | "chunked": the head's product and the loss a chunk of rows at a
  // time, gradients made with them (docs/model.md#chunked-loss)
  LossKernel loss_kernel = LossKernel::kAuto;
  int64_t loss_chunk_rows = 0;  // rows per chunk; 0 = as many as keep a chunk's float32 logits in 256 MiB
  // "auto": on a GPU of a CAUSAL_CUDA build, each micro-batch's forward and backward replayed from a CUDA
  // graph where nothing observes it | "off": always eager (docs/gpu.md#cuda-graphs)
  CudaGraphs cuda_graphs = CudaGraphs::kAuto;
  LoraConfig lora;  // adapters instead of full fine-tuning (rank 0: off)

  template <class V>
  void visit_fields(V& v) {
    v.field("steps", steps);
    v.field("batch_size", batch_size);
    v.field("grad_accum", grad_accum);
    v.field("optimizer", optimizer);
    v.field("schedule", schedule);
    v.field("grad_clip", grad_clip);
    v.field("log_every", log_every);
    v.field("eval_every", eval_every);
    v.field("eval_tasks", eval_tasks);
    v.field("checkpoint_every", checkpoint_every);
    v.field("keep_checkpoints", keep_checkpoints);
    v.field("nonfinite", nonfinite);
    v.field("max_consecutive_skips", max_consecutive_skips);
    v.field("diag_every", diag_every);
    v.field("spike_window", spike_window);
    v.field("spike_threshold", spike_threshold);
    v.field("loss_kernel", loss_kernel);
    v.field("loss_chunk_rows", loss_chunk_rows);
    v.field("cuda_graphs", cuda_graphs);
    v.field("lora", lora);
  }
};

}  // namespace causal
