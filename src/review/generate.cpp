// Incremental decoding: the prompt is one cached chunk, then one token per step at absolute positions.
#include "review/generate.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "core/errors.h"
#include "data/chat_template.h"
#include "data/tokenizer.h"
#include "model/kv_cache.h"
#include "review/checkpoint_model.h"
#include "review/run_tokenizer.h"
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
  if ((!request.prompt.empty()) + (!request.prompt_ids.empty()) + (!request.chat.empty()) > 1) {
    throw UsageError("generate: give one of --prompt, --prompt-ids and --chat");
  }
  if (request.chat.empty() && (!request.system.empty() || !request.chat_template.empty())) {
    throw UsageError("generate: --system and --chat-template go with --chat");
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

// The chat's format: --chat-template's family, else what the tokenizer's template text shows (its family,
// and what the text adds to it: a default system message, a date), else ChatML, the format `data encode
// --format chat` renders for a tokenizer without a template (bytes, SentencePiece).
ChatFormat chat_format(const GenerateRequest& request, const Tokenizer& tokenizer) {
  if (!request.chat_template.empty()) return ChatFormat{chat_family_from_name(request.chat_template)};
  if (tokenizer.chat_template().empty()) return ChatFormat{ChatFamily::kChatMl};
  if (std::optional<ChatFormat> format = detect_chat_format(tokenizer.chat_template())) return *format;
  std::string names;
  for (const std::string& name : chat_family_names()) names += (names.empty() ? "" : ", ") + name;
  throw UsageError(
      "generate: the run's chat template is not one causal recognises; choose the family it "
      "follows with --chat-template NAME (" +
      names + ")");
}

// The text the prompt encodes: --prompt, or the chat rendered up to the assistant's turn.
std::string prompt_text(const GenerateRequest& request, const Tokenizer* tokenizer, std::string& family) {
  if (request.chat.empty()) return request.prompt;
  const ChatFormat format = chat_format(request, *tokenizer);
  family = chat_family_name(format.family);
  std::vector<ChatMessage> messages;
  if (!request.system.empty()) messages.push_back({"system", request.system});
  messages.push_back({"user", request.chat});
  // BOS comes from the tokenizer's own rule (prompt_ids), not from the template text.
  return render_chat(format, messages, /*add_generation_prompt=*/true, /*bos_text=*/"");
}

// BOS (when the tokenizer's model expects it), then the encoded prompt or the --prompt-ids; never longer
// than the model's context.
std::vector<int64_t> prompt_ids(const GenerateRequest& request, const RunTokenizer& run, int64_t context,
                                std::string& family) {
  const TokenizerInfo& info = run.info;
  if (run.tokenizer == nullptr && (!request.prompt.empty() || !request.chat.empty())) {
    throw UsageError("generate: the run's tokenizer " + info.describe() +
                     " is not known, so a text --prompt or --chat cannot be encoded; give --prompt-ids or "
                     "--tokenizer F.model");
  }
  std::vector<int64_t> ids;
  if (run.tokenizer == nullptr || run.tokenizer->adds_bos()) ids.push_back(info.bos_id);
  if (run.tokenizer != nullptr) {
    for (int64_t id : run.tokenizer->encode(prompt_text(request, run.tokenizer.get(), family)))
      ids.push_back(id);
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
  CheckpointModel loaded = load_checkpoint_model(request.run_dir, request.checkpoint, request.overrides,
                                                 request.adapter, "generate");
  const RunConfig& config = loaded.config;
  if (!task_traits(config.data.kind).generates_text) {
    throw CheckpointError("[generate] " + loaded.checkpoint.dir.string() + " is a " +
                          to_string(config.data.kind) + " model; generate needs a text run");
  }
  const RunTokenizer run = checked_tokenizer(request, loaded);
  const int64_t context = config.model.max_seq_len;
  GenerateResult result;
  result.step = loaded.checkpoint.state.step;
  result.adapter = loaded.adapter;
  result.prompt_ids = prompt_ids(request, run, context, result.chat_family);
  // A chat ends at its template's end-of-turn token: an id where the tokenizer has it as one token,
  // else the text, found at the end of what has been decoded.
  std::vector<int64_t> stop_ids;
  std::vector<std::string> stop_texts;
  if (!result.chat_family.empty()) {
    for (const std::string& text : chat_stop_texts(chat_family_from_name(result.chat_family))) {
      if (std::optional<int64_t> id = run.tokenizer->special_token_id(text)) {
        stop_ids.push_back(*id);
      } else {
        stop_texts.push_back(text);
      }
    }
  }
  auto ends_turn = [&](int64_t next) {
    if (std::find(stop_ids.begin(), stop_ids.end(), next) != stop_ids.end()) return true;
    if (stop_texts.empty()) return false;
    const std::string text = run.tokenizer->decode(result.generated_ids);
    for (const std::string& stop : stop_texts)
      if (text.size() >= stop.size() && text.compare(text.size() - stop.size(), stop.size(), stop) == 0)
        return true;
    return false;
  };

  torch::NoGradGuard no_grad;
  Transformer& model = loaded.model;
  const auto long_options = at::TensorOptions().dtype(at::kLong).device(loaded.device);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(request.seed);
  KVCache cache(config.model.n_layers, /*batch_size=*/1, context);
  std::vector<int64_t> all = result.prompt_ids;
  at::Tensor chunk = at::tensor(result.prompt_ids, long_options).unsqueeze(0);  // (1,T)
  result.stop_reason = "max_new_tokens";
  auto last = std::chrono::steady_clock::now();
  auto lap = [&last] {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - last).count();
    last = now;
    return seconds;
  };
  for (int64_t i = 0; i < request.max_new_tokens; ++i) {
    if (i == 1) result.prompt_seconds = lap();
    const at::Tensor cached = model->forward(ModelInputs{chunk}, &cache).logits[0];  // (Tchunk,V)
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
    if (ends_turn(next)) {
      result.stop_reason = "end_of_turn";
      break;
    }
    if (static_cast<int64_t>(all.size()) > context) {  // `next` would be fed at position context
      result.stop_reason = "context";
      break;
    }
    chunk = at::tensor(std::vector<int64_t>{next}, long_options).unsqueeze(0);
  }
  if (result.generated_ids.size() == 1) {
    result.prompt_seconds = lap();
  } else {
    result.generate_seconds = lap();
  }
  result.decoded = run.tokenizer != nullptr;
  if (run.tokenizer != nullptr) {
    result.text = run.tokenizer->decode(result.generated_ids);
    // The answer without its end-of-turn marker (an id decodes to nothing if it is a control token).
    if (result.stop_reason == "end_of_turn")
      for (const std::string& stop : chat_stop_texts(chat_family_from_name(result.chat_family)))
        if (result.text.size() >= stop.size() &&
            result.text.compare(result.text.size() - stop.size(), stop.size(), stop) == 0) {
          result.text.resize(result.text.size() - stop.size());
          break;
        }
  }
  return result;
}

}  // namespace causal
