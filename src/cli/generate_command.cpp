// `causal generate`: sampling from a text run's checkpoint with the KV cache.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/errors.h"
#include "review/generate.h"

namespace causal::cli {
namespace {

int run_generate(const GenerateRequest& request) {
  const GenerateResult result = generate_text(request);
  if (result.decoded) {
    // A chat prints its answer alone; a prompt is printed with its continuation.
    std::cout << (request.chat.empty() ? request.prompt : "") << result.text << "\n";
  } else {
    // No tokenizer: the ids themselves, prompt (after BOS) and continuation.
    std::string line;
    for (size_t i = 1; i < result.prompt_ids.size(); ++i) line += std::to_string(result.prompt_ids[i]) + " ";
    line += "|";
    for (int64_t id : result.generated_ids) line += " " + std::to_string(id);
    std::cout << line << "\n";
  }
  const std::string adapters =
      result.adapter.label.empty() ? "" : "; adapters " + describe_adapter(result.adapter);
  std::fprintf(stderr, "generated %zu tokens from checkpoint step %lld%s; stopped: %s\n",
               result.generated_ids.size(), static_cast<long long>(result.step), adapters.c_str(),
               result.stop_reason.c_str());
  // Prefill covers the prompt and the first new token; each later token is one cached forward pass.
  const size_t later = result.generated_ids.size() > 1 ? result.generated_ids.size() - 1 : 0;
  std::fprintf(stderr, "prompt: %zu tokens in %.3f s; generation: %zu tokens in %.3f s (%.1f tokens/s)\n",
               result.prompt_ids.size(), result.prompt_seconds, later, result.generate_seconds,
               result.generate_seconds > 0 ? static_cast<double>(later) / result.generate_seconds : 0.0);
  if (request.verify_cache) std::printf("verify-cache max_abs_diff=%.9g\n", result.max_abs_diff);
  return kExitOk;
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  auto request = std::make_shared<GenerateRequest>();
  CLI::App* generate = app.add_subcommand(
      "generate",
      "Sample text from a text run's checkpoint with the KV cache (RoPE/learned positions at absolute "
      "positions). Prints the prompt and its continuation.");
  add_checkpoint_options(*generate, request->run_dir, request->checkpoint);
  generate->add_option(
      "--adapter", request->adapter,
      std::string(kAdapterHelp) + "; with --chat too. One per command (eval compares several)");
  generate->add_option("--prompt", request->prompt,
                       "Prompt text (its tokens, after BOS where the tokenizer's model expects one)");
  generate->add_option("--chat", request->chat,
                       "A user message, rendered through the run's chat template (ChatML when the tokenizer "
                       "has none; docs/chat.md); prints the answer, which ends at the template's end-of-turn "
                       "token");
  generate->add_option("--system", request->system, "With --chat: a system message before it");
  generate->add_option("--chat-template", request->chat_template,
                       "With --chat: the template family to use instead of the recorded one (chatml, llama3, "
                       "llama3.1, llama2, gemma, mistral, phi3, zephyr)");
  generate
      ->add_option("--prompt-ids", request->prompt_ids,
                   "Prompt as ids after BOS (runs whose tokenizer is not known, e.g. imported tokens)")
      ->delimiter(',');
  generate->add_option("--tokenizer", request->tokenizer,
                       "A tokenizer (.model, .gguf or tokenizer.json) to encode the prompt and decode with, "
                       "instead of the run's");
  generate->add_option("--max-new-tokens", request->max_new_tokens, "Tokens to generate at most")
      ->capture_default_str()
      ->check(at_least(1));
  // Range checks (finite, >= 0; top-k <= vocab) are generate_text's: NaN and inf pass CLI11's checks.
  generate
      ->add_option("--temperature", request->temperature,
                   "Softmax temperature, finite, >= 0; 0 = greedy (argmax)")
      ->capture_default_str();
  generate
      ->add_option("--top-k", request->top_k,
                   "Sample among the K likeliest tokens (K <= the vocabulary); 0 = all")
      ->capture_default_str()
      ->check(at_least(0));
  generate->add_option("--seed", request->seed, "Seed of the sampling generator")->capture_default_str();
  generate->add_option("--set", request->overrides, "Override device or threads");
  generate->add_flag("--verify-cache", request->verify_cache,
                     "Recompute the full causal pass at every step and end with the line "
                     "`verify-cache max_abs_diff=<float>` (largest cached-vs-full logit difference)");
  return {generate, [request] { return run_generate(*request); }};
}

}  // namespace causal::cli
