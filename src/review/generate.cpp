// Incremental decoding: the prompt is one cached chunk, then one token per step at absolute positions.
#include "review/generate.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/utils.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "core/errors.h"
#include "data/tokenizer.h"
#include "model/kv_cache.h"
#include "review/checkpoint_model.h"
#include "task/task.h"

namespace causal {
namespace {

std::string format_double(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// Picks the next id from (V) logits: argmax at temperature 0, else a draw from the tempered softmax
// restricted to the top_k largest logits.
int64_t pick_token(const at::Tensor& logits, double temperature, int64_t top_k, at::Generator& generator) {
  if (temperature <= 0.0) return logits.argmax().item<int64_t>();
  at::Tensor scaled = logits.to(at::kDouble).cpu() / temperature;
  if (top_k > 0 && top_k < scaled.size(0)) {
    const double kth = std::get<0>(scaled.topk(top_k)).min().item<double>();
    scaled = scaled.masked_fill(scaled < kth, -std::numeric_limits<double>::infinity());
  }
  return at::multinomial(scaled.softmax(0), 1, /*replacement=*/false, generator).item<int64_t>();
}

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError("[generate] cannot read " + path.string());
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The run's tokenizer from the checkpoint (tokenizer.json, tokenizer.model); checkpoints written before
// runs kept them name their tokenizer in the data identity (always "bytes" then).
struct RunTokenizer {
  TokenizerInfo info;
  std::unique_ptr<Tokenizer> tokenizer;  // nullptr: ids only
};

RunTokenizer run_tokenizer(const CheckpointInfo& checkpoint) {
  RunTokenizer run;
  const std::filesystem::path info_file = checkpoint.dir / kTokenizerInfoFile;
  if (!std::filesystem::exists(info_file)) {
    run.tokenizer = make_tokenizer(checkpoint.state.data_identity.value("tokenizer", std::string("bytes")));
    run.info = run.tokenizer->info();
    return run;
  }
  run.info = tokenizer_info_from_json(nlohmann::json::parse(read_bytes(info_file)), info_file.string());
  const std::filesystem::path model_file = checkpoint.dir / kTokenizerModelFile;
  const std::string model = std::filesystem::exists(model_file) ? read_bytes(model_file) : "";
  run.tokenizer = tokenizer_for(run.info, model);
  return run;
}

// NaN and inf would reach the sampler as NaN probabilities (a LibTorch error): refused before loading.
void check_sampling_flags(const GenerateRequest& request) {
  if (!std::isfinite(request.temperature) || request.temperature < 0.0) {
    throw UsageError("generate: --temperature " + format_double(request.temperature) +
                     ": expected a finite number >= 0 (0 = greedy)");
  }
  if (request.top_k < 0) {
    throw UsageError("generate: --top-k " + std::to_string(request.top_k) + ": expected >= 0 (0 = all)");
  }
  if (request.max_new_tokens < 1) {
    throw UsageError("generate: --max-new-tokens " + std::to_string(request.max_new_tokens) +
                     ": expected >= 1");
  }
  for (const std::string& o : request.overrides) {
    if (o.rfind("device=", 0) != 0 && o.rfind("threads=", 0) != 0)
      throw UsageError("generate: --set " + o + ": only device and threads can be set");
  }
  if (!request.prompt.empty() && !request.prompt_ids.empty()) {
    throw UsageError("generate: give --prompt or --prompt-ids, not both");
  }
}

// The run's tokenizer, or --tokenizer's in its place; it must fit the model's vocabulary.
RunTokenizer checked_tokenizer(const GenerateRequest& request, const CheckpointModel& loaded) {
  RunTokenizer run = run_tokenizer(loaded.checkpoint);
  const TokenizerInfo& info = run.info;
  if (!request.tokenizer.empty()) {
    // Another model for the text, e.g. the one that made imported ids; it must cover the same vocabulary.
    run.tokenizer = make_tokenizer(request.tokenizer);
    if (run.tokenizer->info().vocab_size != info.vocab_size) {
      throw DataError("[generate] --tokenizer " + request.tokenizer + ": " +
                      run.tokenizer->info().describe() + " has another vocab size than the run's " +
                      info.describe());
    }
  }
  const int64_t vocab = loaded.config.model.output_vocab;
  if (vocab != info.vocab_size) {
    throw DataError("[generate] tokenizer " + info.describe() + " does not fit the model's output_vocab " +
                    std::to_string(vocab));
  }
  if (request.top_k > vocab) {
    throw UsageError("generate: --top-k " + std::to_string(request.top_k) +
                     " exceeds the model's vocabulary of " + std::to_string(vocab) +
                     " tokens (model.output_vocab); expected 0 (all) to " + std::to_string(vocab));
  }
  return run;
}

// BOS, then the encoded --prompt or the --prompt-ids; never longer than the model's context.
std::vector<int64_t> prompt_ids(const GenerateRequest& request, const RunTokenizer& run, int64_t context) {
  const TokenizerInfo& info = run.info;
  if (run.tokenizer == nullptr && !request.prompt.empty()) {
    throw UsageError("generate: the run's tokenizer " + info.describe() +
                     " is not known, so a text --prompt cannot be encoded; give --prompt-ids or "
                     "--tokenizer F.model");
  }
  std::vector<int64_t> ids{info.bos_id};
  if (run.tokenizer != nullptr) {
    for (int64_t id : run.tokenizer->encode(request.prompt)) ids.push_back(id);
  }
  for (int64_t id : request.prompt_ids) {
    if (id < 0 || id >= info.vocab_size) {
      throw UsageError("generate: --prompt-ids id " + std::to_string(id) + " is outside the vocabulary 0.." +
                       std::to_string(info.vocab_size - 1));
    }
    ids.push_back(id);
  }
  if (static_cast<int64_t>(ids.size()) > context) {
    throw UsageError("generate: the prompt is " + std::to_string(ids.size()) +
                     " tokens with BOS, longer than the model's context (model.max_seq_len " +
                     std::to_string(context) + "); shorten it (prompts are never truncated)");
  }
  return ids;
}

}  // namespace

GenerateResult generate_text(const GenerateRequest& request) {
  check_sampling_flags(request);
  CheckpointModel loaded = load_checkpoint_model(request.run_dir, request.checkpoint, request.overrides);
  const RunConfig& config = loaded.config;
  if (!task_traits(config.data.kind).generates_text) {
    throw CheckpointError("[generate] " + loaded.checkpoint.dir.string() + " is a " +
                          to_string(config.data.kind) + " model; generate needs a text run");
  }
  const RunTokenizer run = checked_tokenizer(request, loaded);
  const int64_t context = config.model.max_seq_len;
  GenerateResult result;
  result.step = loaded.checkpoint.state.step;
  result.prompt_ids = prompt_ids(request, run, context);

  torch::NoGradGuard no_grad;
  Transformer& model = loaded.model;
  const auto long_options = at::TensorOptions().dtype(at::kLong).device(loaded.device);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(request.seed);
  KVCache cache(config.model.n_layers, /*batch_size=*/1, context);
  std::vector<int64_t> all = result.prompt_ids;
  at::Tensor chunk = at::tensor(result.prompt_ids, long_options).unsqueeze(0);  // (1,T)
  result.stop_reason = "max_new_tokens";
  for (int64_t i = 0; i < request.max_new_tokens; ++i) {
    ForwardOptions options;
    options.cache = &cache;
    const at::Tensor cached = model->forward(ModelInputs{chunk}, options).logits[0];  // (Tchunk,V)
    if (request.verify_cache) {
      const at::Tensor full =
          model->forward(ModelInputs{at::tensor(all, long_options).unsqueeze(0)}).logits[0];
      const at::Tensor expected = full.slice(0, full.size(0) - cached.size(0));
      result.max_abs_diff = std::max(result.max_abs_diff, (cached - expected).abs().max().item<double>());
    }
    const int64_t next = pick_token(cached[-1], request.temperature, request.top_k, generator);
    result.generated_ids.push_back(next);
    all.push_back(next);
    if (next == run.info.eos_id) {
      result.stop_reason = "eos";
      break;
    }
    if (static_cast<int64_t>(all.size()) > context) {  // `next` would be fed at position context
      result.stop_reason = "context";
      break;
    }
    chunk = at::tensor(std::vector<int64_t>{next}, long_options).unsqueeze(0);
  }
  result.decoded = run.tokenizer != nullptr;
  if (run.tokenizer != nullptr) result.text = run.tokenizer->decode(result.generated_ids);
  return result;
}

}  // namespace causal
