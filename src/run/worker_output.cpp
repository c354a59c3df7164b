// A stderr-only logger for ranks other than 0.
#include "run/worker_output.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <string>

namespace causal {

WorkerOutput::WorkerOutput(int64_t rank)
    : logger_(std::make_shared<spdlog::logger>("rank " + std::to_string(rank),
                                               std::make_shared<spdlog::sinks::stderr_color_sink_mt>())) {
  logger_->set_level(spdlog::level::warn);
  logger_->set_pattern("%l: %v");
}

}  // namespace causal
