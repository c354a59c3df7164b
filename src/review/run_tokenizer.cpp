// A run's tokenizer rebuilt from the files its checkpoint keeps.
#include "review/run_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace causal {
namespace {

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError("[checkpoint] cannot read " + path.string());
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

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

}  // namespace causal
