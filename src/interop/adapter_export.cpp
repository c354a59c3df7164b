// LoRA adapters mapped onto the base export's file tensors (tensor_map), then written as llama.cpp's GGUF
// adapter or as a PEFT folder.
#include "interop/adapter_export.h"

#include <ATen/ATen.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/errors.h"
#include "interop/export_source.h"
#include "interop/qk_layout.h"
#include "interop/tensor_map.h"
#include "io/atomic_file.h"
#include "io/gguf_file.h"
#include "io/safetensors.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

constexpr const char* kSource = "lora adapter";

// The weight names (after "blocks.N.") an adapter may target; "head.weight" is the output layer.
const std::set<std::string> kBlockTargets = {
    "attn.q_proj.weight",   "attn.k_proj.weight",   "attn.v_proj.weight",
    "attn.o_proj.weight",   "ffn.gate_proj.weight", "ffn.up_proj.weight",
    "ffn.down_proj.weight", "ffn.fc_in.weight",     "ffn.fc_out.weight"};

bool is_target(const std::string& parameter) {
  if (parameter == "head.weight") return true;
  if (parameter.rfind("blocks.", 0) != 0) return false;
  const size_t dot = parameter.find('.', 7);
  return dot != std::string::npos && kBlockTargets.count(parameter.substr(dot + 1)) > 0;
}

// One adapter on one file tensor: a fused tensor (GPT-2's qkv) gets its parts' adapters as one of rank
// (parts adapted) * r: A stacked, B block-diagonal with zero rows for the parts without an adapter.
struct FileAdapter {
  std::string file;      // the base file's tensor name, e.g. "blk.0.attn_q.weight"
  at::Tensor a, b;       // (r_t, in), (out, r_t) in the file's row order
  at::Tensor magnitude;  // (out) in the file's row order, DoRA only
  int64_t blocks = 1;    // r_t / r
};

void check_adapter(const LoraAdapter& adapter) {
  if (adapter.rank <= 0)
    throw ConfigError(kSource, "rank", std::to_string(adapter.rank) + ": must be positive");
  if (!std::isfinite(adapter.alpha) || adapter.alpha == 0.0)
    throw ConfigError(kSource, "alpha",
                      std::to_string(adapter.alpha) +
                          ": must be finite and non-zero (llama.cpp reads "
                          "alpha 0 as \"scale 1\")");
  if (adapter.tensors.empty()) throw ConfigError(kSource, "tensors", "the adapter has no tensors");
}

