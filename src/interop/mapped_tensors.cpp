// Both directions undo each other row for row: transpose, slice of a fused tensor, RoPE row order.
#include "interop/mapped_tensors.h"

#include <ATen/ATen.h>

#include "core/errors.h"
#include "interop/qk_layout.h"

namespace causal {

std::vector<std::pair<std::string, at::Tensor>> file_tensors(const std::vector<MappedTensor>& map,
                                                             const ModelConfig& m, RopePairing file_pairing,
                                                             const std::map<std::string, at::Tensor>& params,
                                                             const std::string& source) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t i = 0; i < map.size();) {
    const MappedTensor& first = map[i];
    std::vector<at::Tensor> parts;
    for (; i < map.size() && map[i].file == first.file; ++i) {
      const MappedTensor& row = map[i];
      const auto it = params.find(row.causal);
      at::Tensor t;
      if (it != params.end()) {
        t = it->second;
      } else if (row.absent) {
        t = at::zeros({row.file_shape[0] / row.parts});
      } else {
        throw CheckpointError("[export] " + source + ": no tensor " + row.causal);
      }
      const RopePairing pairing = row.file_pairing.value_or(file_pairing);
      if (row.rotary_heads > 0 && m.rope.pairing != pairing)
        t = pairing == RopePairing::kInterleaved ? halves_to_interleaved(t, row.rotary_heads)
                                                 : interleaved_to_halves(t, row.rotary_heads);
      parts.push_back(t);
    }
    at::Tensor whole = parts.size() == 1 ? parts[0] : at::cat(parts);
    if (first.transposed) whole = whole.t().contiguous();
    out.emplace_back(first.file, whole);
  }
  return out;
}

std::map<std::string, at::Tensor> causal_tensors(const std::vector<MappedTensor>& map, const ModelConfig& m,
                                                 RopePairing file_pairing,
                                                 const std::function<at::Tensor(const MappedTensor&)>& fetch,
                                                 const std::string& path) {
  std::map<std::string, at::Tensor> out;
  // The slices of a fused tensor are adjacent rows: its file tensor is read and converted once for them.
  const MappedTensor* fetched_row = nullptr;
  at::Tensor fetched;
  for (const MappedTensor& row : map) {
    if (!fetched_row || fetched_row->file != row.file) {
      fetched = fetch(row);
      fetched_row = &row;
    }
    at::Tensor t = fetched;
    if (row.transposed) t = t.t();
    if (row.parts > 1) {
      const int64_t rows = t.size(0) / row.parts;
      t = t.narrow(0, row.part * rows, rows);
    }
    t = t.contiguous();
    const RopePairing pairing = row.file_pairing.value_or(file_pairing);
    if (row.rotary_heads > 0 && m.rope.pairing != pairing)
      t = pairing == RopePairing::kInterleaved ? interleaved_to_halves(t, row.rotary_heads)
                                               : halves_to_interleaved(t, row.rotary_heads);
    if (row.absent) {
      if (t.ne(0).any().item<bool>())
        throw ConfigError(path, row.causal,
                          "non-zero bias in a model whose causal config has no such bias (model.bias false" +
                              std::string(m.qkv_bias ? ")" : ", model.qkv_bias false)"));
      continue;
    }
    out[row.causal] = t;
  }
  return out;
}

}  // namespace causal
