// The tensor map (interop/tensor_map.h) applied to tensors, both ways.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "interop/tensor_map.h"

namespace causal {

// Both directions take `file_pairing`, how the format's q/k rows pair dims (file_rope_pairing), unless a row
// says otherwise (MappedTensor::file_pairing).

// Export: the file's tensors in map order (the slices of a fused tensor concatenated) from causal's
// parameters of `m`. A bias the model does not have (MappedTensor::absent) is written as zeros. Throws
// CheckpointError naming `source` for a parameter that is missing.
std::vector<std::pair<std::string, at::Tensor>> file_tensors(const std::vector<MappedTensor>& map,
                                                             const ModelConfig& m, RopePairing file_pairing,
                                                             const std::map<std::string, at::Tensor>& params,
                                                             const std::string& source);

// Import: causal's parameters of `m` from the file's tensors. `fetch` returns the file tensor a row names,
// as float32 of the row's file_shape (it throws otherwise). A bias row the model does not have must be
// all zeros (an export wrote them), else a ConfigError naming `path`; it is then dropped.
std::map<std::string, at::Tensor> causal_tensors(const std::vector<MappedTensor>& map, const ModelConfig& m,
                                                 RopePairing file_pairing,
                                                 const std::function<at::Tensor(const MappedTensor&)>& fetch,
                                                 const std::string& path);

}  // namespace causal
