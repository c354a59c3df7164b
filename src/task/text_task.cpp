// The text language-modeling workload: token files cut into packed or padded rows, loss at every label
// position (padding never in the denominator), scored by loss, perplexity and bits per byte on data.val.
#include <ATen/ATen.h>
#include <spdlog/fmt/fmt.h>

#include <filesystem>

#include "core/errors.h"
#include "data/benchmark_file.h"
#include "data/text_batches.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "io/atomic_file.h"
#include "io/sha256.h"
#include "task/benchmark_eval.h"
#include "task/task.h"
#include "task/text_eval.h"

namespace causal {
namespace {

// Relative data paths are read from the directory the run was trained in; say so when they do not resolve.
TokenFile open_token_file(const std::string& path) {
  if (std::filesystem::path(path).is_relative() && !std::filesystem::exists(path)) {
    throw DataError("[data] " + path + " not found from " + std::filesystem::current_path().string() +
                    "; relative data paths are read from the directory the run was trained in: run the "
                    "command from there");
  }
  return TokenFile(path);
}

// A byte-tokenizer id as a short label: printable ASCII as itself, space "␣", newline "↵", tab "⇥",
// other bytes "xHH", specials by name.
std::string byte_token_label(int64_t id, const TokenizerInfo& info) {
  if (id == info.bos_id) return "BOS";
  if (id == info.eos_id) return "EOS";
  if (id == info.pad_id) return "PAD";
  if (id == ' ') return "\u2423";
  if (id == '\n') return "\u21b5";
  if (id == '\t') return "\u21e5";
  if (id >= 33 && id < 127) return std::string(1, static_cast<char>(id));
  return fmt::format("x{:02X}", static_cast<uint64_t>(id));
}

// A subword (or imported) id as a short label: specials by name, the piece's text with spaces, newlines and
// tabs shown as for bytes, and "#id" where no tokenizer is known.
std::string piece_label(int64_t id, const TokenizerInfo& info, const Tokenizer* tokenizer) {
  if (id == info.bos_id) return "BOS";
  if (id == info.eos_id) return "EOS";
  if (id == info.pad_id) return "PAD";
  if (tokenizer == nullptr) return "#" + std::to_string(id);
  std::string label;
  for (unsigned char c : tokenizer->decode({id})) {
    if (c == ' ' || c == '\n' || c == '\t' || c < 0x20 || c == 0x7f) {
      label += byte_token_label(c, info);
    } else {
      label += static_cast<char>(c);
    }
  }
  return label;
}

// An imported run has no data until it is named; the error says how to name it.
void require_path(const std::string& key, const std::string& path, const std::string& what) {
  if (path.empty())
    throw ConfigError("the run config", key,
                      "no " + what + " token file named (a run imported without data): --set " + key +
                          "=FILE.tok (causal data encode --tokenizer writes one with the run's tokenizer)");
}

// The first `t` positions of a one-row batch.
Batch first_positions(const Batch& b, int64_t t) {
  auto cut = [t](const at::Tensor& x) { return x.defined() ? x.slice(1, 0, t).contiguous() : x; };
  return Batch{cut(b.tokens), cut(b.positions), cut(b.segment_ids), cut(b.key_valid), cut(b.labels)};
}

class TextTask : public Task {
 public:
  TextTask(const RunConfig& config, const c10::Device& device, TaskScope scope)
      : config_(config), rows_(TextRowOptions::from(config.data)), device_(device) {
    const DataConfig& data = config.data;
    const int64_t input_vocab = config.model.inputs[0].vocab;
    require_path("data.val", data.val, "validation");
    if (scope == TaskScope::kTraining) {
      require_path("data.train", data.train, "training");
      TokenFile train = open_token_file(data.train);
      val_ = std::make_unique<TokenFile>(open_token_file(data.val));
      check_same_tokenizer(val_->tokenizer(), data.val, train.tokenizer(), data.train);
      check_model_vocab(train.header(), data.train, input_vocab, config.model.output_vocab);
      // Once per run: the same counts with other tokens (a re-encoded or edited file) must not resume.
      train_sha256_ = io_as<DataError>([&] { return sha256_file(data.train); });
      source_ = std::make_unique<TextBatchSource>(std::move(train), rows_, config.train.batch_size,
                                                  batch_seed(config.seed));
      open_benchmarks(config.train.eval_tasks);
    } else {
      val_ = std::make_unique<TokenFile>(open_token_file(data.val));
      check_model_vocab(val_->header(), data.val, input_vocab, config.model.output_vocab);
    }
    if (val_->tokenizer().name != "bytes")
      tokenizer_ = tokenizer_for(val_->tokenizer(), val_->tokenizer_model());
  }

  std::string describe() const override {
    std::string text = source_ ? std::to_string(source_->file().num_tokens()) + " train / " : "";
    const bool masked = val_->header().loss_mask || (source_ && source_->file().header().loss_mask);
    text += std::to_string(val_->num_tokens()) + " val tokens (" + val_->tokenizer().describe() + "); " +
            (masked ? "loss at the labels the files' loss mask keeps (answers, not prompts), padding excluded"
                    : "loss at every label position, padding excluded");
    for (const Benchmark& b : benchmarks_)
      text += "; benchmark " + b.name + " (" + std::to_string(b.items.size()) + " items)";
    return text;
  }
  nlohmann::json identity() const override {
    const TokenFile& train = source().file();
    return {{"tokenizer", train.tokenizer().name},
            {"tokenizer_description", train.tokenizer().describe()},
            {"train_tokens", train.num_tokens()},
            {"train_documents", train.num_documents()},
            {"train_sha256", train_sha256_}};
  }
  int64_t sequence_length() const override { return rows_.seq_len; }