std::vector<FileAdapter> file_adapters(const LoraAdapter& adapter, InteropFormat format,
                                       TargetArchitecture arch) {
  check_adapter(adapter);
  const ModelConfig& m = adapter.model;
  const std::vector<MappedTensor> map = tensor_map(format, arch, m);
  std::map<std::string, const MappedTensor*> rows;
  for (const MappedTensor& row : map) rows[row.causal] = &row;

  std::map<std::string, const LoraTensors*> by_parameter;
  for (const LoraTensors& t : adapter.tensors) {
    if (!by_parameter.emplace(t.parameter, &t).second)
      throw ConfigError(kSource, t.parameter, "listed twice");
    if (t.parameter == "head.weight" && m.tie_embeddings)
      throw ConfigError(kSource, t.parameter,
                        "the head is tied to the embedding (model.tie_embeddings): the export writes no "
                        "output tensor for an adapter to attach to");
    const auto it = rows.find(t.parameter);
    if (!is_target(t.parameter) || it == rows.end())
      throw ConfigError(kSource, t.parameter,
                        "not a LoRA target of this model (q_proj, k_proj, v_proj, o_proj, gate_proj, "
                        "up_proj, down_proj, fc_in, fc_out of a block, or head)");
    const MappedTensor& row = *it->second;
    std::vector<int64_t> shape = row.file_shape;
    if (row.transposed) std::swap(shape[0], shape[1]);
    const int64_t out = shape[0] / row.parts, in = shape[1];
    auto bad = [](const at::Tensor& x, int64_t rows_, int64_t cols) {
      return !x.defined() || x.dim() != 2 || x.size(0) != rows_ || x.size(1) != cols ||
             x.scalar_type() != at::kFloat;
    };
    if (adapter.dora && row.parts > 1)
      throw ConfigError(kSource, t.parameter,
                        "DoRA on " + row.file +
                            ", which the export fuses with other products: PEFT's fused module has one "
                            "magnitude for all of them (export with --merge, or adapt it without DoRA)");
    if (adapter.dora != t.magnitude.defined() ||
        (adapter.dora &&
         (t.magnitude.dim() != 1 || t.magnitude.size(0) != out || t.magnitude.scalar_type() != at::kFloat)))
      throw ConfigError(kSource, t.parameter,
                        adapter.dora ? "expected a float32 DoRA magnitude (" + std::to_string(out) + ")"
                                     : "has a DoRA magnitude, and the adapter is no DoRA adapter");
    if (bad(t.a, adapter.rank, in) || bad(t.b, out, adapter.rank))
      throw ConfigError(
          kSource, t.parameter,
          "expected float32 a (" + std::to_string(adapter.rank) + ", " + std::to_string(in) + ") and b (" +
              std::to_string(out) + ", " + std::to_string(adapter.rank) + "), got " +
              (t.a.defined() ? c10::str(t.a.sizes(), " ", t.a.scalar_type()) : "none") + " and " +
              (t.b.defined() ? c10::str(t.b.sizes(), " ", t.b.scalar_type()) : "none"));
  }

  const RopePairing default_pairing = file_rope_pairing(format);
  std::vector<FileAdapter> out;
  for (size_t i = 0; i < map.size();) {
    const MappedTensor& first = map[i];
    std::vector<at::Tensor> as, bs;  // per part: B rows in the file's order, or undefined
    at::Tensor magnitude;
    for (; i < map.size() && map[i].file == first.file; ++i) {
      const MappedTensor& row = map[i];
      const auto it = by_parameter.find(row.causal);
      if (it == by_parameter.end()) {
        as.emplace_back();
        bs.emplace_back();
        continue;
      }
      at::Tensor b = it->second->b.contiguous();
      magnitude = it->second->magnitude;
      const RopePairing pairing = row.file_pairing.value_or(default_pairing);
      // Rows of B (and the magnitudes) move as the base export moves the weight's rows (W + s B A keeps
      // its row order).
      if (row.rotary_heads > 0 && m.rope.pairing != pairing) {
        const auto move = [&](const at::Tensor& t) {
          return pairing == RopePairing::kInterleaved ? halves_to_interleaved(t, row.rotary_heads)
                                                      : interleaved_to_halves(t, row.rotary_heads);
        };
        b = move(b);
        if (magnitude.defined()) magnitude = move(magnitude.unsqueeze(1)).squeeze(1).contiguous();
      }
      as.push_back(it->second->a.contiguous());
      bs.push_back(b);
    }
    std::vector<at::Tensor> present_a;
    for (const at::Tensor& a : as)
      if (a.defined()) present_a.push_back(a);
    if (present_a.empty()) continue;
    FileAdapter f;
    f.file = first.file;
    f.magnitude = magnitude;
    f.blocks = static_cast<int64_t>(present_a.size());
    f.a = present_a.size() == 1 ? present_a[0] : at::cat(present_a);  // (blocks * r, in)
    if (bs.size() == 1) {
      f.b = bs[0];
    } else {
      const int64_t part_rows = (first.transposed ? first.file_shape[1] : first.file_shape[0]) / first.parts;
      f.b = at::zeros({part_rows * static_cast<int64_t>(bs.size()), f.blocks * adapter.rank});  // (out, r_t)
      int64_t block = 0;
      for (size_t p = 0; p < bs.size(); ++p) {
        if (!bs[p].defined()) continue;
        f.b.narrow(0, static_cast<int64_t>(p) * part_rows, part_rows)
            .narrow(1, block * adapter.rank, adapter.rank)
            .copy_(bs[p]);
        ++block;
      }
    }
    out.push_back(std::move(f));
  }
  return out;
}

std::string short_name(const std::string& module) { return module.substr(module.rfind('.') + 1); }

}  // namespace

LoraAdapter lora_adapter_of(const InteropModel& model, const std::string& format) {
  if (model.adapters.empty())
    throw ConfigError(model.origin, "train.lora",
                      "the checkpoint is a whole model with no LoRA adapters, so --format " + format +
                          " has nothing to write (export the model with --format gguf or hf)");
  LoraAdapter adapter;
  adapter.model = model.model;
  adapter.rank = model.lora.rank;
  adapter.alpha = model.lora.alpha;
  adapter.rslora = model.lora.rslora;
  adapter.dora = model.lora.dora;
  for (const auto& [path, tensors] : model.adapters)
    adapter.tensors.push_back({path + ".weight", tensors.a, tensors.b, tensors.magnitude});
  return adapter;
}

double lora_scale(const LoraAdapter& adapter) {
  const double r = static_cast<double>(adapter.rank);
  return adapter.rslora ? adapter.alpha / std::sqrt(r) : adapter.alpha / r;
}

