// Run configuration: every field declared once, with its default and a one-line comment.
// Each struct's visit_fields() is the single list of fields that JSON in/out, --set overrides and docs walk.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/enums.h"

namespace causal {

// One input field of a position; the embeddings of all fields are summed (retrieval: key + value).
struct InputField {
  std::string name = "token";  // names the embedding table: parameter "embed.<name>.weight"
  int64_t vocab = 259;         // number of ids this field can take

  template <class V>
  void visit_fields(V& v) {
    v.field("name", name);
    v.field("vocab", vocab);
  }
};

struct RopeConfig {
  double theta = 10000.0;                           // base: pair i turns at theta^(-2i/dk) per position
  RopePairing pairing = RopePairing::kInterleaved;  // "interleaved": dims (2i,2i+1); "halves": (i, i+dk/2)
  RopeScaling scaling = RopeScaling::kNone;         // "linear" divides positions by factor (interpolation)
  double factor = 1.0;                              // position divisor for scaling "linear"

  template <class V>
  void visit_fields(V& v) {
    v.field("theta", theta);
    v.field("pairing", pairing);
    v.field("scaling", scaling);
    v.field("factor", factor);
  }
};

struct ModelConfig {
  std::vector<InputField> inputs = {InputField{}};  // summed input embeddings, one per field
  int64_t output_vocab = 259;                       // logits per position
  int64_t d_model = 128;                            // residual stream width
  int64_t n_layers = 2;                             // transformer blocks
  int64_t n_heads = 4;                              // query heads; head dim dk = d_model / n_heads
  int64_t n_kv_heads = 0;                           // key/value heads (GQA when < n_heads); 0 = n_heads
  FfnKind ffn = FfnKind::kGelu;                     // "gelu" | "swiglu"
  int64_t ffn_hidden = 0;                           // 0 = 4d (gelu) or 2/3*4d rounded up (swiglu)
  int64_t ffn_multiple_of = 8;                      // swiglu's default hidden width is rounded up to this
  NormKind norm = NormKind::kLayerNorm;             // "layernorm" | "rmsnorm"; always pre-norm + final norm
  double norm_eps = 1e-5;                           // added to the variance inside the norm
  PositionKind position = PositionKind::kRope;      // "none" | "learned" | "rope"
  int64_t max_seq_len = 256;                        // longest sequence (learned table size; checked for all)
  RopeConfig rope;                                  // used when position == "rope"
  AttentionKind attention = AttentionKind::kReference;  // "reference" (explicit scores) | "sdpa" (fused op)
  bool qk_norm = false;                                 // RMS-normalise q and k per head before scoring
  bool bias = true;                                     // biases in linear layers and LayerNorm
  bool tie_embeddings = false;                          // head reuses the (single) input embedding
  double dropout = 0.0;    // on attention weights and residual branches (train only)
  double init_std = 0.02;  // normal(0, init_std); residual outputs / sqrt(2*n_layers)

  template <class V>
  void visit_fields(V& v) {
    v.field("inputs", inputs);
    v.field("output_vocab", output_vocab);
    v.field("d_model", d_model);
    v.field("n_layers", n_layers);
    v.field("n_heads", n_heads);
    v.field("n_kv_heads", n_kv_heads);
    v.field("ffn", ffn);
    v.field("ffn_hidden", ffn_hidden);
    v.field("ffn_multiple_of", ffn_multiple_of);
    v.field("norm", norm);
    v.field("norm_eps", norm_eps);
    v.field("position", position);
    v.field("max_seq_len", max_seq_len);
    v.field("rope", rope);
    v.field("attention", attention);
    v.field("qk_norm", qk_norm);
    v.field("bias", bias);
    v.field("tie_embeddings", tie_embeddings);
    v.field("dropout", dropout);
    v.field("init_std", init_std);
  }

  int64_t head_dim() const { return d_model / n_heads; }
};

// The data section names its kind first; only that kind's fields belong in the file.
struct DataConfig {
  DataKind kind = DataKind::kRetrieval;  // "retrieval" (generated key/value task) | "text" (token files)

