// Config contracts: JSON round trip, resolution, overrides, and one test per class of config error.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "config/config_io.h"
#include "config/suggest.h"
#include "core/runtime.h"

using Catch::Matchers::Contains;
using causal::ConfigError;
using causal::ConfigScope;
using causal::RunConfig;

namespace {

// The config example of docs/config.md, comments included: valid as written.
const char* const kDocumentedExample = R"({
  "name": "retrieval-tiny", "seed": 12, "device": "cpu", "threads": 0,
  "model": {
    "inputs": [{"name": "key", "vocab": 8}, {"name": "value", "vocab": 9}], // summed embeddings
    "output_vocab": 8,
    "d_model": 32, "n_layers": 1, "n_heads": 4, "n_kv_heads": 4,  // GQA when n_kv_heads < n_heads
    "ffn": "gelu", "ffn_hidden": 64,
    "norm": "layernorm", "norm_eps": 1e-5,
    "position": "none",
    "max_seq_len": 5, "rope": {"theta": 10000, "pairing": "interleaved", "scaling": "none", "factor": 1},
    "attention": "reference",
    "qk_norm": false, "bias": true, "tie_embeddings": false, "dropout": 0.0, "init_std": 0.02
  },
  "data": {"kind": "retrieval", "key_count": 8, "value_count": 8, "pairs": 4,
           "train_examples": 2048, "test_examples": 384, "seed": 120},
  "train": {"steps": 320, "batch_size": 64, "grad_accum": 1,
            "optimizer": {"lr": 0.005, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01},
            "schedule": {"kind": "constant", "warmup_steps": 0, "min_lr_ratio": 0.1},
            "grad_clip": 1.0, "log_every": 10, "eval_every": 0, "checkpoint_every": 0,
            "keep_checkpoints": 3, "nonfinite": "abort"}
})";

// Every field set away from its default (except data.kind), valid, retrieval data.
const char* const kNonDefaultRetrieval = R"({
  "name": "nd-retrieval", "seed": 7, "device": "cuda:1", "threads": 3,
  "model": {
    "inputs": [{"name": "key", "vocab": 12}, {"name": "value", "vocab": 13}],
    "output_vocab": 12, "d_model": 96, "n_layers": 3, "n_heads": 6, "n_kv_heads": 2,
    "ffn": "swiglu", "ffn_hidden": 200, "ffn_multiple_of": 16, "norm": "rmsnorm", "norm_eps": 1e-6,
    "position": "learned", "max_seq_len": 64,
    "rope": {"theta": 500000.5, "pairing": "halves", "scaling": "linear", "factor": 2.5,
             "original_max_seq_len": 48, "beta_fast": 16, "beta_slow": 2},
    "attention": "sdpa", "attention_block": 32, "attention_window": 48, "autocast": "bf16", "kernels": "aten", "weight_shadows": "on", "qk_norm": true, "bias": false, "qkv_bias": true,
    "dropout": 0.1,
    "init_std": 0.0123456789012345
  },
  "data": {"kind": "retrieval", "key_count": 12, "value_count": 12, "pairs": 5, "distractors": 2,
           "evidence": "fixed", "evidence_index": 3, "eval_pairs": [4, 8], "train_examples": 1000,
           "test_examples": 100, "seed": 5, "val_examples": 50, "query": "latest", "query_only": true},
  "train": {"steps": 50, "batch_size": 4, "grad_accum": 2,
            "optimizer": {"lr": 0.001, "betas": [0.8, 0.99], "eps": 1e-7, "weight_decay": 0.05,
                          "decay_norms_and_embeddings": true, "kernel": "separate"},
            "schedule": {"kind": "wsd", "warmup_steps": 5, "min_lr_ratio": 0.05, "decay_fraction": 0.3},
            "grad_clip": 0.5, "log_every": 5, "eval_every": 10, "checkpoint_every": 25,
            "keep_checkpoints": 4, "nonfinite": "skip", "max_consecutive_skips": 2, "diag_every": 7,
            "spike_window": 20, "spike_threshold": 4.5, "loss_kernel": "chunked", "loss_chunk_rows": 96, "cuda_graphs": "off",
            "lora": {"rank": 4, "alpha": 8.0, "dropout": 0.1, "targets": ["v", "o"], "rslora": true, "init": "gaussian",
                     "dora": true, "base_dtype": "bf16"}},
  "dist": {"timeout_s": 12.5, "bucket_mb": 4}
})";

// The same with text data: every data field differs from its default, data.kind included.
const char* const kNonDefaultText = R"({
  "name": "nd-text", "seed": 8, "device": "cuda", "threads": 2,
  "model": {
    "inputs": [{"name": "byte", "vocab": 300}],
    "output_vocab": 300, "d_model": 96, "n_layers": 3, "n_heads": 6, "n_kv_heads": 3,
    "ffn": "swiglu", "ffn_hidden": 256, "ffn_multiple_of": 32, "norm": "rmsnorm", "norm_eps": 1e-6,
    "position": "learned", "max_seq_len": 64,
    "rope": {"theta": 20000, "pairing": "halves", "scaling": "yarn", "factor": 4,
             "original_max_seq_len": 32, "beta_fast": 24, "beta_slow": 0.5},
    "attention": "sdpa", "attention_block": 7, "attention_window": 5, "autocast": "bf16", "kernels": "aten", "weight_shadows": "on", "qk_norm": true, "bias": false, "qkv_bias": true,
    "tie_embeddings": true,
    "dropout": 0.25,
    "init_std": 0.01
  },
  "data": {"kind": "text", "train": "data/a.train.tok", "val": "data/a.val.tok", "seq_len": 48,
           "layout": "padded", "isolate_documents": false},
  "train": {"steps": 60, "batch_size": 8, "grad_accum": 3,
            "optimizer": {"lr": 0.002, "betas": [0.85, 0.98], "eps": 1e-6, "weight_decay": 0.0,
                          "decay_norms_and_embeddings": true, "kernel": "fused"},
            "schedule": {"kind": "linear", "warmup_steps": 6, "min_lr_ratio": 0.0, "decay_fraction": 0.5},
            "grad_clip": 0.0, "log_every": 3, "eval_every": 30,
            "eval_tasks": ["data/benchmarks/brown-next-sentence.jsonl"], "checkpoint_every": 20,
            "keep_checkpoints": 2, "nonfinite": "skip", "max_consecutive_skips": 9, "diag_every": 3,
            "spike_window": 30, "spike_threshold": 3.0, "loss_kernel": "logits", "loss_chunk_rows": 512, "cuda_graphs": "off",
            "lora": {"rank": 2, "alpha": 4.0, "dropout": 0.05, "targets": ["o"], "rslora": true, "init": "gaussian",
                     "dora": true, "base_dtype": "q8_0"}},
  "dist": {"timeout_s": 300, "bucket_mb": 0.5}
})";

template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};

