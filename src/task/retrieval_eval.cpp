// Retrieval evaluation and controls.
#include "task/retrieval_eval.h"

#include <ATen/ATen.h>
#include <spdlog/fmt/fmt.h>
#include <torch/autograd.h>

#include <map>

#include "task/lab_checks.h"
#include "task/objective.h"

namespace causal {
namespace {

// Logits at every position for a batch, evaluated in chunks so memory stays bounded.
at::Tensor logits_of(Transformer& model, const Batch& batch, const c10::Device& device) {
  constexpr int64_t kChunk = 1024;
  std::vector<at::Tensor> parts;
  const int64_t n = batch.tokens.size(0);
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t end = std::min(n, start + kChunk);
    Batch part{batch.tokens.slice(0, start, end), batch.positions.slice(0, start, end), at::Tensor(),
               batch.key_valid.slice(0, start, end), batch.labels.slice(0, start, end)};
    parts.push_back(model->forward(model_inputs(part.to(device))).logits.to(at::kCPU));
  }
  return at::cat(parts, 0);  // (N,T,V)
}

struct QueryScores {
  at::Tensor correct;  // (N) bool
  double loss = 0.0;
};

QueryScores score_query(const at::Tensor& logits, const at::Tensor& answers) {
  at::Tensor last = logits.select(1, logits.size(1) - 1);  // (N,V)
  return {last.argmax(-1).eq(answers), at::cross_entropy_loss(last, answers).item<double>()};
}

double mean_of(const at::Tensor& flags) { return flags.to(at::kDouble).mean().item<double>(); }

nlohmann::json accuracy_by(const at::Tensor& group, const at::Tensor& correct) {
  std::map<int64_t, std::pair<int64_t, int64_t>> tally;  // group -> (count, correct)
  auto g = group.accessor<int64_t, 1>();
  auto c = correct.accessor<bool, 1>();
  for (int64_t i = 0; i < group.size(0); ++i) {
    tally[g[i]].first += 1;
    tally[g[i]].second += c[i] ? 1 : 0;
  }
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, counts] : tally) {
    out[std::to_string(key)] = {
        {"count", counts.first},
        {"accuracy", static_cast<double>(counts.second) / static_cast<double>(counts.first)}};
  }
  return out;
}

}  // namespace

nlohmann::json RetrievalReport::to_json() const {
  nlohmann::json out = {{"test_loss", test_loss},
                        {"test_accuracy", test_accuracy},
                        {"no_context_accuracy", no_context_accuracy},
                        {"causality_max_diff", causality_max_diff},
                        {"by_evidence_position", by_evidence_position},
                        {"by_distractors", by_distractors}};
  if (intervention_accuracy) out["intervention_accuracy"] = *intervention_accuracy;
  if (split == "test") {
    out["by_pairs"] = by_pairs;
    return out;
  }
  nlohmann::json prefixed = nlohmann::json::object();
  for (const auto& [key, value] : out.items()) {
    const std::string bare = key.rfind("test_", 0) == 0 ? key.substr(5) : key;
    prefixed[split + "_" + bare] = value;
  }
  return prefixed;
}

namespace {

// Every control on `test` (the split scored), plus each held-out length when `held_out` is given.
RetrievalReport evaluate_split(Transformer& model, const RetrievalSplit& test,
                               const std::map<int64_t, RetrievalSplit>* held_out, int64_t value_count,
                               const c10::Device& device) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  RetrievalReport report;
  const int64_t n = test.size();
  const int64_t t = test.length();
  const Batch full = test.all();

  at::Tensor logits = logits_of(model, full, device);  // (N,T,V)
  QueryScores scores = score_query(logits, test.answers);
  report.test_loss = scores.loss;
  report.test_accuracy = mean_of(scores.correct);
  report.by_evidence_position = accuracy_by(test.evidence, scores.correct);
  report.by_distractors = accuracy_by(test.distractors, scores.correct);
  report.by_pairs[std::to_string(test.pairs)] = {
      {"count", n}, {"accuracy", report.test_accuracy}, {"loss", report.test_loss}};

  // No-context ablation: the query record alone, at position 0.
  {
    Batch query_only{full.tokens.slice(1, t - 1, t), at::zeros({n, 1}, at::kLong), at::Tensor(),
                     at::ones({n, 1}, at::kBool), full.labels.slice(1, t - 1, t)};
    report.no_context_accuracy =
        mean_of(score_query(logits_of(model, query_only, device), test.answers).correct);
  }