void write_gguf_lora(const LoraAdapter& adapter, const fs::path& out) {
  const TargetArchitecture arch = check_exportable(adapter.model, "gguf", kSource);
  if (adapter.dora)
    throw ConfigError(
        kSource, "train.lora.dora",
        "llama.cpp's LoRA adapters have no DoRA magnitude: fold the adapters into the base with "
        "`causal export --merge --format gguf`, or write a PEFT adapter (--format peft)");
  const std::vector<FileAdapter> tensors = file_adapters(adapter, InteropFormat::kGguf, arch);
  // llama.cpp scales each tensor's product by alpha / rank with rank read from that tensor (lora_b's
  // columns), and uses no rslora: alpha = scale * r makes its scale causal's; a fused tensor of rank
  // blocks * r gets B times `blocks` for the same scale.
  const double alpha = lora_scale(adapter) * static_cast<double>(adapter.rank);
  GgufFile file;
  auto& md = file.metadata;
  md.emplace_back("general.architecture", GgufValue::string(architecture_name(arch)));
  md.emplace_back("general.type", GgufValue::string("adapter"));
  md.emplace_back("general.name", GgufValue::string("causal lora adapter"));
  md.emplace_back("adapter.type", GgufValue::string("lora"));
  md.emplace_back("adapter.lora.alpha", GgufValue::f32(static_cast<float>(alpha)));
  for (const FileAdapter& f : tensors) {
    const at::Tensor b = f.blocks == 1 ? f.b : (f.b * static_cast<double>(f.blocks)).contiguous();
    // PyTorch shapes (r_t, in) and (out, r_t): ggml's ne (in, r_t) and (r_t, out), as llama.cpp checks them
    // against the base weight's ne (in, out).
    for (const auto& [suffix, t] : {std::pair<std::string, at::Tensor>{".lora_a", f.a}, {".lora_b", b}}) {
      const at::Tensor c = t.to(at::kFloat).contiguous();
      std::string bytes(static_cast<const char*>(c.data_ptr()), c.numel() * sizeof(float));
      file.tensors.push_back({f.file + suffix, c.sizes().vec(), GgufTensorType::kF32, std::move(bytes)});
    }
  }
  write_gguf(out.string(), file);
}

void write_peft_adapter(const LoraAdapter& adapter, const fs::path& out_dir,
                        const std::string& base_model_name) {
  const TargetArchitecture arch = check_exportable(adapter.model, "hf", kSource);
  const std::vector<FileAdapter> tensors = file_adapters(adapter, InteropFormat::kHf, arch);
  const fs::path target = fs::absolute(out_dir);
  if (fs::exists(target))
    throw UsageError(out_dir.string() +
                     ": already exists; the PEFT export writes a new folder (remove it first)");

  // target_modules: the short names (q_proj, lm_head) when the adapter covers every module of that name,
  // else the adapted modules' full paths (PEFT matches a target by the end of the module's name).
  const std::vector<MappedTensor> map = tensor_map(InteropFormat::kHf, arch, adapter.model);
  std::map<std::string, int> in_model, adapted;
  for (size_t i = 0; i < map.size(); ++i)
    if (i == 0 || map[i].file != map[i - 1].file) ++in_model[short_name(module_of_weight(map[i].file))];
  nlohmann::json rank_pattern = nlohmann::json::object(), alpha_pattern = nlohmann::json::object();
  NamedTensors named;
  for (const FileAdapter& f : tensors) {
    const std::string module = module_of_weight(f.file);
    ++adapted[short_name(module)];
    named.emplace_back("base_model.model." + module + ".lora_A.weight", f.a);
    named.emplace_back("base_model.model." + module + ".lora_B.weight", f.b);
    if (f.magnitude.defined())
      named.emplace_back("base_model.model." + module + ".lora_magnitude_vector", f.magnitude);
    if (f.blocks != 1) {
      // A fused tensor's rank is blocks * r: PEFT's scale alpha' / r' must stay causal's.
      const double k = static_cast<double>(f.blocks);
      rank_pattern[module] = f.blocks * adapter.rank;
      alpha_pattern[module] = adapter.alpha * (adapter.rslora ? std::sqrt(k) : k);
    }
  }
  bool whole = true;
  for (const auto& [name, count] : adapted) whole = whole && count == in_model[name];
  std::set<std::string> targets;
  for (const FileAdapter& f : tensors)
    targets.insert(whole ? short_name(module_of_weight(f.file)) : module_of_weight(f.file));

  nlohmann::json config = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"base_model_name_or_path", base_model_name},
      {"r", adapter.rank},
      {"lora_alpha", adapter.alpha},
      {"use_rslora", adapter.rslora},
      {"use_dora", adapter.dora},
      {"target_modules", std::vector<std::string>(targets.begin(), targets.end())},
      {"lora_dropout", 0.0},
      {"bias", "none"},
      // transformers' GPT-2 holds its weights as Conv1D (in, out); A and B keep PEFT's (r, in), (out, r).
      {"fan_in_fan_out", arch == TargetArchitecture::kGpt2},
      {"inference_mode", true},
      {"init_lora_weights", true},
      {"rank_pattern", rank_pattern},
      {"alpha_pattern", alpha_pattern},
      {"modules_to_save", nullptr},
  };

  write_folder_atomically(target, [&](const fs::path& tmp) {
    save_safetensors((tmp / "adapter_model.safetensors").string(), named, {{"format", "pt"}});
    write_file_synced(tmp / "adapter_config.json", config.dump(2) + "\n");
  });
}

}  // namespace causal