// Flattens a config to (path, text) leaves without nlohmann, so the round trip is checked against an
// independent rendering of the struct itself (17 significant digits: doubles must survive bit for bit).
class Flatten {
 public:
  explicit Flatten(std::string prefix = "") : prefix_(std::move(prefix)) {}

  template <class T>
  void field(const char* name, T& member) {
    leaf(prefix_.empty() ? name : prefix_ + "." + name, member);
  }

  std::map<std::string, std::string> leaves;

 private:
  template <class T>
  void leaf(const std::string& path, T& value) {
    if constexpr (std::is_same_v<T, std::string>) {
      leaves[path] = "\"" + value + "\"";
    } else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, int64_t>) {
      leaves[path] = std::to_string(value);
    } else if constexpr (std::is_same_v<T, double>) {
      std::ostringstream out;
      out << std::setprecision(17) << value;
      leaves[path] = out.str();
    } else if constexpr (std::is_enum_v<T>) {
      leaves[path] = causal::to_string(value);
    } else if constexpr (IsVector<T>::value) {
      leaves[path + ".size"] = std::to_string(value.size());
      for (std::size_t i = 0; i < value.size(); ++i) leaf(path + "[" + std::to_string(i) + "]", value[i]);
    } else {
      Flatten inner(path);
      value.visit_fields(inner);
      leaves.insert(inner.leaves.begin(), inner.leaves.end());
    }
  }

  std::string prefix_;
};

std::map<std::string, std::string> flatten(RunConfig config) {
  Flatten f;
  config.visit_fields(f);
  return f.leaves;
}

// Runs `fn`, which must throw ConfigError, and returns the error for inspection.
template <class F>
ConfigError config_error(F&& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e;
  }
  CATCH_FAIL("expected a ConfigError");
  throw std::logic_error("unreachable");
}

ConfigError parse_error(const std::string& text, ConfigScope scope = ConfigScope::kRun) {
  return config_error([&] { causal::parse_config_text(text, "cfg.json", {}, scope); });
}

ConfigError override_error(const std::vector<std::string>& overrides) {
  return config_error([&] { causal::parse_config_text(kDocumentedExample, "cfg.json", overrides); });
}

std::string what(const ConfigError& e) { return e.what(); }

// Every leaf path of a config as docs/config.md names it: "model.inputs[].vocab", "train.optimizer.lr".
void doc_paths(const nlohmann::json& j, const std::string& path, std::vector<std::string>& out) {
  if (j.is_object()) {
    for (const auto& item : j.items())
      doc_paths(item.value(), path.empty() ? item.key() : path + "." + item.key(), out);
  } else if (j.is_array() && !j.empty() && j[0].is_object()) {
    doc_paths(j[0], path + "[]", out);
  } else {
    out.push_back(path);
  }
}

}  // namespace

CATCH_TEST_CASE("config: the documented example (with // comments) parses to the values written",
                "[unit][config]") {
  const RunConfig c = causal::parse_config_text(kDocumentedExample, "spec");
  CATCH_CHECK(c.name == "retrieval-tiny");
  CATCH_CHECK(c.seed == 12);
  CATCH_REQUIRE(c.model.inputs.size() == 2);
  CATCH_CHECK(c.model.inputs[1].name == "value");
  CATCH_CHECK(c.model.inputs[1].vocab == 9);
  CATCH_CHECK(c.model.norm_eps == 1e-5);
  CATCH_CHECK(c.model.position == causal::PositionKind::kNone);
  CATCH_CHECK(c.train.optimizer.betas == std::vector<double>{0.9, 0.999});
  CATCH_CHECK(c.train.schedule.kind == causal::ScheduleKind::kConstant);
  CATCH_CHECK(c.train.steps == 320);
}

CATCH_TEST_CASE("config: a resolved config round-trips through JSON unchanged", "[unit][config]") {
  for (const char* text : {kDocumentedExample, kNonDefaultRetrieval, kNonDefaultText}) {
    const RunConfig original = causal::parse_config_text(text, "original");
    const std::string saved = causal::config_to_string(original);
    const RunConfig reloaded = causal::parse_config_text(saved, "saved");
    CATCH_CHECK(causal::config_to_json(reloaded) == causal::config_to_json(original));
    CATCH_CHECK(causal::config_to_string(reloaded) == saved);
    // Field by field, rendered without JSON, so a field the writer dropped cannot hide.
    CATCH_CHECK(flatten(reloaded) == flatten(original));
  }
}

CATCH_TEST_CASE("config: the non-default round-trip fixtures really move every field off its default",
                "[unit][config]") {
  // Guards the round-trip test against passing vacuously: a field left at its default would round-trip
  // even if reader and writer ignored it. A new field in config.h must be given a non-default value here.
  for (const char* text : {kNonDefaultRetrieval, kNonDefaultText}) {
    const RunConfig custom = causal::parse_config_text(text, "fixture");
    RunConfig defaults;
    defaults.data.kind = custom.data.kind;
    const auto d = flatten(defaults);
    for (const auto& [path, value] : flatten(custom)) {
      if (path == "data.kind") continue;  // set alike above to pick the same fields; kNonDefaultText moves it
      // Two input fields cannot share the head's weight, so retrieval never ties; kNonDefaultText moves it.
      if (path == "model.tie_embeddings" && custom.data.kind == causal::DataKind::kRetrieval) continue;
      if (path.size() > 5 && path.compare(path.size() - 5, 5, ".size") == 0) continue;  // not a field
      const auto it = d.find(path);
      CATCH_INFO(path << " = " << value);
      CATCH_CHECK((it == d.end() || it->second != value));
    }
  }
}

CATCH_TEST_CASE("config: the resolved output holds every field, with defaults filled in", "[unit][config]") {
  const RunConfig c =
      causal::parse_config_text(R"({"model": {"d_model": 64}})", "m.json", {}, ConfigScope::kModel);
  const nlohmann::json j = causal::config_to_json(c);
  CATCH_CHECK(j["model"]["d_model"] == 64);
  CATCH_CHECK(j["model"]["n_kv_heads"] == 4);    // resolved from n_heads, never printed as 0
  CATCH_CHECK(j["model"]["ffn_hidden"] == 256);  // 4 * d_model
  CATCH_CHECK(j["model"]["rope"]["pairing"] == "interleaved");
  CATCH_CHECK(j["train"]["optimizer"]["betas"] == nlohmann::json({0.9, 0.95}));
  CATCH_CHECK(j["data"]["kind"] == "retrieval");
  CATCH_CHECK(j["data"]["key_count"] == 8);
  CATCH_CHECK_FALSE(j["data"].contains("seq_len"));  // only the active data kind's fields
  // Declaration order in the saved text, so the file reads like config.h.
  const std::string text = causal::config_to_string(c);
  CATCH_CHECK(text.find("\"name\"") < text.find("\"model\""));
  CATCH_CHECK(text.find("\"inputs\"") < text.find("\"output_vocab\""));
}

