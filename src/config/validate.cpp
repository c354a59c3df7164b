// Derived defaults (resolve) and every value check (validate), run before any tensor exists.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "config/config_io.h"
#include "config/cost_model.h"
#include "config/json_fields.h"
#include "config/vocab_auto.h"

namespace causal {
namespace {

using json_fields::format_number;

std::string str(int64_t v) { return std::to_string(v); }

// Throws ConfigError naming the source and JSON path; one helper per kind of range.
class Checker {
 public:
  explicit Checker(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(const std::string& path, const std::string& problem) const {
    throw ConfigError(source_, path, problem);
  }

  void at_least(const std::string& path, int64_t value, int64_t min, const std::string& note = "") const {
    if (value < min) fail(path, "must be >= " + str(min) + note + ", got " + str(value));
  }

  void positive(const std::string& path, double value) const {
    if (!(std::isfinite(value) && value > 0))
      fail(path, "must be > 0 and finite, got " + format_number(value));
  }

  void non_negative(const std::string& path, double value) const {
    if (!(std::isfinite(value) && value >= 0))
      fail(path, "must be >= 0 and finite, got " + format_number(value));
  }

  void greater_than(const std::string& path, double value, double min) const {
    if (!(std::isfinite(value) && value > min)) {
      fail(path, "must be > " + format_number(min) + " and finite, got " + format_number(value));
    }
  }

  // In [lo, hi) / [lo, hi] / (lo, hi] as the flags say; NaN fails every comparison.
  void in_range(const std::string& path, double value, double lo, bool lo_closed, double hi,
                bool hi_closed) const {
    const bool ok = (lo_closed ? value >= lo : value > lo) && (hi_closed ? value <= hi : value < hi);
    if (!ok) {
      fail(path, "must be in " + std::string(lo_closed ? "[" : "(") + format_number(lo) + ", " +
                     format_number(hi) + (hi_closed ? "]" : ")") + ", got " + format_number(value));
    }
  }

 private:
  const std::string& source_;
};

// Divisors of n closest to `near` (one below and one above when they exist), as a hint.
std::string nearby_divisors(int64_t n, int64_t near) {
  // A bounded search: an unbounded one takes minutes over a one-line hint for near = 4299999999.
  constexpr int64_t kSteps = 4096;
  int64_t below = 0, above = 0;
  for (int64_t d = std::min(near - 1, n), steps = 0; d >= 1 && below == 0 && steps < kSteps; --d, ++steps) {
    if (n % d == 0) below = d;
  }
  // Counted as near + steps <= n, which cannot overflow even for near = n = 2^63 - 1.
  for (int64_t steps = 1; steps <= kSteps && above == 0 && near <= n - steps; ++steps) {
    if (n % (near + steps) == 0) above = near + steps;
  }
  std::string out;
  if (below > 0) out += str(below);
  if (above > 0) out += (out.empty() ? "" : " or ") + str(above);
  return out;
}

bool valid_field_name(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

void validate_top_level(const RunConfig& c, const Checker& check) {
  // The name becomes a folder under runs/: a separator or dot-name would place the run elsewhere.
  if (c.name.empty() || c.name == "." || c.name == ".." || c.name.find_first_of("/\\") != std::string::npos) {
    check.fail("name",
               "must be a folder name without '/' (the run goes to runs/<name>), got \"" + c.name + "\"");
  }
  check.at_least("seed", c.seed, 0);
  static const std::regex device_pattern("cpu|cuda|cuda:[0-9]+");
  if (!std::regex_match(c.device, device_pattern)) {
    check.fail("device", "expected \"cpu\", \"cuda\" or \"cuda:N\", got \"" + c.device + "\"");
  }
  check.at_least("threads", c.threads, 0, " (0 = all cores)");
}

void validate_model(const ModelConfig& m, const Checker& check) {
  if (m.inputs.empty()) check.fail("model.inputs", "needs at least one input field, got none");
  std::set<std::string> names;
  for (std::size_t i = 0; i < m.inputs.size(); ++i) {
    const std::string path = "model.inputs[" + std::to_string(i) + "]";
    // The name is part of a parameter name ("embed.<name>.weight"): module names cannot hold '.'.
    if (!valid_field_name(m.inputs[i].name)) {
      check.fail(path + ".name",
                 "must be non-empty letters, digits or '_', got \"" + m.inputs[i].name + "\"");
    }
    if (!names.insert(m.inputs[i].name).second) {
      check.fail(path + ".name", "duplicates another input field's name \"" + m.inputs[i].name + "\"");
    }
    check.at_least(path + ".vocab", m.inputs[i].vocab, 1);
  }
  check.at_least("model.output_vocab", m.output_vocab, 1);
  check.at_least("model.d_model", m.d_model, 1);
  check.at_least("model.n_layers", m.n_layers, 1);
  check.at_least("model.n_heads", m.n_heads, 1);
  check.at_least("model.n_kv_heads", m.n_kv_heads, 0, " (0 = n_heads)");
  check.at_least("model.ffn_hidden", m.ffn_hidden, 0, " (0 = the ffn's default width)");
  check.at_least("model.ffn_multiple_of", m.ffn_multiple_of, 1);
  check.positive("model.norm_eps", m.norm_eps);
  check.at_least("model.max_seq_len", m.max_seq_len, 1);
  check.greater_than("model.rope.theta", m.rope.theta, 1.0);
  check.positive("model.rope.factor", m.rope.factor);
  check.at_least("model.rope.original_max_seq_len", m.rope.original_max_seq_len, 0,
                 " (0 = model.max_seq_len)");
  check.positive("model.rope.beta_slow", m.rope.beta_slow);
  if (!(m.rope.beta_fast > m.rope.beta_slow) || !std::isfinite(m.rope.beta_fast)) {
    check.fail("model.rope.beta_fast", "must be finite and > model.rope.beta_slow " +
                                           format_number(m.rope.beta_slow) + ", got " +
                                           format_number(m.rope.beta_fast));
  }
  // NTK raises the base to the power dk/(dk-2), undefined for a single rotated pair.
  if (m.position == PositionKind::kRope && m.rope.scaling == RopeScaling::kNtk && m.head_dim() == 2) {
    check.fail("model.rope.scaling",
               "\"ntk\" needs a head dim > 2 (it scales the base by factor^(dk/(dk-2))), got 2");
  }
  // One spelling per model: with model.bias every linear layer has its bias already.
  if (m.qkv_bias && m.bias) {
    check.fail("model.qkv_bias",
               "true needs model.bias false (model.bias true gives q/k/v_proj their biases already); hint: "
               "qkv_bias false, or bias false for biases on q, k and v only");
  }
  check.in_range("model.dropout", m.dropout, 0.0, true, 1.0, false);
  check.positive("model.init_std", m.init_std);
  check.at_least("model.attention_block", m.attention_block, 1);
  check.at_least("model.attention_window", m.attention_window, 0);
  // The tiled kernel drops no attention weights, and silently training without them would change the run.
  if (m.attention == AttentionKind::kFlash && m.dropout > 0) {
    check.fail("model.dropout",
               "must be 0 with model.attention \"flash\" (flash does not apply "
               "attention-weight dropout), got " +
                   format_number(m.dropout) + "; hint: dropout 0, or attention \"reference\" or \"sdpa\"");
  }

  if (m.d_model % m.n_heads != 0) {
    const std::string hint = nearby_divisors(m.d_model, m.n_heads);
    check.fail("model.n_heads", "model.d_model " + str(m.d_model) + " must be divisible by model.n_heads " +
                                    str(m.n_heads) + " (head dim = d_model / n_heads)" +
                                    (hint.empty() ? "" : "; n_heads that divide it: " + hint));
  }
  const int64_t kv_heads = m.n_kv_heads == 0 ? m.n_heads : m.n_kv_heads;
  if (kv_heads > m.n_heads) {
    check.fail("model.n_kv_heads", "must be <= model.n_heads " + str(m.n_heads) + ", got " + str(kv_heads));
  }
  if (m.n_heads % kv_heads != 0) {
    const std::string hint = nearby_divisors(m.n_heads, kv_heads);
    check.fail("model.n_kv_heads", "model.n_heads " + str(m.n_heads) +
                                       " must be divisible by model.n_kv_heads " + str(kv_heads) +
                                       " (query heads share KV heads in equal groups)" +
                                       (hint.empty() ? "" : "; n_kv_heads that divide it: " + hint));
  }
  if (m.position == PositionKind::kRope && m.head_dim() % 2 != 0) {
    check.fail("model.position",
               "\"rope\" rotates pairs of dims and needs an even head dim, got model.d_model " +
                   str(m.d_model) + " / model.n_heads " + str(m.n_heads) + " = " + str(m.head_dim()));
  }
  // The head reuses the one embedding table as its weight, so that table must be the whole input and
  // have a row per output id.
  if (m.tie_embeddings && (m.inputs.size() != 1 || m.inputs[0].vocab != m.output_vocab)) {
    std::string vocabs;
    for (const InputField& f : m.inputs) vocabs += (vocabs.empty() ? "" : ", ") + f.name + " " + str(f.vocab);
    check.fail("model.tie_embeddings",
               "true needs exactly one input field, with vocab = model.output_vocab " + str(m.output_vocab) +
                   " (the head reuses its embedding table), got " +
                   str(static_cast<int64_t>(m.inputs.size())) + " input field(s): " + vocabs +
                   "; hint: tie_embeddings false");
  }
}

void validate_retrieval(const RunConfig& c, const Checker& check) {
  const DataConfig& d = c.data;
  const ModelConfig& m = c.model;
  check.at_least("data.key_count", d.key_count, 1);
  check.at_least("data.value_count", d.value_count, 1);
  check.at_least("data.pairs", d.pairs, 1);
  check.at_least("data.distractors", d.distractors, 0);
  check.at_least("data.train_examples", d.train_examples, 1);
  check.at_least("data.test_examples", d.test_examples, 1);
  check.at_least("data.val_examples", d.val_examples, 1);
  check.at_least("data.seed", d.seed, 0);
  check.at_least("data.evidence_index", d.evidence_index, 0);
  // Context keys within one example are distinct, so they cannot outnumber the keys.
  const int64_t max_pairs = d.key_count - d.distractors;
  if (d.pairs > max_pairs) {
    check.fail("data.pairs", "must be <= data.key_count - data.distractors = " + str(d.key_count) + " - " +
                                 str(d.distractors) + " = " + str(max_pairs) +
                                 " (context keys are distinct), got " + str(d.pairs));
  }
  std::vector<std::pair<std::string, int64_t>> lengths = {{"data.pairs", d.pairs}};
  for (std::size_t i = 0; i < d.eval_pairs.size(); ++i) {
    const std::string path = "data.eval_pairs[" + std::to_string(i) + "]";
    check.at_least(path, d.eval_pairs[i], 1);
    if (d.eval_pairs[i] > max_pairs) {
      check.fail(path, "must be <= data.key_count - data.distractors = " + str(max_pairs) +
                           " (context keys are distinct), got " + str(d.eval_pairs[i]));
    }
    lengths.emplace_back(path, d.eval_pairs[i]);
  }
  if (d.query == QueryMode::kLatest) {
    // The queried key occurs twice with different values: two records and two values at least.
    if (d.value_count < 2)
      check.fail("data.value_count",
                 "must be >= 2 with data.query \"latest\" (the two occurrences of the queried key hold "
                 "different values), got " +
                     str(d.value_count));
    if (d.evidence == EvidencePosition::kFixed && d.evidence_index < 1) {
      check.fail("data.evidence_index",
                 "must be >= 1 with data.query \"latest\" and evidence \"fixed\" (an earlier occurrence of "
                 "the queried key precedes the evidence), got " +
                     str(d.evidence_index));
    }
    for (const auto& [path, pairs] : lengths) {
      if (pairs < 2)
        check.fail(path, "must be >= 2 with data.query \"latest\" (the queried key occurs twice), got " +
                             str(pairs));
    }
  }
  for (const auto& [path, pairs] : lengths) {
    // Distractor counts vary from 0 per example, so a fixed index must exist in the shortest context.
    if (d.evidence == EvidencePosition::kFixed && d.evidence_index >= pairs) {
      check.fail("data.evidence_index",
                 "must be < " + path + " = " + str(pairs) +
                     " when evidence is \"fixed\" (examples may have no distractors), got " +
                     str(d.evidence_index));
    }
    const int64_t length = d.distractors + pairs + 1;
    if (length > m.max_seq_len) {
      check.fail(path, "sequence length data.distractors + " + path + " + 1 (query) = " + str(d.distractors) +
                           " + " + str(pairs) + " + 1 = " + str(length) + " exceeds model.max_seq_len " +
                           str(m.max_seq_len));
    }
  }

  // Each record is the sum of a key embedding and a value embedding; the value field also holds the mask.
  if (m.inputs.size() != 2) {
    check.fail("model.inputs",
               "data.kind \"retrieval\" needs exactly 2 input fields (key vocab = key_count " +
                   str(d.key_count) + ", value vocab = value_count + 1 = " + str(d.value_count + 1) +
                   " with the mask symbol), got " + str(m.inputs.size()));
  }
  if (m.inputs[0].vocab != d.key_count) {
    check.fail("model.inputs[0].vocab", "must equal data.key_count " + str(d.key_count) +
                                            " for data.kind \"retrieval\", got " + str(m.inputs[0].vocab));
  }
  if (m.inputs[1].vocab != d.value_count + 1) {
    check.fail("model.inputs[1].vocab",
               "must equal data.value_count + 1 = " + str(d.value_count + 1) +
                   " (values plus the mask symbol) for data.kind \"retrieval\", got " +
                   str(m.inputs[1].vocab));
  }
  if (m.output_vocab != d.value_count) {
    check.fail("model.output_vocab", "must equal data.value_count " + str(d.value_count) +
                                         " (the answer is a value) for data.kind \"retrieval\", got " +
                                         str(m.output_vocab));
  }
}

void validate_text(const RunConfig& c, const Checker& check) {
  const DataConfig& d = c.data;
  const ModelConfig& m = c.model;
  // Whether the files exist and match the vocab is the data layer's check. Empty paths are a run that has
  // no data yet (an import): the text task asks for them where it needs them.
  check.at_least("data.seq_len", d.seq_len, 1);
  if (d.seq_len > m.max_seq_len) {
    check.fail("data.seq_len",
               "must be <= model.max_seq_len " + str(m.max_seq_len) + ", got " + str(d.seq_len));
  }
  if (m.inputs.size() != 1) {
    check.fail("model.inputs",
               "data.kind \"text\" needs exactly 1 input field (the token), got " + str(m.inputs.size()));
  }
  if (m.output_vocab != m.inputs[0].vocab) {
    check.fail("model.output_vocab", "must equal model.inputs[0].vocab " + str(m.inputs[0].vocab) +
                                         " (text predicts the next token) for data.kind \"text\", got " +
                                         str(m.output_vocab));
  }
}

void validate_train(const TrainConfig& t, const Checker& check) {
  check.at_least("train.steps", t.steps, 1);
  check.at_least("train.batch_size", t.batch_size, 1);
  check.at_least("train.grad_accum", t.grad_accum, 1);
  // No upper bound on lr: a diverging run is the health checks' job, not the config's.
  check.positive("train.optimizer.lr", t.optimizer.lr);
  if (t.optimizer.betas.size() != 2) {
    check.fail("train.optimizer.betas",
               "expected 2 values [beta1, beta2], got " + str(t.optimizer.betas.size()));
  }
  check.in_range("train.optimizer.betas[0]", t.optimizer.betas[0], 0.0, true, 1.0, false);
  check.in_range("train.optimizer.betas[1]", t.optimizer.betas[1], 0.0, true, 1.0, false);
  check.positive("train.optimizer.eps", t.optimizer.eps);
  check.non_negative("train.optimizer.weight_decay", t.optimizer.weight_decay);
  check.at_least("train.schedule.warmup_steps", t.schedule.warmup_steps, 0);
  if (t.schedule.warmup_steps >= t.steps) {
    check.fail("train.schedule.warmup_steps",
               "must be < train.steps " + str(t.steps) + ", got " + str(t.schedule.warmup_steps));
  }
  check.in_range("train.schedule.min_lr_ratio", t.schedule.min_lr_ratio, 0.0, true, 1.0, true);
  check.in_range("train.schedule.decay_fraction", t.schedule.decay_fraction, 0.0, false, 1.0, true);
  check.non_negative("train.grad_clip", t.grad_clip);
  check.at_least("train.log_every", t.log_every, 1);
  check.at_least("train.eval_every", t.eval_every, 0, " (0 = only at the end)");
  check.at_least("train.checkpoint_every", t.checkpoint_every, 0, " (0 = only at the end)");
  // Two kept checkpoints mean a crash while writing the newest still leaves a complete one.
  check.at_least("train.keep_checkpoints", t.keep_checkpoints, 2);
  check.at_least("train.max_consecutive_skips", t.max_consecutive_skips, 1);
  check.at_least("train.diag_every", t.diag_every, 1);
  // A z-score needs a few samples before it means anything.
  check.at_least("train.spike_window", t.spike_window, 8);
  check.positive("train.spike_threshold", t.spike_threshold);
  check.at_least("train.loss_chunk_rows", t.loss_chunk_rows, 0, " (0 = rows that fit 256 MiB of logits)");
}

}  // namespace

void resolve(RunConfig& config, const DataVocab& data_vocab) {
  resolve_vocab_auto(config, data_vocab);
  ModelConfig& m = config.model;
  if (m.n_kv_heads == 0) m.n_kv_heads = m.n_heads;
  // Left at 0 when d_model or ffn_multiple_of is invalid, so validate reports the real cause.
  if (m.rope.original_max_seq_len == 0) m.rope.original_max_seq_len = m.max_seq_len;
  // Also left at 0 for sizes whose derived width would overflow int64 (validate refuses them by name).
  constexpr int64_t kLargestDerivable = std::numeric_limits<int64_t>::max() / 16;
  if (m.ffn_hidden == 0 && m.d_model >= 1 && m.ffn_multiple_of >= 1 && m.d_model <= kLargestDerivable &&
      m.ffn_multiple_of <= kLargestDerivable) {
    if (m.ffn != FfnKind::kSwiglu) {
      m.ffn_hidden = 4 * m.d_model;
    } else {
      // ceil((2/3 * 4d) / multiple) * multiple, in integers: three matrices at the parameter cost of two.
      const int64_t step = m.ffn_multiple_of;
      m.ffn_hidden = (8 * m.d_model + 3 * step - 1) / (3 * step) * step;
    }
  }
}

namespace {

// Benchmarks score text; each file must be there before training starts, and each name (the file's stem,
// data/benchmark_file.h) keys its metrics, so two files may not share one.
void validate_eval_tasks(const RunConfig& c, const Checker& check) {
  const std::vector<std::string>& tasks = c.train.eval_tasks;
  if (tasks.empty()) return;
  if (c.data.kind != DataKind::kText) {
    check.fail("train.eval_tasks", "multiple-choice benchmarks score text: data.kind \"text\" only, got \"" +
                                       to_string(c.data.kind) + "\"");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const std::string path = "train.eval_tasks[" + str(static_cast<int64_t>(i)) + "]";
    std::error_code error;
    if (!std::filesystem::is_regular_file(tasks[i], error)) {
      check.fail(path, "no file '" + tasks[i] + "' (a JSONL benchmark; relative paths are read from " +
                           std::filesystem::current_path(error).string() + ")");
    }
    const std::string name = std::filesystem::path(tasks[i]).stem().string();
    if (!names.insert(name).second)
      check.fail(path, "another file is named '" + name + "' too: benchmarks are reported by file name");
  }
}

}  // namespace

// Adapters need a rank, a scale and products to adapt; an untied head only (a tied one is the embedding).
void validate_lora(const RunConfig& c, const Checker& check) {
  const LoraConfig& l = c.train.lora;
  check.at_least("train.lora.rank", l.rank, 0, " (0 = no adapters)");
  if (!l.enabled()) {
    if (l.base_dtype != BaseDtype::kF32)
      check.fail("train.lora.base_dtype",
                 "\"" + to_string(l.base_dtype) +
                     "\" needs train.lora.rank > 0: only a frozen base is held in another dtype, and with "
                     "rank 0 every weight trains in float32");
    return;
  }
  check.positive("train.lora.alpha", l.alpha);
  check.in_range("train.lora.dropout", l.dropout, 0.0, true, 1.0, false);
  if (l.targets.empty()) check.fail("train.lora.targets", "must name at least one product");
  const std::vector<std::string>& names = lora_target_names();
  std::string allowed;
  for (const std::string& name : names) allowed += (allowed.empty() ? "\"" : ", \"") + name + "\"";
  std::set<std::string> seen;
  for (size_t i = 0; i < l.targets.size(); ++i) {
    const std::string path = "train.lora.targets[" + str(static_cast<int64_t>(i)) + "]";
    const std::string& target = l.targets[i];
    if (std::find(names.begin(), names.end(), target) == names.end())
      check.fail(path, "expected one of " + allowed + ", got \"" + target + "\"");
    if (!seen.insert(target).second) check.fail(path, "\"" + target + "\" is named twice");
    if (target == "head" && c.model.tie_embeddings)
      check.fail(path,
                 "\"head\" needs an untied output head: with model.tie_embeddings the head is the "
                 "input embedding, which has no product to adapt");
  }
  const int64_t block = base_dtype_block(l.base_dtype);
  for (const auto& [key, width] : {std::pair<const char*, int64_t>{"model.d_model", c.model.d_model},
                                   std::pair<const char*, int64_t>{"model.ffn_hidden", c.model.ffn_hidden}}) {
    if (block > 1 && width > 0 && width % block != 0)
      check.fail("train.lora.base_dtype",
                 "\"" + to_string(l.base_dtype) + "\" holds each weight row as whole " + str(block) +
                     "-element blocks, and rows here have " + key + " " + str(width) +
                     " values, not a multiple of " + str(block) +
                     (block == 256 ? ": take \"q4_0\", \"q4_1\" or \"q8_0\" (32-element blocks)" : "") +
                     " or \"bf16\"");
  }
  if (c.model.ffn != FfnKind::kSwiglu && seen.size() == 1 && seen.count("gate"))
    check.fail("train.lora.targets", "\"gate\" is SwiGLU's gate_proj; model.ffn \"" + to_string(c.model.ffn) +
                                         "\" has none, so nothing would train");
}

void validate_dist(const DistConfig& d, const Checker& check) {
  check.positive("dist.timeout_s", d.timeout_s);
  check.positive("dist.bucket_mb", d.bucket_mb);
}

void validate(const RunConfig& config, const std::string& source, ConfigScope scope) {
  const Checker check(source);
  validate_top_level(config, check);
  validate_model(config.model, check);
  // Sizes too large to count are refused by name before anything computes with them.
  check_cost_size(config.model, config.model.max_seq_len, 1, source, "");
  // train.lora changes the model's trainable set, so a model-only reader (inspect) checks it too.
  validate_lora(config, check);
  if (scope == ConfigScope::kModel) return;
  // Each data.kind declares its own fields (config/data_config.h) and so its own checks.
  using KindChecks = void (*)(const RunConfig&, const Checker&);
  static const std::map<DataKind, KindChecks> kind_checks = {{DataKind::kRetrieval, validate_retrieval},
                                                             {DataKind::kText, validate_text}};
  kind_checks.at(config.data.kind)(config, check);
  validate_train(config.train, check);
  validate_eval_tasks(config, check);
  validate_dist(config.dist, check);
  // The same bound for a whole micro-batch, once train.batch_size is known to be >= 1.
  check_cost_size(config.model, config.model.max_seq_len, config.train.batch_size, source,
                  "train.batch_size");
}

}  // namespace causal