  // Changed-value intervention: only the queried record's value changes; the query stays the same.
  // Query-only rows have no record to change.
  if (t > 1) {
    at::Tensor pad = t - test.valid.sum(1);   // (N) left padding per row
    at::Tensor column = pad + test.evidence;  // (N) absolute column of the queried record
    at::Tensor new_answers = (test.answers + 1).remainder(value_count);
    Batch changed = full;
    changed.tokens = full.tokens.clone();
    changed.tokens.select(2, 1).index_put_({at::arange(n, at::kLong), column}, new_answers);
    report.intervention_accuracy =
        mean_of(score_query(logits_of(model, changed, device), new_answers).correct);
  }

  // Causality: change every context value from the cut on; logits before the cut must not move at all.
  {
    const int64_t cut = t / 2;
    Batch perturbed = full;
    perturbed.tokens = full.tokens.clone();
    at::Tensor values = perturbed.tokens.select(2, 1).slice(1, cut, t - 1);  // context values after the cut
    values.copy_((values + 1).remainder(value_count));
    at::Tensor moved = logits_of(model, perturbed, device);
    report.causality_max_diff =
        cut > 0 ? (moved.slice(1, 0, cut) - logits.slice(1, 0, cut)).abs().max().item<double>() : 0.0;
  }

  if (held_out) {
    for (const auto& [pairs, split] : *held_out) {
      QueryScores s = score_query(logits_of(model, split.all(), device), split.answers);
      report.by_pairs[std::to_string(pairs)] = {
          {"count", split.size()}, {"accuracy", mean_of(s.correct)}, {"loss", s.loss}};
    }
  }
  if (was_training) model->train();
  return report;
}

}  // namespace

RetrievalReport evaluate_retrieval(Transformer& model, const RetrievalData& data, const c10::Device& device) {
  return evaluate_split(model, data.test, &data.held_out, data.value_count, device);
}

RetrievalReport evaluate_retrieval_validation(Transformer& model, const RetrievalData& data,
                                              const c10::Device& device) {
  RetrievalReport report = evaluate_split(model, data.val, nullptr, data.value_count, device);
  report.split = "val";
  return report;
}

at::Tensor predict_retrieval_answers(Transformer& model, const Batch& batch, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const at::Tensor logits = logits_of(model, batch, device);  // (N,T,V)
  if (was_training) model->train();
  return logits.select(1, logits.size(1) - 1).argmax(-1);  // (N)
}

double retrieval_fixed_batch_loss(Transformer& model, const RetrievalData& data, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  const int64_t rows = std::min<int64_t>(128, data.train.size());
  Batch batch = data.train.batch(at::arange(rows, at::kLong));
  return score_query(logits_of(model, batch, device), batch.labels.select(1, batch.labels.size(1) - 1)).loss;
}

std::string format_retrieval_table(const nlohmann::json& results) {
  std::string out;
  auto row = [&](const char* label, const char* key, const std::string& check) {
    if (!results.contains(key)) return;
    out += fmt::format("  {:<26} {:12.6g}   {}\n", label, results[key].get<double>(), check);
  };
  out += "retrieval results\n";
  row("initial loss", "initial_loss", "");
  for (const LabCheck& check : lab_checks()) {
    const std::string note = *check.note ? std::string(" (") + check.note + ")" : "";
    row(check.label, check.field, "lab check: " + lab_check_rule(check) + note);
  }
  // Validation figures (periodic evaluation and selection; no lab check applies to them).
  row("validation loss", "val_loss", "");
  row("validation accuracy", "val_accuracy", "");
  row("val no-context accuracy", "val_no_context_accuracy", "");
  row("val intervention accuracy", "val_intervention_accuracy", "");
  auto breakdown = [&](const char* title, const char* key) {
    if (!results.contains(key) || results[key].empty()) return;
    out += std::string("  accuracy by ") + title + ":";
    for (const auto& [k, v] : results[key].items()) {
      out += fmt::format("  {}: {:.3f} (n={})", k, v["accuracy"].get<double>(), v["count"].get<int64_t>());
    }
    out += "\n";
  };
  breakdown("evidence position", "by_evidence_position");
  breakdown("distractors", "by_distractors");
  breakdown("pairs (length)", "by_pairs");
  return out;
}

}  // namespace causal