CATCH_TEST_CASE("config: resolve fills n_kv_heads and the default ffn width, and keeps explicit values",
                "[unit][config]") {
  RunConfig c;
  c.model.d_model = 128;
  c.model.n_heads = 8;
  causal::resolve(c);
  CATCH_CHECK(c.model.n_kv_heads == 8);
  CATCH_CHECK(c.model.ffn_hidden == 512);  // gelu: 4d

  RunConfig s;
  s.model.ffn = causal::FfnKind::kSwiglu;
  s.model.d_model = 128;  // 2/3 * 4 * 128 = 341.33 -> rounded up to a multiple of 8
  causal::resolve(s);
  CATCH_CHECK(s.model.ffn_hidden == 344);

  RunConfig llama;  // Llama-7B: d 4096, multiple_of 256 -> 11008
  llama.model.ffn = causal::FfnKind::kSwiglu;
  llama.model.d_model = 4096;
  llama.model.ffn_multiple_of = 256;
  causal::resolve(llama);
  CATCH_CHECK(llama.model.ffn_hidden == 11008);

  RunConfig exact;  // 8 * 96 / 3 = 256 is already a multiple of 8: no rounding up
  exact.model.ffn = causal::FfnKind::kSwiglu;
  exact.model.d_model = 96;
  causal::resolve(exact);
  CATCH_CHECK(exact.model.ffn_hidden == 256);

  RunConfig kept;
  kept.model.n_heads = 4;
  kept.model.n_kv_heads = 2;
  kept.model.ffn_hidden = 100;
  causal::resolve(kept);
  CATCH_CHECK(kept.model.n_kv_heads == 2);
  CATCH_CHECK(kept.model.ffn_hidden == 100);
}

CATCH_TEST_CASE("config: errors are one line '<source>: <json.path>: <problem>'", "[unit][config]") {
  const ConfigError e = parse_error(R"({"model": {"d_model": "abc"}})");
  CATCH_CHECK(e.source() == "cfg.json");
  CATCH_CHECK(e.path() == "model.d_model");
  CATCH_CHECK(what(e) == "cfg.json: model.d_model: expected an integer, got string \"abc\"");
  const ConfigError multiline = parse_error("{\n\"name\": \"a\nb\"}");
  CATCH_CHECK(what(multiline).find('\n') == std::string::npos);
}

CATCH_TEST_CASE("config: an unknown key is an error with a did-you-mean hint", "[unit][config]") {
  const ConfigError e = parse_error(R"({"model": {"d_modle": 64}})");
  CATCH_CHECK(e.path() == "model.d_modle");
  CATCH_CHECK_THAT(what(e), Contains("unknown key 'd_modle'; did you mean 'd_model'?"));

  const ConfigError nested = parse_error(R"({"train": {"optimizer": {"lrr": 0.1}}})");
  CATCH_CHECK(nested.path() == "train.optimizer.lrr");
  CATCH_CHECK_THAT(what(nested), Contains("did you mean 'lr'?"));

  const ConfigError in_array =
      parse_error(R"({"model": {"inputs": [{"name": "k", "vocab": 8, "vocb": 1}]}})");
  CATCH_CHECK(in_array.path() == "model.inputs[0].vocb");
  CATCH_CHECK_THAT(what(in_array), Contains("did you mean 'vocab'?"));

  const ConfigError top = parse_error(R"({"modle": {}})");
  CATCH_CHECK(top.path() == "modle");
  CATCH_CHECK_THAT(what(top), Contains("did you mean 'model'?"));

  // A field put in the wrong section is pointed at by its full path, before any fuzzy guess here.
  const ConfigError misplaced = parse_error(R"({"train": {"lr": 0.1}})");
  CATCH_CHECK(misplaced.path() == "train.lr");
  CATCH_CHECK_THAT(what(misplaced), Contains("did you mean 'train.optimizer.lr'?"));
  CATCH_CHECK_THAT(what(parse_error(R"({"train": {"optimizer": {"steps": 1}}})")),
                   Contains("did you mean 'train.steps'?"));

  // Nothing close: the valid keys are listed instead of a wild guess.
  const ConfigError far = parse_error(R"({"model": {"zzzzzzzz": 1}})");
  CATCH_CHECK_THAT(what(far), Contains("valid keys here: inputs, output_vocab, d_model"));
}

CATCH_TEST_CASE("config: a key of the other data kind says which data.kind it belongs to", "[unit][config]") {
  const ConfigError e = parse_error(R"({"data": {"kind": "retrieval", "seq_len": 128}})");
  CATCH_CHECK(e.path() == "data.seq_len");
  CATCH_CHECK_THAT(what(e), Contains("belongs to data.kind \"text\""));
  CATCH_CHECK_THAT(what(e), Contains("data.kind is \"retrieval\""));

  const ConfigError reverse = parse_error(R"({"data": {"kind": "text", "pairs": 4}})");
  CATCH_CHECK(reverse.path() == "data.pairs");
  CATCH_CHECK_THAT(what(reverse), Contains("belongs to data.kind \"retrieval\""));
}

CATCH_TEST_CASE("config: a value of the wrong JSON type is an error naming the expected type",
                "[unit][config]") {
  CATCH_CHECK_THAT(what(parse_error(R"({"model": {"d_model": "abc"}})")),
                   Contains("model.d_model: expected an integer, got string \"abc\""));
  // Integers must be JSON integers: 64.0 is a float literal.
  CATCH_CHECK_THAT(what(parse_error(R"({"model": {"d_model": 64.0}})")),
                   Contains("model.d_model: expected an integer, got number 64.0"));
  CATCH_CHECK_THAT(what(parse_error(R"({"model": {"d_model": 9223372036854775808}})")),
                   Contains("expected an integer that fits in int64"));
  CATCH_CHECK_THAT(what(parse_error(R"({"model": {"bias": 1}})")),
                   Contains("model.bias: expected a boolean (true or false), got integer 1"));
  CATCH_CHECK_THAT(what(parse_error(R"({"train": {"optimizer": {"lr": "0.1"}}})")),
                   Contains("train.optimizer.lr: expected a number, got string \"0.1\""));
  CATCH_CHECK_THAT(what(parse_error(R"({"train": {"optimizer": {"betas": 0.9}}})")),
                   Contains("train.optimizer.betas: expected an array, got number 0.9"));
  CATCH_CHECK_THAT(what(parse_error(R"({"train": {"optimizer": {"betas": [0.9, "x"]}}})")),
                   Contains("train.optimizer.betas[1]: expected a number, got string \"x\""));
  CATCH_CHECK_THAT(what(parse_error(R"({"model": {"rope": 3}})")),
                   Contains("model.rope: expected an object, got integer 3"));
  CATCH_CHECK_THAT(what(parse_error(R"({"name": null})")), Contains("name: expected a string, got null"));
  CATCH_CHECK_THAT(what(parse_error("[1, 2]")), Contains("expected a JSON object at the top level"));
}

