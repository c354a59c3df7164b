// What the leader of a training job (rank 0, or the single process) writes: the run folder, locked, from
// config.json on: log, metrics, checkpoints, forensics bundles and results.json.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"
#include "run/rank_output.h"
#include "run/run_folder.h"
#include "task/task.h"

namespace causal {

class LeaderOutput : public RankOutput {
 public:
  // `folder` is prepared: config.json and `task_files` are written. `task`, `config` and `config_json`
  // are the job's and outlive this.
  LeaderOutput(std::unique_ptr<RunFolder> folder, std::map<std::string, std::string> task_files,
               MatmulPeak peak, Task& task, const RunConfig& config, const nlohmann::json& config_json,
               bool print_table);

  void append_metrics(const nlohmann::json& row) override { folder_->append_metrics(row); }
  spdlog::logger& log() override { return folder_->log(); }
  spdlog::logger& run_log() override { return folder_->log(); }
  std::string run_dir() const override { return folder_->path().string(); }
  const MatmulPeak& peak() const override { return peak_; }
  std::unique_ptr<RankLoop> loop(Transformer model, const torch::optim::Optimizer& optimizer,
                                 const std::optional<CheckpointInfo>& from, const FaultInjection& fault,
                                 const ThreadSplit& threads,
                                 const std::optional<BaseCheckpoint>& base) override;
  void check_writes(int64_t step, const std::string& checkpoint) const override;
  TrainOutcome complete(TrainOutcome outcome, Transformer& model, double initial_loss,
                        const TrainSummary& summary, const RankContext& ranks) override;

 private:
  class Loop;
  std::unique_ptr<RunFolder> folder_;
  std::map<std::string, std::string> task_files_;  // written into the folder and every checkpoint
  MatmulPeak peak_;
  Task& task_;
  const RunConfig& config_;
  const nlohmann::json& config_json_;
  bool print_table_;
};

}  // namespace causal
