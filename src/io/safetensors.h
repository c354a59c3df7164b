// Standard safetensors files: u64 little-endian header length, a JSON header naming each tensor's dtype,
// shape and byte range, then the raw little-endian data. Model weights are stored this way so any
// safetensors reader (Python, Rust, ...) can open a causal checkpoint.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace causal {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Writes `tensors` (any device; copied to CPU) in the given order with string `metadata`, and fsyncs the
// file. Throws CheckpointError naming the file or tensor on failure (unsupported dtype, duplicate name, IO).
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads every tensor (CPU, in file order) after checking the header: known dtypes, byte ranges that match
// the shapes, lie inside the file and cover the data exactly once. Throws CheckpointError otherwise.
NamedTensors load_safetensors(const std::string& path,
                              std::map<std::string, std::string>* metadata = nullptr);

// A tensor as the header describes it.
struct SafetensorsTensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  at::ScalarType dtype;
};

// The header alone, checked as load_safetensors checks it: what the file holds, nothing read beyond.
std::vector<SafetensorsTensorInfo> safetensors_tensors(const std::string& path);

// Reads each tensor of the file into targets[name], in place: no second copy of the data is held (a CPU
// contiguous target is read into directly; another goes through one tensor-sized buffer). Every tensor of
// the file must have a target of its shape and dtype and every target a tensor (CheckpointError otherwise,
// before anything is read). Callers hold a NoGradGuard when the targets are parameters. `after_read`, when
// set, is called with each tensor's name once its target holds it, before the next is read (a caller may
// then replace the target's storage, e.g. hold it in less memory).
using TensorRead = std::function<void(const std::string& name)>;
void read_safetensors_into(const std::string& path, const std::map<std::string, at::Tensor>& targets,
                           const TensorRead& after_read = {});

}  // namespace causal