CATCH_TEST_CASE("config: an enum value not in its table lists the allowed spellings", "[unit][config]") {
  const ConfigError e = parse_error(R"({"model": {"ffn": "tanh"}})");
  CATCH_CHECK(e.path() == "model.ffn");
  CATCH_CHECK_THAT(what(e), Contains("expected one of gelu|gelu_tanh|swiglu|relu, got \"tanh\""));
  CATCH_CHECK_THAT(
      what(parse_error(R"({"train": {"schedule": {"kind": 1}}})")),
      Contains("train.schedule.kind: expected one of constant|linear|cosine|wsd, got integer 1"));
  // Spellings are exact: no silent case folding.
  CATCH_CHECK_THAT(what(parse_error(R"({"model": {"norm": "RMSNorm"}})")),
                   Contains("expected one of layernorm|rmsnorm, got \"RMSNorm\""));
  // fp16 would need loss scaling, which causal does not do: only bf16 is offered.
  CATCH_CHECK_THAT(what(parse_error(R"({"model": {"autocast": "fp16"}})")),
                   Contains("model.autocast: expected one of off|bf16, got \"fp16\""));
}

CATCH_TEST_CASE("config: each out-of-range value is rejected with its path and the allowed range",
                "[unit][config]") {
  struct Case {
    const char* assignment;
    const char* path;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"name=", "name", "must be a folder name"},
      {"name=a/b", "name", "must be a folder name"},
      {"seed=-1", "seed", "must be >= 0, got -1"},
      {"threads=-1", "threads", "must be >= 0"},
      {"model.d_model=0", "model.d_model", "must be >= 1, got 0"},
      {"model.n_layers=0", "model.n_layers", "must be >= 1, got 0"},
      {"model.n_heads=0", "model.n_heads", "must be >= 1, got 0"},
      {"model.n_kv_heads=-1", "model.n_kv_heads", "must be >= 0"},
      {"model.inputs[0].vocab=0", "model.inputs[0].vocab", "must be >= 1, got 0"},
      {"model.inputs[0].name=a.b", "model.inputs[0].name", "letters, digits or '_'"},
      {"model.inputs[1].name=key", "model.inputs[1].name", "duplicates"},
      {"model.output_vocab=0", "model.output_vocab", "must be >= 1, got 0"},
      {"model.ffn_hidden=-1", "model.ffn_hidden", "must be >= 0"},
      {"model.ffn_multiple_of=0", "model.ffn_multiple_of", "must be >= 1, got 0"},
      {"model.norm_eps=0", "model.norm_eps", "must be > 0 and finite, got 0"},
      {"model.max_seq_len=0", "model.max_seq_len", "must be >= 1, got 0"},
      {"model.rope.theta=1", "model.rope.theta", "must be > 1 and finite, got 1"},
      {"model.rope.factor=0", "model.rope.factor", "must be > 0 and finite, got 0"},
      {"model.dropout=1", "model.dropout", "must be in [0, 1), got 1"},
      {"model.dropout=-0.1", "model.dropout", "must be in [0, 1), got -0.1"},
      {"model.init_std=0", "model.init_std", "must be > 0 and finite, got 0"},
      {"model.attention_block=0", "model.attention_block", "must be >= 1, got 0"},
      {"model.attention_window=-1", "model.attention_window", "must be >= 0, got -1"},
      {"data.key_count=0", "data.key_count", "must be >= 1, got 0"},
      {"data.value_count=0", "data.value_count", "must be >= 1, got 0"},
      {"data.pairs=0", "data.pairs", "must be >= 1, got 0"},
      {"data.distractors=-1", "data.distractors", "must be >= 0, got -1"},
      {"data.train_examples=0", "data.train_examples", "must be >= 1, got 0"},
      {"data.test_examples=0", "data.test_examples", "must be >= 1, got 0"},
      {"train.steps=0", "train.steps", "must be >= 1, got 0"},
      {"train.batch_size=0", "train.batch_size", "must be >= 1, got 0"},
      {"train.grad_accum=0", "train.grad_accum", "must be >= 1, got 0"},
      {"train.optimizer.lr=0", "train.optimizer.lr", "must be > 0 and finite, got 0"},
      {"train.optimizer.lr=-0.001", "train.optimizer.lr", "must be > 0 and finite, got -0.001"},
      {"train.optimizer.betas=[0.9, 1.0]", "train.optimizer.betas[1]", "must be in [0, 1), got 1"},
      {"train.optimizer.betas=[-0.1, 0.9]", "train.optimizer.betas[0]", "must be in [0, 1), got -0.1"},
      {"train.optimizer.betas=[0.9]", "train.optimizer.betas", "expected 2 values"},
      {"train.optimizer.eps=0", "train.optimizer.eps", "must be > 0 and finite, got 0"},
      {"train.optimizer.weight_decay=-0.01", "train.optimizer.weight_decay", "must be >= 0 and finite"},
      {"train.schedule.warmup_steps=-1", "train.schedule.warmup_steps", "must be >= 0, got -1"},
      {"train.schedule.warmup_steps=320", "train.schedule.warmup_steps",
       "must be < train.steps 320, got 320"},
      {"train.schedule.min_lr_ratio=1.5", "train.schedule.min_lr_ratio", "must be in [0, 1], got 1.5"},
      {"train.schedule.min_lr_ratio=-0.5", "train.schedule.min_lr_ratio", "must be in [0, 1], got -0.5"},
      {"train.schedule.decay_fraction=0", "train.schedule.decay_fraction", "must be in (0, 1], got 0"},
      {"train.schedule.decay_fraction=1.01", "train.schedule.decay_fraction", "must be in (0, 1], got 1.01"},
      {"train.grad_clip=-1", "train.grad_clip", "must be >= 0 and finite, got -1"},
      {"train.log_every=0", "train.log_every", "must be >= 1, got 0"},
      {"train.eval_every=-1", "train.eval_every", "must be >= 0"},
      {"train.checkpoint_every=-1", "train.checkpoint_every", "must be >= 0"},
      {"train.keep_checkpoints=1", "train.keep_checkpoints", "must be >= 2, got 1"},
  };
  for (const Case& c : cases) {
    CATCH_INFO(c.assignment);
    const ConfigError e = override_error({c.assignment});
    CATCH_CHECK(e.path() == c.path);
    CATCH_CHECK_THAT(what(e), Contains(c.expected));
  }
}