  std::map<std::string, std::string> run_files() const override {
    const TokenFile& train = source().file();
    std::map<std::string, std::string> files = {
        {kTokenizerInfoFile, tokenizer_info_to_json(train.tokenizer()).dump(2) + "\n"}};
    if (!train.tokenizer_model().empty()) files[kTokenizerModelFile] = train.tokenizer_model();
    return files;
  }

  BatchSource& training_batches() override { return source(); }
  double initial_loss(Transformer& model) override {
    return text_fixed_batch_loss(model, source().file(), rows_, config_.train.batch_size, device_);
  }

  // The validation figures, then each benchmark of train.eval_tasks (only a training run opens them).
  nlohmann::json evaluate(Transformer& model) override {
    nlohmann::json figures =
        evaluate_text(model, *val_, rows_, config_.train.batch_size, device_).to_json("val_");
    for (const Benchmark& benchmark : benchmarks_) {
      figures.update(
          score_benchmark(model, benchmark, *bench_tokenizer_, config_.train.batch_size, device_).metrics());
    }
    return figures;
  }
  // The same figures without their "val_" prefix: the file name already says which split.
  nlohmann::json checkpoint_figures(const nlohmann::json& evaluation) const override {
    nlohmann::json figures = nlohmann::json::object();
    for (const char* key : {"loss", "perplexity", "bits_per_byte", "tokens", "bytes"}) {
      if (evaluation.contains(std::string("val_") + key))
        figures[key] = evaluation.at(std::string("val_") + key);
    }
    return figures;
  }
  std::string results_table(const nlohmann::json& results) const override {
    return format_text_table(results) + format_benchmark_lines(results);
  }

  std::vector<std::string> token_labels(const Batch& batch, int64_t row) const override {
    const at::Tensor ids = batch.tokens[row].select(1, 0).to(at::kCPU, at::kLong).contiguous();  // (T)
    std::vector<std::string> labels;
    const bool bytes = val_->tokenizer().name == "bytes";
    for (int64_t t = 0; t < ids.size(0); ++t) {
      const int64_t id = ids[t].item<int64_t>();
      labels.push_back(bytes ? byte_token_label(id, val_->tokenizer())
                             : piece_label(id, val_->tokenizer(), tokenizer_.get()));
    }
    return labels;
  }

  ProbeSet probe_set(int64_t max_batches) const override {
    ProbeSet set;
    const TextEvalBatches batches(*val_, rows_, config_.train.batch_size);
    for (int64_t i = 0; i < std::min(max_batches, batches.num_batches()); ++i)
      set.batches.push_back(batches.batch(i));
    if (set.batches.empty()) throw DataError("[data] " + config_.data.val + " has no rows to probe");
    set.labels = token_labels(set.batches[0], 0);
    return set;
  }

  TaskExample first_example(int64_t max_positions) const override {
    const TextEvalBatches rows(*val_, rows_, /*batch_size=*/1);
    if (rows.num_rows() == 0) throw DataError("[data] " + config_.data.val + " has no rows");
    const Batch row = rows.batch(0);
    const int64_t t = std::min<int64_t>(row.tokens.size(1), std::max<int64_t>(max_positions, 1));
    TaskExample example;
    example.batch = first_positions(row, t);
    example.labels = token_labels(example.batch, 0);
    example.description =
        "first " + std::to_string(t) + " positions of the first validation row of " + config_.data.val;
    const at::Tensor ids = example.batch.tokens[0].select(1, 0).contiguous();
    std::vector<int64_t> first(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + t);
    if (val_->tokenizer().name == "bytes") {
      for (int64_t id : first) {
        if (id < 256) example.text += static_cast<char>(id);
      }
    } else if (tokenizer_) {
      example.text = tokenizer_->decode(first);
    }
    return example;
  }

 private:
  std::string train_sha256_;
  TextBatchSource& source() const {
    TORCH_CHECK(source_, "[task] a text task opened for evaluation has no training data");
    return *source_;
  }

  // Benchmarks score text, so they need the tokenizer that made the training ids.
  void open_benchmarks(const std::vector<std::string>& paths) {
    if (paths.empty()) return;
    const TokenFile& train = source_->file();
    bench_tokenizer_ = tokenizer_for(train.tokenizer(), train.tokenizer_model());
    if (!bench_tokenizer_) {
      throw DataError("[benchmark] train.eval_tasks needs the text behind the ids, but " +
                      config_.data.train + " holds ids imported from another trainer (tokenizer " +
                      train.tokenizer().name + ")");
    }
    for (const std::string& path : paths) benchmarks_.push_back(read_benchmark(path));
  }

  RunConfig config_;
  TextRowOptions rows_;
  std::unique_ptr<TokenFile> val_;
  std::unique_ptr<Tokenizer> tokenizer_;  // subword files: decodes labels; nullptr for bytes and imported ids
  c10::Device device_;
  std::unique_ptr<TextBatchSource> source_;     // kTraining only
  std::vector<Benchmark> benchmarks_;           // kTraining only: train.eval_tasks
  std::unique_ptr<Tokenizer> bench_tokenizer_;  // the training file's, when there are benchmarks
};

}  // namespace

std::unique_ptr<Task> make_text_task(const RunConfig& config, const c10::Device& device, TaskScope scope) {
  return std::make_unique<TextTask>(config, device, scope);
}

}  // namespace causal
