// Difficulty-grid scoring (see retrieval_difficulty_eval.h).
#include "task/retrieval_difficulty_eval.h"

#include <ATen/ATen.h>
#include <spdlog/fmt/fmt.h>

#include <map>
#include <set>

#include "task/retrieval_eval.h"

namespace causal {

nlohmann::json score_difficulty_grid(const std::vector<DifficultyCell>& cells,
                                     const AnswerPredictor& predict) {
  nlohmann::json out = {{"cells", nlohmann::json::array()}};
  for (const DifficultyCell& cell : cells) {
    const at::Tensor predicted = predict(cell.split.all()).to(at::kCPU, at::kLong);  // (N)
    const double accuracy = predicted.eq(cell.split.answers).to(at::kDouble).mean().item<double>();
    out["cells"].push_back({{"length", cell.length},
                            {"distractors", cell.distractors},
                            {"evidence", cell.evidence},
                            {"count", cell.split.size()},
                            {"accuracy", accuracy}});
  }
  return out;
}

nlohmann::json evaluate_difficulty(Transformer& model, const RunConfig& config, const DifficultySpec& spec,
                                   const c10::Device& device) {
  const RetrievalData data = build_retrieval_data(config.data);
  std::set<RetrievalSignature> seen;
  for (const RetrievalSplit* split : {&data.train, &data.test, &data.val}) add_signatures(*split, seen);
  const std::vector<DifficultyCell> cells =
      generate_difficulty_grid(config.data, spec, config.data.seed + 2000, std::move(seen));
  nlohmann::json figures = score_difficulty_grid(
      cells, [&](const Batch& batch) { return predict_retrieval_answers(model, batch, device); });
  figures["trained_pairs"] = config.data.pairs;
  figures["spec"] = {{"lengths", spec.lengths},
                     {"distractors", spec.distractors},
                     {"depths", spec.depths},
                     {"rows", spec.rows}};
  return figures;
}

std::string format_difficulty_table(const nlohmann::json& figures) {
  // length -> distractors -> evidence -> accuracy
  std::map<int64_t, std::map<int64_t, std::map<int64_t, double>>> grid;
  for (const auto& c : figures["cells"]) {
    grid[c["length"].get<int64_t>()][c["distractors"].get<int64_t>()][c["evidence"].get<int64_t>()] =
        c["accuracy"].get<double>();
  }
  const int64_t trained = figures.value("trained_pairs", int64_t{0});
  std::string out =
      "difficulty grid: accuracy by context length (records), distractors (rows) and evidence "
      "index (columns)\n";
  for (const auto& [length, rows] : grid) {
    out += "  length " + std::to_string(length) + (length == trained ? " (trained)" : "") +
           (length > trained ? " (longer than trained)" : "") + "\n    distractors \\ evidence";
    std::set<int64_t> columns;
    for (const auto& row : rows)
      for (const auto& entry : row.second) columns.insert(entry.first);
    for (int64_t e : columns) out += fmt::format(" {:6}", e);
    out += "\n";
    for (const auto& [d, by_e] : rows) {
      out += fmt::format("    {:<22}", d);
      for (int64_t e : columns) {
        const auto it = by_e.find(e);
        if (it == by_e.end()) {
          out += "      -";
        } else {
          out += fmt::format(" {:6.3f}", it->second);
        }
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace causal