// train.lora.base_dtype: one of six spellings, only for a frozen base (rank > 0), and a blocks format only
// where every weight row (d_model or ffn_hidden values) is whole blocks. The accepted cases keep the
// refusals from passing by refusing everything.
CATCH_TEST_CASE("config: train.lora.base_dtype takes its spellings, needs adapters and whole blocks",
                "[unit][config]") {
  for (const char* dtype : {"f32", "bf16", "q8_0", "q4_0", "q4_1"}) {
    CATCH_INFO(dtype);
    const RunConfig c = causal::parse_config_text(
        kDocumentedExample, "cfg.json", {"train.lora.rank=4", std::string("train.lora.base_dtype=") + dtype});
    CATCH_CHECK(causal::to_string(c.train.lora.base_dtype) == dtype);
  }
  const RunConfig wide = causal::parse_config_text(
      kDocumentedExample, "cfg.json",
      {"train.lora.rank=4", "train.lora.base_dtype=q4_k", "model.d_model=256", "model.ffn_hidden=512"});
  CATCH_CHECK(wide.train.lora.base_dtype == causal::BaseDtype::kQ4_K);

  const ConfigError spelling = override_error({"train.lora.rank=4", "train.lora.base_dtype=q5_0"});
  CATCH_CHECK(spelling.path() == "train.lora.base_dtype");
  CATCH_CHECK_THAT(what(spelling), Contains("expected one of f32|bf16|q8_0|q4_0|q4_1|q4_k, got \"q5_0\""));
  const ConfigError no_adapters = override_error({"train.lora.base_dtype=bf16"});
  CATCH_CHECK(no_adapters.path() == "train.lora.base_dtype");
  CATCH_CHECK_THAT(what(no_adapters), Contains("needs train.lora.rank > 0"));
  const ConfigError rows = override_error({"train.lora.rank=4", "train.lora.base_dtype=q4_k"});
  CATCH_CHECK(rows.path() == "train.lora.base_dtype");
  CATCH_CHECK_THAT(what(rows), Contains("whole 256-element blocks") && Contains("model.d_model 32") &&
                                   Contains("\"q4_0\""));
  const ConfigError hidden =
      override_error({"train.lora.rank=4", "train.lora.base_dtype=q8_0", "model.ffn_hidden=48"});
  CATCH_CHECK_THAT(what(hidden), Contains("model.ffn_hidden 48") && Contains("32-element"));
}

CATCH_TEST_CASE("config: range boundaries that are allowed are accepted", "[unit][config]") {
  // The closed ends of each range, and lr with no upper bound (divergence is the health checks' job).
  const RunConfig c = causal::parse_config_text(
      kDocumentedExample, "cfg.json",
      {"train.optimizer.lr=1000", "train.optimizer.betas=[0, 0.999999]", "train.optimizer.weight_decay=0",
       "train.schedule.min_lr_ratio=1", "train.schedule.decay_fraction=1", "train.schedule.warmup_steps=319",
       "train.grad_clip=0", "train.eval_every=0", "train.keep_checkpoints=2", "threads=0", "model.dropout=0",
       "model.n_kv_heads=0"});
  CATCH_CHECK(c.train.optimizer.lr == 1000.0);
  CATCH_CHECK(c.model.n_kv_heads == 4);
}

// Invariant: a model has one spelling: model.qkv_bias is for a model without other biases (Qwen2's layout),
// and a model with model.bias has q/k/v biases already.
CATCH_TEST_CASE("config: qkv_bias needs bias false, and gelu_tanh resolves as gelu", "[unit][config]") {
  const ConfigError e = override_error({"model.qkv_bias=true"});
  CATCH_CHECK(e.path() == "model.qkv_bias");
  CATCH_CHECK_THAT(what(e), Contains("needs model.bias false"));
  const RunConfig ok = causal::parse_config_text(
      kDocumentedExample, "cfg.json",
      {"model.qkv_bias=true", "model.bias=false", "model.ffn=gelu_tanh", "model.ffn_hidden=0"});
  CATCH_CHECK(ok.model.qkv_bias);
  CATCH_CHECK(ok.model.ffn == causal::FfnKind::kGeluTanh);
  CATCH_CHECK(ok.model.ffn_hidden == 4 * ok.model.d_model);
}

// Invariant: a run never trains with model.dropout silently missing from the attention weights: "flash"
// applies none, so the config refuses the combination instead of dropping only the residual branches.
CATCH_TEST_CASE("config: attention flash refuses attention-weight dropout", "[unit][config]") {
  const ConfigError e = override_error({"model.attention=flash", "model.dropout=0.1"});
  CATCH_CHECK(e.path() == "model.dropout");
  CATCH_CHECK_THAT(what(e), Contains("flash does not apply attention-weight dropout"));
  const RunConfig ok = causal::parse_config_text(kDocumentedExample, "cfg.json",
                                                 {"model.attention=flash", "model.attention_block=1"});
  CATCH_CHECK(ok.model.attention == causal::AttentionKind::kFlash);
  CATCH_CHECK(ok.model.attention_block == 1);
}

CATCH_TEST_CASE("config: head and width divisibility is checked", "[unit][config]") {
  const ConfigError heads = override_error({"model.n_heads=5"});
  CATCH_CHECK(heads.path() == "model.n_heads");
  CATCH_CHECK_THAT(what(heads), Contains("model.d_model 32 must be divisible by model.n_heads 5"));
  CATCH_CHECK_THAT(what(heads), Contains("n_heads that divide it: 4 or 8"));

  const ConfigError groups = override_error({"model.n_heads=8", "model.n_kv_heads=3"});
  CATCH_CHECK(groups.path() == "model.n_kv_heads");
  CATCH_CHECK_THAT(what(groups), Contains("model.n_heads 8 must be divisible by model.n_kv_heads 3"));

  const ConfigError more_kv = override_error({"model.n_kv_heads=8"});
  CATCH_CHECK(more_kv.path() == "model.n_kv_heads");
  CATCH_CHECK_THAT(what(more_kv), Contains("must be <= model.n_heads 4, got 8"));

  // d 36 / 4 heads = 9: RoPE rotates pairs, so an odd head dim cannot work.
  const ConfigError rope = override_error({"model.d_model=36", "model.position=rope"});
  CATCH_CHECK(rope.path() == "model.position");
  CATCH_CHECK_THAT(what(rope), Contains("even head dim, got model.d_model 36 / model.n_heads 4 = 9"));
  // The same width without RoPE is fine.
  CATCH_CHECK_NOTHROW(causal::parse_config_text(kDocumentedExample, "cfg.json", {"model.d_model=36"}));
}

CATCH_TEST_CASE("config: sequences longer than model.max_seq_len are rejected", "[unit][config]") {
  // documented example: max_seq_len 5 = 0 distractors + 4 pairs + 1 query, exactly full.
  const ConfigError distractors = override_error({"data.distractors=1"});
  CATCH_CHECK(distractors.path() == "data.pairs");
  CATCH_CHECK_THAT(what(distractors), Contains("1 + 4 + 1 = 6 exceeds model.max_seq_len 5"));

  const ConfigError eval = override_error({"data.eval_pairs=[2, 5]"});
  CATCH_CHECK(eval.path() == "data.eval_pairs[1]");
  CATCH_CHECK_THAT(what(eval), Contains("0 + 5 + 1 = 6 exceeds model.max_seq_len 5"));

  const ConfigError text = parse_error(R"({
    "model": {"inputs": [{"name": "token", "vocab": 259}], "output_vocab": 259, "max_seq_len": 128},
    "data": {"kind": "text", "train": "a.tok", "val": "b.tok", "seq_len": 129}})");
  CATCH_CHECK(text.path() == "data.seq_len");
  CATCH_CHECK_THAT(what(text), Contains("must be <= model.max_seq_len 128, got 129"));
}