  // retrieval: sequences of `distractors + pairs` context records then one query record.
  int64_t key_count = 8;    // distinct keys; context keys in one example are distinct
  int64_t value_count = 8;  // distinct values; id value_count is the mask symbol
  int64_t pairs = 4;        // context records that may be queried
  int64_t distractors = 0;  // extra context records whose keys are never queried
  EvidencePosition evidence = EvidencePosition::kUniform;  // where the queried record sits
  int64_t evidence_index = 0;            // context index of the queried record when evidence == "fixed"
  std::vector<int64_t> eval_pairs = {};  // extra `pairs` counts evaluated (held-out lengths)
  int64_t train_examples = 2048;         // deduplicated training sequences
  int64_t test_examples = 384;           // test sequences, disjoint from training
  int64_t seed = 120;                    // data generator seed (train uses seed, test seed+1)

  // text: token files written by `causal data encode`.
  std::string train = "";                   // training token file (.tok)
  std::string val = "";                     // validation token file (.tok)
  int64_t seq_len = 256;                    // tokens per row
  TextLayout layout = TextLayout::kPacked;  // "packed" | "padded"
  bool isolate_documents = true;            // packed rows: documents cannot attend to each other

  template <class V>
  void visit_fields(V& v) {
    v.field("kind", kind);
    if (kind == DataKind::kRetrieval) {
      v.field("key_count", key_count);
      v.field("value_count", value_count);
      v.field("pairs", pairs);
      v.field("distractors", distractors);
      v.field("evidence", evidence);
      v.field("evidence_index", evidence_index);
      v.field("eval_pairs", eval_pairs);
      v.field("train_examples", train_examples);
      v.field("test_examples", test_examples);
      v.field("seed", seed);
    } else {
      v.field("train", train);
      v.field("val", val);
      v.field("seq_len", seq_len);
      v.field("layout", layout);
      v.field("isolate_documents", isolate_documents);
    }
  }
};

struct OptimizerConfig {
  double lr = 3e-4;                         // peak learning rate
  std::vector<double> betas = {0.9, 0.95};  // AdamW moment decay rates
  double eps = 1e-8;                        // AdamW denominator epsilon
  double weight_decay = 0.1;                // decoupled weight decay
  bool decay_norms_and_embeddings = false;  // also decay norm weights, biases and embeddings

  template <class V>
  void visit_fields(V& v) {
    v.field("lr", lr);
    v.field("betas", betas);
    v.field("eps", eps);
    v.field("weight_decay", weight_decay);
    v.field("decay_norms_and_embeddings", decay_norms_and_embeddings);
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

struct TrainConfig {
  int64_t steps = 1000;     // optimizer steps
  int64_t batch_size = 32;  // sequences per micro-batch
  int64_t grad_accum = 1;   // micro-batches per optimizer step
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  double grad_clip = 1.0;        // max global grad norm; 0 = no clipping (norm still logged)
  int64_t log_every = 10;        // steps between metrics rows (the first and last step always log)
  int64_t eval_every = 0;        // steps between evaluations; 0 = only at the end
  int64_t checkpoint_every = 0;  // steps between checkpoints; 0 = only at the end
  int64_t keep_checkpoints = 3;  // newest checkpoints kept
  NonfiniteAction nonfinite = NonfiniteAction::kAbort;  // "abort" | "skip" on a non-finite loss/grad
  int64_t max_consecutive_skips = 5;  // "skip": abort (exit 5) after this many skipped steps in a row
  int64_t diag_every = 50;            // steps between per-layer grad norms and update/weight ratios
  int64_t spike_window = 100;         // steps in the rolling mean/std of loss and grad norm
  double spike_threshold = 6.0;       // z-score above which a step is flagged as a spike

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
    v.field("checkpoint_every", checkpoint_every);
    v.field("keep_checkpoints", keep_checkpoints);
    v.field("nonfinite", nonfinite);
    v.field("max_consecutive_skips", max_consecutive_skips);
    v.field("diag_every", diag_every);
    v.field("spike_window", spike_window);
    v.field("spike_threshold", spike_threshold);
  }
};

struct RunConfig {
  std::string name = "run";    // run folder name under runs/
  int64_t seed = 0;            // seeds every generator of the run (init, batches, dropout)
  std::string device = "cpu";  // torch device string: "cpu", "cuda", "cuda:1"
  int64_t threads = 0;         // intra-op CPU threads; 0 = all cores
  ModelConfig model;
  DataConfig data;
  TrainConfig train;

  template <class V>
  void visit_fields(V& v) {
    v.field("name", name);
    v.field("seed", seed);
    v.field("device", device);
    v.field("threads", threads);
    v.field("model", model);
    v.field("data", data);
    v.field("train", train);
  }
};

}  // namespace causal
