// The leader's plan and folder before anything is written, and the other ranks' part, which follows it.
#include "run/rank_start.h"

#include <iostream>
#include <string>
#include <vector>

#include "bench/matmul_peak.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/resume.h"
#include "io/run_files.h"
#include "model/autocast_scope.h"
#include "run/leader_output.h"
#include "run/run_folder.h"
#include "run/worker_output.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

constexpr int64_t kLogAndMetricsBytes = 1 << 20;

// Checkpoints are the run's only large files: a new folder keeps keep_checkpoints of them plus the one
// being written. It is the leader's, on a file system every rank shares.
void check_new_folder_writable(const RunConfig& config, const ResumeRequest& request,
                               int64_t checkpoint_bytes) {
  const fs::path dir =
      !request.run_dir.empty() ? fs::path(request.run_dir) : fs::path(request.runs_root) / config.name;
  RunFolder::check_writable(dir,
                            (config.train.keep_checkpoints + 1) * checkpoint_bytes + kLogAndMetricsBytes);
}

TrainOutcome finished_outcome(std::string run_dir, std::string checkpoint, nlohmann::json results) {
  TrainOutcome outcome;
  outcome.run_dir = std::move(run_dir);
  outcome.checkpoint = std::move(checkpoint);
  outcome.already_finished = true;
  outcome.results = std::move(results);
  return outcome;
}

class LeaderStart final : public RankStart {
 public:
  LeaderStart(const RunConfig& config, const TrainRequest& request, const nlohmann::json& config_json,
              const c10::Device& device)
      : config_(config),
        request_(request),
        config_json_(config_json),
        device_(device),
        plan_(plan_start(request.start, config_json)) {
    if (!plan_.continue_in.empty()) folder_ = RunFolder::open_existing(plan_.continue_in);
    if (!plan_.restart_in.empty()) {
      folder_ = RunFolder::open_existing(plan_.restart_in);
      const fs::path checkpoints = folder_->path() / run_files::kCheckpoints;
      remove_stale_temporaries(checkpoints);
      if (fs::is_directory(checkpoints) && latest_valid_checkpoint(checkpoints)) {
        throw RunFolderError("run folder " + plan_.restart_in.string() +
                             " received a checkpoint while this run was starting; run the command again");
      }
    }
  }

  std::optional<CheckpointInfo> checkpoint() override { return checkpoint_to_continue(plan_); }

  // A folder continued in already holds its own checkpoints: room for one more.
  void check_writable(int64_t checkpoint_bytes) const override {
    if (folder_) {
      RunFolder::check_writable(folder_->path(), checkpoint_bytes + kLogAndMetricsBytes);
    } else {
      check_new_folder_writable(config_, request_.start, checkpoint_bytes);
    }
  }

  spdlog::logger* resume_log() override { return folder_ ? &folder_->log() : nullptr; }

  // The folder continued in holds this run at its last step and a readable results.json.
  std::optional<TrainOutcome> finished(const CheckpointInfo& from, const Task& task) override {
    std::optional<nlohmann::json> results = finished_results(plan_, from, config_.train.steps);
    if (!results) return std::nullopt;
    folder_->log().info("run {} already finished at step {}; nothing to do (--resume never starts a new run)",
                        plan_.continue_in.string(), from.state.step);
    if (request_.print_table) std::cout << task.results_table(*results) << std::flush;
    return finished_outcome(plan_.continue_in.string(), from.dir.string(), *results);
  }

  std::unique_ptr<RankOutput> prepare(const std::optional<CheckpointInfo>& from, Task& task) override {
    // First: a bad inherited CAUSAL_MATMUL_PEAK_GFLOPS fails before any write.
    MatmulPeak peak = matmul_peak(device_, products_dtype(config_.model.autocast));
    std::unique_ptr<RunFolder> folder =
        folder_ ? std::move(folder_)
                : RunFolder::create(request_.start.run_dir, request_.start.runs_root, config_.name);
    if (from && !plan_.continue_in.empty()) {
      const std::vector<std::string> set_aside =
          set_aside_invalid_after(plan_.continue_in / run_files::kCheckpoints, from->dir);
      if (!set_aside.empty()) {
        std::string list;
        for (const std::string& item : set_aside) list += (list.empty() ? "" : "; ") + item;
        folder->log().warn("falling back to {}: newer checkpoint(s) invalid, renamed to invalid-step_*: {}",
                           from->dir.string(), list);
      }
      folder->truncate_metrics_after(from->state.step);
    }
    if (!plan_.restart_in.empty()) {
      folder->clear_metrics();
      folder->log().info(
          "restarting {} at step 0: it holds this run's config and no checkpoint (stopped before its first "
          "one); log.txt continues, metrics.jsonl starts again",
          folder->path().string());
    }
    std::map<std::string, std::string> task_files = task.run_files();
    folder->write_json(run_files::kConfig, config_json_);
    for (const auto& [name, bytes] : task_files) folder->write_file(name, bytes);
    return std::make_unique<LeaderOutput>(std::move(folder), std::move(task_files), std::move(peak), task,
                                          config_, config_json_, request_.print_table);
  }

 private:
  const RunConfig& config_;
  const TrainRequest& request_;
  const nlohmann::json& config_json_;
  const c10::Device device_;
  const StartPlan plan_;
  // The folder continued or restarted in, locked; null for a new one, which prepare creates.
  std::unique_ptr<RunFolder> folder_;
};

class WorkerStart final : public RankStart {
 public:
  WorkerStart(int64_t rank, const RunConfig& config, const ResumeRequest& request)
      : rank_(rank), config_(config), request_(request) {}

  std::optional<CheckpointInfo> checkpoint() override { return std::nullopt; }

  // The folder a new run would write, whichever the leader chose: it plans alone.
  void check_writable(int64_t checkpoint_bytes) const override {
    check_new_folder_writable(config_, request_, checkpoint_bytes);
  }

  spdlog::logger* resume_log() override { return nullptr; }

  // At or past the last step there is nothing to train: the leader goes on alone, to evaluate and write
  // results.json.
  std::optional<TrainOutcome> finished(const CheckpointInfo& from, const Task&) override {
    if (from.state.step >= config_.train.steps) return finished_outcome("", from.dir.string(), {});
    return std::nullopt;
  }

  std::unique_ptr<RankOutput> prepare(const std::optional<CheckpointInfo>&, Task&) override {
    return std::make_unique<WorkerOutput>(rank_);
  }

 private:
  const int64_t rank_;
  const RunConfig& config_;
  const ResumeRequest& request_;
};

}  // namespace

std::unique_ptr<RankStart> start_rank(const RankContext& ranks, const RunConfig& config,
                                      const TrainRequest& request, const nlohmann::json& config_json,
                                      const c10::Device& device) {
  if (ranks.leader()) return std::make_unique<LeaderStart>(config, request, config_json, device);
  return std::make_unique<WorkerStart>(ranks.rank(), config, request.start);
}

}  // namespace causal