CATCH_TEST_CASE("config: retrieval data and model vocabularies must agree", "[unit][config]") {
  const ConfigError fields = override_error({R"(model.inputs=[{"name": "key", "vocab": 8}])"});
  CATCH_CHECK(fields.path() == "model.inputs");
  CATCH_CHECK_THAT(what(fields), Contains("needs exactly 2 input fields"));

  const ConfigError keys = override_error({"data.key_count=10"});
  CATCH_CHECK(keys.path() == "model.inputs[0].vocab");
  CATCH_CHECK_THAT(what(keys), Contains("must equal data.key_count 10"));

  // value_count 8 needs 9 value ids: the 9th is the mask symbol at the query.
  const ConfigError mask = override_error({"model.inputs[1].vocab=8"});
  CATCH_CHECK(mask.path() == "model.inputs[1].vocab");
  CATCH_CHECK_THAT(what(mask), Contains("must equal data.value_count + 1 = 9"));

  const ConfigError output = override_error({"model.output_vocab=9"});
  CATCH_CHECK(output.path() == "model.output_vocab");
  CATCH_CHECK_THAT(what(output), Contains("must equal data.value_count 8"));

  const ConfigError pairs = override_error({"data.distractors=5", "model.max_seq_len=16"});
  CATCH_CHECK(pairs.path() == "data.pairs");
  CATCH_CHECK_THAT(what(pairs), Contains("must be <= data.key_count - data.distractors = 8 - 5 = 3"));

  const ConfigError evidence = override_error({"data.evidence=fixed", "data.evidence_index=4"});
  CATCH_CHECK(evidence.path() == "data.evidence_index");
  CATCH_CHECK_THAT(what(evidence), Contains("must be < data.pairs = 4"));
  CATCH_CHECK_NOTHROW(causal::parse_config_text(kDocumentedExample, "cfg.json",
                                                {"data.evidence=fixed", "data.evidence_index=3"}));

  const ConfigError eval = override_error({"data.eval_pairs=[0]"});
  CATCH_CHECK(eval.path() == "data.eval_pairs[0]");
  CATCH_CHECK_THAT(what(eval), Contains("must be >= 1, got 0"));
}

CATCH_TEST_CASE("config: tie_embeddings needs exactly one input field with the output vocab",
                "[unit][config]") {
  // The model ties its head to the one embedding table; validation refuses every config it would refuse.
  // The documented example has two fields (key vocab 8 == output_vocab 8, value vocab 9): refused, though
  // one of them matches.
  const ConfigError retrieval = override_error({"model.tie_embeddings=true"});
  CATCH_CHECK(retrieval.path() == "model.tie_embeddings");
  CATCH_CHECK_THAT(what(retrieval),
                   Contains("needs exactly one input field, with vocab = model.output_vocab 8") &&
                       Contains("got 2 input field(s): key 8, value 9"));
  const ConfigError mismatch = parse_error(R"({"model": {"inputs": [{"name": "token", "vocab": 300}],
      "output_vocab": 259, "tie_embeddings": true}})",
                                           ConfigScope::kModel);
  CATCH_CHECK(mismatch.path() == "model.tie_embeddings");
  CATCH_CHECK_THAT(what(mismatch), Contains("model.output_vocab 259") && Contains("token 300"));
  const ConfigError two =
      parse_error(R"({"model": {"inputs": [{"name": "a", "vocab": 10}, {"name": "b", "vocab": 10}],
      "output_vocab": 10, "tie_embeddings": true}})",
                  ConfigScope::kModel);
  CATCH_CHECK_THAT(what(two), Contains("got 2 input field(s)"));
  // Not vacuous: one field with the output vocab ties.
  CATCH_CHECK(causal::parse_config_text(R"({"model": {"inputs": [{"name": "token", "vocab": 259}],
      "output_vocab": 259, "tie_embeddings": true}})",
                                        "cfg.json", {}, ConfigScope::kModel)
                  .model.tie_embeddings);
}

CATCH_TEST_CASE("config: text data may leave its files unnamed, and needs one token field",
                "[unit][config]") {
  const std::string model = R"("model": {"inputs": [{"name": "token", "vocab": 259}], "output_vocab": 259})";
  // A run imported without data has no files yet: the config parses, and the text task asks for them.
  CATCH_CHECK_NOTHROW(causal::parse_config_text("{" + model + R"(, "data": {"kind": "text"}})", "cfg.json"));
  // Whether the files exist is the data layer's check, not the config's.
  CATCH_CHECK_NOTHROW(causal::parse_config_text(
      "{" + model + R"(, "data": {"kind": "text", "train": "missing.tok", "val": "missing.tok"}})",
      "cfg.json"));
  const ConfigError vocab =
      parse_error(R"({"model": {"inputs": [{"name": "token", "vocab": 259}], "output_vocab": 8},
      "data": {"kind": "text", "train": "t.tok", "val": "v.tok"}})");
  CATCH_CHECK(vocab.path() == "model.output_vocab");
  CATCH_CHECK_THAT(what(vocab), Contains("must equal model.inputs[0].vocab 259"));
}

CATCH_TEST_CASE("config: train.eval_tasks names existing benchmark files of a text run, by distinct names",
                "[unit][config]") {
  const std::string text = R"({"model": {"inputs": [{"name": "token", "vocab": 259}], "output_vocab": 259},
      "data": {"kind": "text"}, "train": {"eval_tasks": )";
  const std::string bundled = "\"data/benchmarks/brown-next-sentence.jsonl\"";
  CATCH_CHECK(causal::parse_config_text(text + "[" + bundled + "]}}", "cfg.json").train.eval_tasks.size() ==
              1);
  ConfigError e = parse_error(text + "[" + bundled + ", \"absent/brown-next.jsonl\"]}}");
  CATCH_CHECK(e.path() == "train.eval_tasks[1]");
  CATCH_CHECK_THAT(what(e), Contains("no file 'absent/brown-next.jsonl'"));
  e = parse_error(text + "[" + bundled + ", \"data/benchmarks/../benchmarks/brown-next-sentence.jsonl\"]}}");
  CATCH_CHECK(e.path() == "train.eval_tasks[1]");
  CATCH_CHECK_THAT(what(e), Contains("another file is named 'brown-next-sentence' too"));
  e = override_error({"train.eval_tasks=[" + bundled + "]"});
  CATCH_CHECK(e.path() == "train.eval_tasks");
  CATCH_CHECK_THAT(what(e), Contains("data.kind \"text\" only, got \"retrieval\""));
}

