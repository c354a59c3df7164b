// `causal data encode|inspect|import|tokenizer train`: text -> token files, what a token file holds,
// token files from other trainers, and SentencePiece tokenizers.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/errors.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/text_encode.h"
#include "data/token_import.h"

namespace causal::cli {
namespace {

void print_progress(const std::string& line) { std::cerr << line << std::endl; }

}  // namespace

Command add_data_command(CLI::App& app) {
  CLI::App* data = app.add_subcommand(
      "data", "Prepare text data: train tokenizers, encode or import token files, inspect them");
  data->require_subcommand(1);

  auto options = std::make_shared<EncodeOptions>();
  auto memory_mb = std::make_shared<int64_t>(512);
  auto format = std::make_shared<std::string>("text");
  CLI::App* encode = data->add_subcommand(
      "encode",
      "Text or JSONL files -> a .tok token file (docs/data.md). Each text file is one document unless "
      "--doc-separator splits it; each JSONL line is one document. Every document is stored as [BOS, "
      "ids..., EOS]; the prompt-completion and chat formats add a loss mask that leaves the prompt out.");
  encode
      ->add_option("--input", options->inputs,
                   "Text files, or JSONL files (.jsonl, .jsonl.gz), in this order")
      ->required();
  encode
      ->add_option("--format", *format,
                   "JSONL inputs: text ({\"text\": ...} per line), prompt-completion ({\"prompt\", "
                   "\"completion\"}: only the completion counts in the loss) or chat ({\"messages\": [{role, "
                   "content}]} through the tokenizer's chat template, ChatML when it has none: only the "
                   "assistant's turns count)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "prompt-completion", "chat"}));
  encode->add_option("--field", options->jsonl.text, "--format text: the field holding the document")
      ->capture_default_str();
  encode
      ->add_option("--prompt-field", options->jsonl.prompt, "--format prompt-completion: the prompt's field")
      ->capture_default_str();
  encode
      ->add_option("--completion-field", options->jsonl.completion,
                   "--format prompt-completion: the completion's field")
      ->capture_default_str();
  encode->add_option("--chat-template", options->chat_template,
                     "--format chat: the template family to render with instead of the tokenizer's (chatml, "
                     "llama3, llama3.1, llama2, gemma, mistral, phi3, zephyr)");
  encode->add_flag("--skip-bad-lines", options->skip_bad_lines,
                   "JSONL: skip lines that are not JSON or lack a field, count them and report the first, "
                   "instead of stopping at the first with nothing written");
  encode
      ->add_option(
          "--tokenizer", options->tokenizer,
          "bytes (256 byte ids + BOS, EOS, PAD), a SentencePiece .model file, or a byte-level BPE "
          "vocabulary: a .gguf file (its tokenizer only) or an HF tokenizer.json (docs/tokenizers.md)")
      ->capture_default_str();
  encode->add_option("--out", options->out, "Token file to write (training split)")->required();
  encode->add_option("--val-out", options->val_out, "Token file for the validation split (whole documents)");
  encode
      ->add_option("--val-fraction", options->val_fraction,
                   "Share of documents written to --val-out, spread evenly over the input order")
      ->check(CLI::Range(0.0, 1.0));
  encode->add_option("--doc-separator", options->doc_separator,
                     "Split inputs into documents at this string (escapes \\n \\t \\r \\\\ allowed)");
  encode
      ->add_option("--memory-mb", *memory_mb,
                   "Most MiB of text and ids held at once (corpora larger than memory stream through)")
      ->capture_default_str();
  encode->add_option("--threads", options->threads, "Encoding threads; 0 = every core")
      ->capture_default_str();

  auto tok_path = std::make_shared<std::string>();
  CLI::App* inspect = data->add_subcommand(
      "inspect", "Header, document count and document length statistics of a token file");
  inspect->add_option("file", *tok_path, "Token file (.tok)")->required();

  auto import = std::make_shared<ImportOptions>();
  CLI::App* import_cmd = data->add_subcommand(
      "import", "Another trainer's token file (nanoGPT or llm.c .bin) -> a .tok token file");
  auto import_format = std::make_shared<std::string>();
  import_cmd
      ->add_option("--format", *import_format, "nanogpt (flat uint16) or llmc (256 x int32 header, then ids)")
      ->required()
      ->check(CLI::IsMember({"nanogpt", "llmc"}));
  import_cmd->add_option("--input", import->input, "The .bin file")->required();
  import_cmd->add_option("--vocab", import->vocab, "Vocab size: every id must be below it (GPT-2: 50257)")
      ->required();
  import_cmd->add_option("--eot", import->eot,
                         "End-of-text id splitting documents (GPT-2: 50256); without it the file is one "
                         "document");
  import_cmd->add_option("--out", import->out, "Token file to write")->required();

  auto train = std::make_shared<TokenizerTrainOptions>();
  CLI::App* tokenizer = data->add_subcommand("tokenizer", "SentencePiece subword tokenizers");
  tokenizer->require_subcommand(1);
  CLI::App* train_cmd = tokenizer->add_subcommand(
      "train", "Train a SentencePiece model (BOS 0, EOS 1, PAD 2, UNK 3, byte fallback) on text files");
  auto model_type = std::make_shared<std::string>();
  train_cmd->add_option("--input", train->inputs, "Text files; every line is a training sentence")
      ->required();
  train_cmd->add_option("--model-type", *model_type, "bpe or unigram")
      ->required()
      ->check(CLI::IsMember({"bpe", "unigram"}));
  train_cmd
      ->add_option("--vocab-size", train->vocab_size, "Ids in all: 4 specials, 256 bytes, learned pieces")
      ->required();
  train_cmd->add_option("--out", train->out, "Model file to write (.model)")->required();
  train_cmd
      ->add_option("--character-coverage", train->character_coverage,
                   "Share of characters given their own pieces; the rest falls back to bytes")
      ->capture_default_str();
  train_cmd
      ->add_option("--max-sentence-length", train->max_sentence_length,
                   "Bytes; longer lines are cut into parts of this length")
      ->capture_default_str();
  train_cmd->add_option("--threads", train->threads, "Trainer threads; 0 = every core")
      ->capture_default_str();
  train_cmd->add_option("--val-fraction", train->val_fraction,
                        "Leave out the documents `data encode` with this --val-fraction (and the same "
                        "--doc-separator) puts in the validation split");
  train_cmd->add_option("--doc-separator", train->doc_separator,
                        "How inputs split into documents, as for `data encode` (with --val-fraction)");

  return {data, [=] {
            if (encode->parsed()) {
              options->memory_cap_bytes = *memory_mb * (int64_t{1} << 20);
              options->jsonl.format = jsonl_format_from_name(*format);
              options->progress = print_progress;
              std::cout << encode_text_files(*options) << std::flush;
            } else if (inspect->parsed()) {
              std::cout << inspect_token_file(*tok_path) << std::flush;
            } else if (import_cmd->parsed()) {
              import->format = *import_format == "llmc" ? ImportFormat::kLlmc : ImportFormat::kNanoGpt;
              std::cout << import_token_file(*import) << std::flush;
            } else if (train_cmd->parsed()) {
              train->progress = print_progress;
              train->model_type = *model_type == "unigram" ? SubwordModel::kUnigram : SubwordModel::kBpe;
              std::cout << train_tokenizer(*train) << std::flush;
            }
            return kExitOk;
          }};
}

}  // namespace causal::cli