CATCH_TEST_CASE("config: the device string must look like cpu, cuda or cuda:N", "[unit][config]") {
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "CPU", "cuda:0:1"}) {
    CATCH_INFO(bad);
    const ConfigError e = override_error({std::string("device=") + bad});
    CATCH_CHECK(e.path() == "device");
    CATCH_CHECK_THAT(what(e), Contains("expected \"cpu\", \"cuda\" or \"cuda:N\""));
  }
  for (const char* good : {"cpu", "cuda", "cuda:0", "cuda:12"}) {
    CATCH_INFO(good);
    CATCH_CHECK_NOTHROW(
        causal::parse_config_text(kDocumentedExample, "cfg.json", {std::string("device=") + good}));
  }
}

CATCH_TEST_CASE("config: a missing file or broken JSON is a ConfigError naming the file and position",
                "[unit][config]") {
  const std::string missing = "/nonexistent/dir/causal-missing.json";
  const ConfigError gone = config_error([&] { causal::load_config(missing); });
  CATCH_CHECK(gone.source() == missing);
  CATCH_CHECK_THAT(what(gone), Contains(missing + ": cannot open the config file"));

  const ConfigError dir =
      config_error([] { causal::load_config(std::filesystem::temp_directory_path().string()); });
  CATCH_CHECK_THAT(what(dir), Contains("is a directory"));

  const ConfigError syntax = parse_error("{\n  \"name\": \"x\",\n  \"seed\": }\n");
  CATCH_CHECK_THAT(what(syntax), Contains("cfg.json: parse error at line 3, column"));
  CATCH_CHECK_THAT(what(parse_error("")), Contains("cfg.json: parse error"));
  CATCH_CHECK_THAT(what(parse_error(R"({"train": {"optimizer": {"lr": 1e400}}})")), Contains("1e400"));

  // And a file that exists loads, overrides included.
  const auto path = std::filesystem::temp_directory_path() / "causal-test-config-load.json";
  {
    std::ofstream out(path);
    out << kDocumentedExample;
  }
  const RunConfig c = causal::load_config(path.string(), {"seed=99"});
  std::filesystem::remove(path);
  CATCH_CHECK(c.seed == 99);
  CATCH_CHECK(c.model.d_model == 32);
}

CATCH_TEST_CASE("config: model scope needs only the model section and skips data/train checks",
                "[unit][config]") {
  const std::string model_only = R"({"name": "m", "model": {"d_model": 64, "n_heads": 8}})";
  const RunConfig c = causal::parse_config_text(model_only, "m.json", {}, ConfigScope::kModel);
  CATCH_CHECK(c.model.n_kv_heads == 8);
  // The default model (one 259-token field) does not fit the default retrieval data: only kRun checks that.
  const ConfigError run = parse_error(model_only, ConfigScope::kRun);
  CATCH_CHECK(run.path() == "model.inputs");
  // Bad train values are ignored in model scope, but a bad model still fails.
  CATCH_CHECK_NOTHROW(causal::parse_config_text(R"({"model": {}, "train": {"steps": 0}})", "m.json", {},
                                                ConfigScope::kModel));
  const ConfigError bad_model =
      parse_error(R"({"model": {"d_model": 30, "n_heads": 4}})", ConfigScope::kModel);
  CATCH_CHECK(bad_model.path() == "model.n_heads");
  // Typing is never skipped: an unknown key is a typo in any scope.
  CATCH_CHECK(parse_error(R"({"model": {}, "train": {"stpes": 1}})", ConfigScope::kModel).path() ==
              "train.stpes");
}

CATCH_TEST_CASE("config: --set overrides are typed by the field they target", "[unit][config]") {
  RunConfig c = causal::parse_config_text(kDocumentedExample, "cfg.json");
  causal::apply_override(c, "model.d_model=256");
  causal::apply_override(c, "train.optimizer.lr=3e-4");
  causal::apply_override(c, "model.ffn=swiglu");      // enum: raw text
  causal::apply_override(c, "name=run with spaces");  // string: raw text, no JSON quoting needed
  causal::apply_override(c, "model.qk_norm=true");
  causal::apply_override(c, "train.optimizer.betas=[0.8, 0.9]");
  causal::apply_override(c, R"(model.rope={"theta": 500000})");  // an object sets only the keys it holds
  causal::apply_override(c, "model.inputs[1].vocab=17");
  causal::apply_override(c, "train.optimizer.betas[1]=0.95");
  CATCH_CHECK(c.model.d_model == 256);
  CATCH_CHECK(c.train.optimizer.lr == 3e-4);
  CATCH_CHECK(c.model.ffn == causal::FfnKind::kSwiglu);
  CATCH_CHECK(c.name == "run with spaces");
  CATCH_CHECK(c.model.qk_norm);
  CATCH_CHECK(c.train.optimizer.betas == std::vector<double>{0.8, 0.95});
  CATCH_CHECK(c.model.rope.theta == 500000.0);
  CATCH_CHECK(c.model.rope.pairing == causal::RopePairing::kInterleaved);
  CATCH_CHECK(c.model.inputs[1].vocab == 17);
  CATCH_CHECK(c.model.inputs[0].vocab == 8);
}

CATCH_TEST_CASE("config: overrides apply in order after the file and before resolve and validate",
                "[unit][config]") {
  // kind first makes seq_len a valid key; the data checks then see the final values.
  const RunConfig c =
      causal::parse_config_text(kDocumentedExample, "cfg.json",
                                {"data.kind=text", "data.seq_len=128", "data.train=t.tok", "data.val=v.tok",
                                 "model.max_seq_len=128", R"(model.inputs=[{"name": "token", "vocab": 259}])",
                                 "model.output_vocab=259", "model.n_kv_heads=0", "model.ffn_hidden=0"});
  CATCH_CHECK(c.data.kind == causal::DataKind::kText);
  CATCH_CHECK(c.data.seq_len == 128);
  CATCH_CHECK(c.model.n_kv_heads == 4);    // resolved after the override set it to 0
  CATCH_CHECK(c.model.ffn_hidden == 128);  // 4 * d_model 32
  // The last override of a field wins.
  CATCH_CHECK(causal::parse_config_text(kDocumentedExample, "cfg.json", {"seed=1", "seed=2"}).seed == 2);
}

CATCH_TEST_CASE("config: override errors name the --set flag, the path and a hint", "[unit][config]") {
  RunConfig c = causal::parse_config_text(kDocumentedExample, "cfg.json");
  const ConfigError type = config_error([&] { causal::apply_override(c, "model.d_model=abc"); });
  CATCH_CHECK(type.source() == "--set model.d_model");
  CATCH_CHECK(what(type) == "--set model.d_model: model.d_model: expected an integer, got string \"abc\"");

  const ConfigError unknown = config_error([&] { causal::apply_override(c, "model.d_modle=64"); });
  CATCH_CHECK(unknown.path() == "model.d_modle");
  CATCH_CHECK_THAT(
      what(unknown),
      Contains("--set model.d_modle: model.d_modle: unknown key 'd_modle'; did you mean 'd_model'?"));

  const ConfigError section = config_error([&] { causal::apply_override(c, "modl.d_model=64"); });
  CATCH_CHECK_THAT(what(section), Contains("did you mean 'model'?"));

  const ConfigError misplaced = config_error([&] { causal::apply_override(c, "train.lr=0.1"); });
  CATCH_CHECK_THAT(what(misplaced), Contains("did you mean 'train.optimizer.lr'?"));

  const ConfigError other_kind = config_error([&] { causal::apply_override(c, "data.seq_len=128"); });
  CATCH_CHECK_THAT(what(other_kind), Contains("belongs to data.kind \"text\""));

  const ConfigError no_equals = config_error([&] { causal::apply_override(c, "model.d_model"); });
  CATCH_CHECK_THAT(what(no_equals), Contains("expected dotted.path=value"));

  const ConfigError enum_value = config_error([&] { causal::apply_override(c, "model.norm=batchnorm"); });
  CATCH_CHECK_THAT(what(enum_value), Contains("expected one of layernorm|rmsnorm, got \"batchnorm\""));

  const ConfigError past_leaf = config_error([&] { causal::apply_override(c, "model.d_model.x=1"); });
  CATCH_CHECK(past_leaf.path() == "model.d_model");

  const ConfigError index = config_error([&] { causal::apply_override(c, "model.inputs[5].vocab=1"); });
  CATCH_CHECK_THAT(what(index), Contains("index 5 is out of range: model.inputs has 2 entries"));

  // A failed override leaves the config as it was, also when an object fails after its first key.
  CATCH_CHECK(c.model.d_model == 32);
  const ConfigError half =
      config_error([&] { causal::apply_override(c, R"(model.rope={"theta": 5, "pairing": "diagonal"})"); });
  CATCH_CHECK(half.path() == "model.rope.pairing");
  CATCH_CHECK(c.model.rope.theta == 10000.0);

  // A range error found by validate is blamed on the override that set the value, not on the file.
  const ConfigError range = override_error({"model.n_layers=0"});
  CATCH_CHECK(range.source() == "--set model.n_layers");
  CATCH_CHECK(what(range) == "--set model.n_layers: model.n_layers: must be >= 1, got 0");
  CATCH_CHECK(parse_error(R"({"model": {"n_layers": 0}})", ConfigScope::kModel).source() == "cfg.json");
  // A cross-field check sits at one field but names the other: the override that set either is blamed.
  const ConfigError cross = override_error({"seed=3", "model.d_model=30"});
  CATCH_CHECK(cross.source() == "--set model.d_model");
  CATCH_CHECK(cross.path() == "model.n_heads");
  // An override unrelated to the error does not take the blame from the file.
  CATCH_CHECK(config_error([] {
                causal::parse_config_text(R"({"model": {"n_layers": 0}})", "cfg.json", {"seed=3"},
                                          ConfigScope::kModel);
              }).source() == "cfg.json");
}

CATCH_TEST_CASE("config: edit distance counts insertions, deletions, substitutions and swaps as one edit",
                "[unit][config]") {
  CATCH_CHECK(causal::edit_distance("d_model", "d_model") == 0);
  CATCH_CHECK(causal::edit_distance("d_modle", "d_model") == 1);  // adjacent swap
  CATCH_CHECK(causal::edit_distance("dmodel", "d_model") == 1);
  CATCH_CHECK(causal::edit_distance("d_modelx", "d_model") == 1);
  CATCH_CHECK(causal::edit_distance("kitten", "sitting") == 3);
  CATCH_CHECK(causal::closest_key("hidden", {"ffn", "ffn_hidden", "d_model"}) == "ffn_hidden");
  CATCH_CHECK(causal::closest_key("qqqq", {"ffn", "d_model"}).empty());
}

CATCH_TEST_CASE("config: docs/config.md documents every field", "[unit][config]") {
  // Keeps the hand-written reference in step with config.h: each leaf path must appear in backticks.
  std::ifstream in(std::string(CAUSAL_SOURCE_DIR) + "/docs/config.md");
  CATCH_REQUIRE(in.good());
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string docs = buffer.str();
  std::vector<std::string> paths;
  RunConfig retrieval;
  doc_paths(causal::config_to_json(retrieval), "", paths);
  RunConfig text;
  text.data.kind = causal::DataKind::kText;
  doc_paths(causal::config_to_json(text), "", paths);
  CATCH_REQUIRE(paths.size() > 50);
  for (const std::string& path : paths) {
    CATCH_INFO(path);
    CATCH_CHECK(docs.find("`" + path + "`") != std::string::npos);
  }
}

CATCH_TEST_CASE("threads: OpenBLAS gets the configured count, and threads 0 leaves out cores busy elsewhere",
                "[unit][config]") {
  using causal::thread_split_for;
  using causal::ThreadSplit;
  // A configured count is taken as it is, whatever the load; without OpenBLAS ATen gets it.
  CATCH_CHECK(thread_split_for(3, 8, std::nullopt, true) == ThreadSplit{1, 3});
  CATCH_CHECK(thread_split_for(2, 2, 1.5, true) == ThreadSplit{1, 2});
  CATCH_CHECK(thread_split_for(3, 8, std::nullopt, false) == ThreadSplit{3, 1});
  // 0: every core when the load is unknown or negligible; a core a process keeps busy is left to it.
  CATCH_CHECK(thread_split_for(0, 4, std::nullopt, true) == ThreadSplit{1, 4});
  CATCH_CHECK(thread_split_for(0, 2, 0.02, true) == ThreadSplit{1, 2});
  CATCH_CHECK(thread_split_for(0, 2, 1.0, true) == ThreadSplit{1, 1});
  CATCH_CHECK(thread_split_for(0, 2, 0.3, true) == ThreadSplit{1, 1});
  // A core at most a quarter taken still counts as free.
  CATCH_CHECK(thread_split_for(0, 16, 2.2, true) == ThreadSplit{1, 14});
  CATCH_CHECK(thread_split_for(0, 16, 2.3, true) == ThreadSplit{1, 13});
  CATCH_CHECK(thread_split_for(0, 16, 2.3, false) == ThreadSplit{13, 1});
  // Never below one thread, however loaded the machine.
  CATCH_CHECK(thread_split_for(0, 2, 2.0, true) == ThreadSplit{1, 1});
  // The sampler reads this machine's /proc: a figure between no core and all of them.
  const std::optional<double> busy = causal::busy_cores_elsewhere(std::chrono::milliseconds(20));
  CATCH_REQUIRE(busy.has_value());
  CATCH_CHECK(*busy >= 0.0);
  CATCH_CHECK(*busy <= static_cast<double>(causal::machine_cores()));
}
