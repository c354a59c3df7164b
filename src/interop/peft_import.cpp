// PEFT adapter_config.json and adapter_model.safetensors -> adapters on causal's products, checked against
// what train.lora can hold; PEFT's matching rules (target_modules, exclude_modules, rank_pattern and
// alpha_pattern keys) as peft 0.17's LoraModel applies them.
#include "interop/peft_import.h"

#include <ATen/ATen.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>

#include "checkpoint/checkpoint.h"
#include "config/config_io.h"
#include "core/errors.h"
#include "interop/export_source.h"
#include "interop/qk_layout.h"
#include "interop/tensor_map.h"
#include "io/safetensors.h"
#include "model/lora.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

// Keys in file order: rank_pattern and alpha_pattern are matched first key first, as PEFT does.
using Json = nlohmann::ordered_json;

constexpr const char* kAdapterConfig = "adapter_config.json";
constexpr const char* kAdapterTensors = "adapter_model.safetensors";
constexpr const char* kPeftPrefix = "base_model.model.";
constexpr const char* kMagnitudeSuffix = ".lora_magnitude_vector";
constexpr double kScaleTolerance = 1e-9;  // relative: alpha k / (k r) and alpha / r differ by rounding only

// One HF module that holds causal products: a Linear or Conv1D, or GPT-2's fused c_attn (q, k, v rows).
struct ProductModule {
  std::string name;                 // "model.layers.0.self_attn.q_proj"
  std::vector<MappedTensor> parts;  // the causal weights it holds, in row order (1, or 3 for c_attn)
  int64_t in = 0, part_rows = 0;    // A's columns; B's rows per part
};

bool ends_in(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// "blocks.3.attn.q_proj" -> 3; the head has no block (-1).
int64_t block_of(const std::string& path) {
  if (path.rfind("blocks.", 0) != 0) return -1;
  return std::stoll(path.substr(7, path.find('.', 7) - 7));
}

std::string product_path(const MappedTensor& t) { return module_of_weight(t.causal); }

class PeftReader {
 public:
  PeftReader(const fs::path& dir, const ModelConfig& base, const std::string& base_source)
      : dir_(dir),
        m_(base),
        config_file_((dir / kAdapterConfig).string()),
        tensor_file_((dir / kAdapterTensors).string()) {
    arch_ = check_exportable(base, "hf", base_source);
    for (const MappedTensor& row : tensor_map(InteropFormat::kHf, arch_, base)) {
      // Weights PEFT may save a copy of (save_embedding_layers): whole tensors whose rows stay in place.
      if (row.parts == 1 && row.rotary_heads == 0 && !row.absent) copyable_[row.file] = row;
      if (!ends_in(row.file, ".weight")) continue;
      const std::string module = module_of_weight(row.file);
      if (lora_target_of(product_path(row)).empty()) {
        others_.insert(module);
        continue;
      }
      if (products_.empty() || products_.back().name != module) {
        ProductModule p;
        p.name = module;
        std::vector<int64_t> shape = row.file_shape;  // (out, in), or (in, out) for a Conv1D
        if (row.transposed) std::swap(shape[0], shape[1]);
        p.in = shape[1];
        p.part_rows = shape[0] / row.parts;
        products_.push_back(std::move(p));
      }
      products_.back().parts.push_back(row);
    }
  }

  InteropAdapter read() {
    const Json config = read_config();
    read_settings(config);
    const std::vector<const ProductModule*> targeted = targeted_modules(config);
    std::map<std::string, std::pair<at::Tensor, at::Tensor>> tensors = read_tensors();
    for (const ProductModule* module : targeted) {
      if (!tensors.count(module->name))
        throw ConfigError(tensor_file_, std::string(kPeftPrefix) + module->name + ".lora_A.weight",
                          "missing: adapter_config.json's target_modules adapts " + module->name);
    }
    std::set<std::string> wanted;
    for (const ProductModule* module : targeted) wanted.insert(module->name);
    for (const auto& [module, _] : tensors)
      if (!wanted.count(module))
        throw ConfigError(config_file_, "target_modules",
                          module + " has adapter tensors in " + std::string(kAdapterTensors) +
                              " but is not a target (target_modules, exclude_modules)");
    return to_causal(targeted, tensors, config);
  }

 private:
  [[noreturn]] void refuse(const std::string& key, const std::string& problem) const {
    throw ConfigError(config_file_, key, problem);
  }

  Json read_config() const {
    if (!fs::is_directory(dir_))
      throw ConfigError(dir_.string(), "",
                        "no such folder: expected a PEFT adapter folder (adapter_config.json and "
                        "adapter_model.safetensors, as PeftModel.save_pretrained writes them)");
    std::ifstream in(config_file_);
    if (!in) throw ConfigError(config_file_, "", "missing: a PEFT adapter folder needs it");
    const Json parsed = Json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) throw ConfigError(config_file_, "", "not valid JSON");
    if (!parsed.is_object()) throw ConfigError(config_file_, "", "not a JSON object");
    return parsed;
  }

  // The value of `key`, or nullptr when absent or null (PEFT writes null for unset options).
  static const Json* field(const Json& config, const std::string& key) {
    const auto it = config.find(key);
    return it == config.end() || it->is_null() ? nullptr : &*it;
  }

  // Options whose only value causal can run is "off": null, false, an empty list, string or object.
  void require_off(const Json& config, const std::string& key, const std::string& why) const {
    const Json* v = field(config, key);
    if (v == nullptr || (v->is_boolean() && !v->get<bool>()) ||
        ((v->is_array() || v->is_object() || v->is_string()) && v->empty()))
      return;
    refuse(key, v->dump() + ": " + why);
  }

  void read_settings(const Json& config) {
    const Json* type = field(config, "peft_type");
    if (type == nullptr || *type != "LORA")
      refuse("peft_type", (type ? type->dump() : std::string("missing")) +
                              ": causal imports LoRA adapters only (\"LORA\")");
    const Json* task = field(config, "task_type");
    if (task == nullptr || *task != "CAUSAL_LM")
      refuse("task_type", (task ? task->dump() : std::string("missing")) +
                              ": expected \"CAUSAL_LM\" (an adapter of a causal language model)");
    const Json* r = field(config, "r");
    if (r == nullptr || !r->is_number_integer() || r->get<int64_t>() <= 0)
      refuse("r", (r ? r->dump() : std::string("missing")) + ": expected a positive integer rank");
    rank_ = r->get<int64_t>();
    const Json* alpha = field(config, "lora_alpha");
    if (alpha == nullptr || !alpha->is_number() || !std::isfinite(alpha->get<double>()) ||
        alpha->get<double>() <= 0)
      refuse("lora_alpha", (alpha ? alpha->dump() : std::string("missing")) + ": expected a positive number");
    alpha_ = alpha->get<double>();
    if (const Json* d = field(config, "lora_dropout")) {
      if (!d->is_number() || !(d->get<double>() >= 0.0 && d->get<double>() < 1.0))
        refuse("lora_dropout", d->dump() + ": expected a number in [0, 1)");
      dropout_ = d->get<double>();
    }
    if (const Json* rs = field(config, "use_rslora")) {
      if (!rs->is_boolean()) refuse("use_rslora", rs->dump() + ": expected true or false");
      rslora_ = rs->get<bool>();
    }
    if (const Json* bias = field(config, "bias"); bias != nullptr && *bias != "none")
      refuse("bias", bias->dump() +
                         ": PEFT then trains the base's biases too; causal's adapters leave the base frozen "
                         "(expected \"none\")");
    if (const Json* dora = field(config, "use_dora")) {
      if (!dora->is_boolean()) refuse("use_dora", dora->dump() + ": expected true or false");
      dora_ = dora->get<bool>();
    }
    require_off(config, "lora_bias", "a bias on B; causal's adapters have none");
    require_off(config, "modules_to_save",
                "PEFT saves whole trained copies of these modules; causal's adapter checkpoints hold LoRA "
                "adapters only (merge them in PEFT and import the merged model with --format hf)");
    require_off(config, "layers_to_transform",
                "causal's train.lora.targets adapts a kind of product on every block, not chosen layers");
    require_off(config, "layers_pattern",
                "causal's train.lora.targets adapts a kind of product on every block, not chosen layers");
    require_off(config, "target_parameters",
                "adapters on raw parameters (MoE experts) have no causal product");
    require_off(config, "trainable_token_indices", "trained embedding rows are no LoRA adapter causal holds");
    require_off(config, "layer_replication", "a base with replicated layers is not the base causal has");
    require_off(config, "use_qalora", "QALoRA pools the adapter's input; causal runs plain LoRA");
    for (const char* key : {"rank_pattern", "alpha_pattern"}) {
      const Json* p = field(config, key);
      if (p != nullptr && !p->is_object())
        refuse(key, p->dump() + ": expected an object (module pattern -> value)");
      (std::string(key) == "rank_pattern" ? rank_pattern_ : alpha_pattern_) = p ? *p : Json::object();
    }
  }

  // std::regex of a Python pattern; PEFT's simple names and dotted paths mean the same in both.
  std::regex regex_of(const std::string& key, const std::string& pattern) const {
    try {
      return std::regex(pattern);
    } catch (const std::regex_error& e) {
      refuse(key, "\"" + pattern + "\" is not a regular expression causal can read (" + e.what() + ")");
    }
  }

  // PEFT's check_target_module_exists for a list or a regular expression (fullmatch).
  bool matches(const Json& targets, const std::string& key, const std::string& module) const {
    if (targets.is_string()) return std::regex_match(module, regex_of(key, targets.get<std::string>()));
    for (const Json& t : targets) {
      const std::string name = t.get<std::string>();
      if (module == name || ends_in(module, "." + name)) return true;
    }
    return false;
  }

  // The key of `pattern` (rank_pattern, alpha_pattern) PEFT applies to `module`: the first whose
  // "(.*\.)?(key)$" matches it.
  const Json* pattern_value(const Json& pattern, const std::string& key, const std::string& module) const {
    for (const auto& [k, v] : pattern.items())
      if (std::regex_match(module, regex_of(key, "(.*\\.)?(" + k + ")"))) return &v;
    return nullptr;
  }

  std::string product_names() const {
    std::set<std::string> leaves;
    for (const ProductModule& p : products_) leaves.insert(p.name.substr(p.name.rfind('.') + 1));
    std::string out;
    for (const std::string& leaf : leaves) out += (out.empty() ? "" : ", ") + leaf;
    return out;
  }

  // Why `module` (a known module of the HF layout) is no product causal adapts, or "" when it is one.
  std::string not_a_product(const std::string& module) const {
    if (module == "lm_head" && m_.tie_embeddings)
      return "lm_head is tied to the embedding in this base (model.tie_embeddings): causal adapts an "
             "untied head only";
    if (others_.count(module))
      return module + " is an embedding or a norm, no product causal adapts (products: " + product_names() +
             ")";
    return "";
  }

  std::vector<const ProductModule*> targeted_modules(const Json& config) {
    const Json* targets = field(config, "target_modules");
    if (targets == nullptr || !(targets->is_string() || targets->is_array()))
      refuse("target_modules",
             (targets ? targets->dump() : std::string("missing")) + ": expected a list of module names");
    Json wanted = *targets;
    // "all-linear": every linear layer but the output layer (PEFT's INCLUDE_LINEAR_LAYERS_SHORTHAND).
    const bool all_linear = wanted.is_string() && [&] {
      std::string s = wanted.get<std::string>();
      for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return s == "all-linear";
    }();
    if (wanted.is_array()) {
      for (size_t i = 0; i < wanted.size(); ++i) {
        if (!wanted[i].is_string()) refuse("target_modules", wanted[i].dump() + ": expected a module name");
        const std::string name = wanted[i].get<std::string>();
        bool found = false;
        for (const ProductModule& p : products_) found = found || matches(Json::array({name}), "", p.name);
        if (found) continue;
        std::string why;
        for (const std::string& module : all_known())
          if (why.empty() && (module == name || ends_in(module, "." + name))) why = not_a_product(module);
        refuse("target_modules",
               "\"" + name + "\": " +
                   (why.empty() ? "names no product of this base (products: " + product_names() + ")" : why));
      }
    } else if (!all_linear) {
      for (const std::string& module : all_known())
        if (matches(wanted, "target_modules", module) && !not_a_product(module).empty())
          refuse("target_modules", wanted.dump() + " matches " + not_a_product(module));
    }
    const Json* exclude = field(config, "exclude_modules");
    if (exclude != nullptr && !(exclude->is_string() || exclude->is_array()))
      refuse("exclude_modules",
             exclude->dump() + ": expected a list of module names or a regular expression");
    std::vector<const ProductModule*> out;
    for (const ProductModule& p : products_) {
      const bool hit = all_linear ? p.name != "lm_head" : matches(wanted, "target_modules", p.name);
      if (hit && !(exclude != nullptr && matches(*exclude, "exclude_modules", p.name))) out.push_back(&p);
    }
    if (out.empty()) refuse("target_modules", wanted.dump() + " matches no product of this base");
    return out;
  }

  std::vector<std::string> all_known() const {
    std::vector<std::string> out(others_.begin(), others_.end());
    for (const ProductModule& p : products_) out.push_back(p.name);
    if (m_.tie_embeddings) out.push_back("lm_head");  // transformers' tied head: a module without a tensor
    return out;
  }

  // module -> (A, B) in float32, every tensor name known; DoRA's magnitudes into magnitudes_.
  std::map<std::string, std::pair<at::Tensor, at::Tensor>> read_tensors() {
    if (!fs::exists(tensor_file_)) {
      const bool pickled = fs::exists(dir_ / "adapter_model.bin");
      throw ConfigError(tensor_file_, "",
                        std::string("missing") +
                            (pickled ? " (adapter_model.bin is a pickle, which causal does not read: save "
                                       "with safe_serialization=True)"
                                     : ": a PEFT adapter folder needs it"));
    }
    std::map<std::string, const ProductModule*> by_name;
    for (const ProductModule& p : products_) by_name[p.name] = &p;
    std::map<std::string, std::pair<at::Tensor, at::Tensor>> out;
    for (auto& [name, t] : load_safetensors(tensor_file_)) {
      if (base_copy(name, t) || magnitude(name, t, by_name)) continue;
      std::string module;
      bool is_a = false;
      for (const char* suffix : {".lora_A.weight", ".lora_B.weight"}) {
        if (name.rfind(kPeftPrefix, 0) == 0 && ends_in(name, suffix)) {
          module = name.substr(std::string(kPeftPrefix).size(),
                               name.size() - std::string(kPeftPrefix).size() - std::string(suffix).size());
          is_a = std::string(suffix) == ".lora_A.weight";
        }
      }
      const auto it = by_name.find(module);
      if (it == by_name.end()) {
        const std::string why = module.empty() ? "" : not_a_product(module);
        throw ConfigError(tensor_file_, name,
                          why.empty() ? "not a tensor causal knows: expected base_model.model.<module>."
                                        "lora_A.weight / lora_B.weight of a product of this base (" +
                                            product_names() + ")"
                                      : why);
      }
      const ProductModule& p = *it->second;
      const int64_t r = module_rank(p.name);
      const std::vector<int64_t> want =
          is_a ? std::vector<int64_t>{r, p.in}
               : std::vector<int64_t>{p.part_rows * static_cast<int64_t>(p.parts.size()), r};
      if (!at::isFloatingType(t.scalar_type()) || t.sizes().vec() != want)
        throw ConfigError(tensor_file_, name,
                          "expected a float tensor of shape " + c10::str(at::IntArrayRef(want)) + " (rank " +
                              std::to_string(r) + "), got " + c10::str(t.sizes(), " ", t.scalar_type()));
      (is_a ? out[module].first : out[module].second) = t.to(at::kFloat).contiguous();
    }
    for (const auto& [module, ab] : out) {
      if (!ab.first.defined() || !ab.second.defined())
        throw ConfigError(
            tensor_file_,
            std::string(kPeftPrefix) + module + (ab.first.defined() ? ".lora_B" : ".lora_A") + ".weight",
            "missing: each adapted module needs lora_A and lora_B");
      if (dora_ && !magnitudes_.count(module))
        throw ConfigError(tensor_file_, std::string(kPeftPrefix) + module + kMagnitudeSuffix,
                          "missing: use_dora gives each adapted module its magnitude");
    }
    for (const auto& [module, _] : magnitudes_)
      if (!out.count(module))
        throw ConfigError(tensor_file_, std::string(kPeftPrefix) + module + kMagnitudeSuffix,
                          "a DoRA magnitude of a module without lora_A and lora_B");
    return out;
  }

  // "<prefix><module>.lora_magnitude_vector" (DoRA, PEFT's name without the adapter's): the magnitude of
  // one output row each, kept in magnitudes_.
  bool magnitude(const std::string& name, const at::Tensor& t,
                 const std::map<std::string, const ProductModule*>& by_name) {
    if (name.rfind(kPeftPrefix, 0) != 0 || !ends_in(name, kMagnitudeSuffix)) return false;
    const std::string module =
        name.substr(std::string(kPeftPrefix).size(),
                    name.size() - std::string(kPeftPrefix).size() - std::string(kMagnitudeSuffix).size());
    if (!dora_) refuse("use_dora", "false, and " + std::string(kAdapterTensors) + " holds " + name);
    const auto it = by_name.find(module);
    if (it == by_name.end())
      throw ConfigError(tensor_file_, name,
                        "not a DoRA magnitude of a product of this base (" + product_names() + ")");
    const ProductModule& p = *it->second;
    if (p.parts.size() > 1)
      throw ConfigError(tensor_file_, name,
                        "DoRA on " + module +
                            ", which holds several causal products (q, k and v): one magnitude over them "
                            "all, which causal's per-product adapters cannot hold");
    if (!at::isFloatingType(t.scalar_type()) || t.dim() != 1 || t.size(0) != p.part_rows)
      throw ConfigError(tensor_file_, name,
                        "expected a float tensor of shape [" + std::to_string(p.part_rows) + "], got " +
                            c10::str(t.sizes(), " ", t.scalar_type()));
    magnitudes_[module] = t.to(at::kFloat).contiguous();
    return true;
  }

  // A copy of a base weight: "<prefix><module>.base_layer.weight" (a wrapped product) or "<prefix><tensor>"
  // (an HF tensor), kept to be compared with the base (import_adapter_run).
  bool base_copy(const std::string& name, const at::Tensor& t) {
    if (name.rfind(kPeftPrefix, 0) != 0) return false;
    std::string file = name.substr(std::string(kPeftPrefix).size());
    const std::string wrapped = ".base_layer.weight";
    if (ends_in(file, wrapped)) file = file.substr(0, file.size() - wrapped.size()) + ".weight";
    const auto it = copyable_.find(file);
    if (it == copyable_.end()) return false;
    const MappedTensor& row = it->second;
    std::vector<int64_t> shape = row.file_shape;
    if (t.sizes().vec() != shape)
      throw ConfigError(tensor_file_, name,
                        "a copy of the base's " + row.causal + " of shape " + c10::str(t.sizes()) +
                            ", the base's is " + c10::str(at::IntArrayRef(shape)) +
                            " (a resized layer, which a LoRA import cannot hold)");
    copies_[row.causal] = {name, row.transposed ? t.t().contiguous() : t};
    return true;
  }

  int64_t module_rank(const std::string& module) const {
    const Json* v = pattern_value(rank_pattern_, "rank_pattern", module);
    if (v == nullptr) return rank_;
    if (!v->is_number_integer() || v->get<int64_t>() <= 0)
      refuse("rank_pattern", module + ": " + v->dump() + ": expected a positive integer rank");
    return v->get<int64_t>();
  }

  double module_alpha(const std::string& module) const {
    const Json* v = pattern_value(alpha_pattern_, "alpha_pattern", module);
    if (v == nullptr) return alpha_;
    if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() <= 0)
      refuse("alpha_pattern", module + ": " + v->dump() + ": expected a positive number");
    return v->get<double>();
  }

  double scale(double alpha, int64_t rank) const {
    return rslora_ ? alpha / std::sqrt(static_cast<double>(rank)) : alpha / static_cast<double>(rank);
  }

  struct Product {
    at::Tensor a, b;       // (rank, in), (out, rank) in the file's row order
    at::Tensor magnitude;  // (out) in the file's row order, DoRA only
    int64_t rank;
    double scale;
    std::string module;  // the HF module it came from, for errors
  };

  // B's rows of part `p` of a fused module.
  static at::Tensor part_rows(const ProductModule& m, const at::Tensor& b, size_t p) {
    return b.narrow(0, static_cast<int64_t>(p) * m.part_rows, m.part_rows);
  }

  // A block-diagonal fused B of k blocks of rank r, block j on part parts[j] (causal's own export): the
  // other parts' rows and every off-block entry zero.
  bool fits_blocks(const ProductModule& m, const at::Tensor& b, const std::vector<size_t>& parts) const {
    for (size_t p = 0; p < m.parts.size(); ++p) {
      const at::Tensor rows = part_rows(m, b, p);
      const auto j = std::find(parts.begin(), parts.end(), p);
      if (j == parts.end()) {
        if (rows.count_nonzero().item<int64_t>() != 0) return false;
        continue;
      }
      const int64_t block = j - parts.begin();
      at::Tensor outside = rows.clone();
      outside.narrow(1, block * rank_, rank_).zero_();
      if (outside.count_nonzero().item<int64_t>() != 0) return false;
    }
    return true;
  }

  // Fused modules (c_attn) -> their parts' products. Block-diagonal of rank k r: one block per adapted part,
  // exact; otherwise dense: every part's rows of B with the module's A, dropping a part whose rows are zero
  // in every layer (causal's export of q alone writes k's and v's rows as zeros) unless all are.
  void split_fused(const std::vector<const ProductModule*>& fused,
                   const std::map<std::string, std::pair<at::Tensor, at::Tensor>>& tensors,
                   std::map<std::string, Product>& out) const {
    if (fused.empty()) return;
    const int64_t r0 = module_rank(fused.front()->name);
    bool same_rank = true;
    for (const ProductModule* m : fused) same_rank = same_rank && module_rank(m->name) == r0;
    const size_t n = fused.front()->parts.size();
    if (same_rank && r0 % rank_ == 0 && r0 / rank_ >= 2 && r0 / rank_ <= static_cast<int64_t>(n)) {
      const size_t k = static_cast<size_t>(r0 / rank_);
      // Subsets of k parts in order; the first that fits every layer (they agree where B is non-zero).
      for (unsigned mask = 0; mask < (1u << n); ++mask) {
        std::vector<size_t> parts;
        for (size_t p = 0; p < n; ++p)
          if (mask & (1u << p)) parts.push_back(p);
        if (parts.size() != k) continue;
        bool fits = true;
        for (const ProductModule* m : fused)
          fits = fits && fits_blocks(*m, tensors.at(m->name).second, parts);
        if (!fits) continue;
        for (const ProductModule* m : fused) {
          const auto& [a, b] = tensors.at(m->name);
          const double s = scale(module_alpha(m->name), r0);
          for (size_t j = 0; j < k; ++j) {
            const int64_t block = static_cast<int64_t>(j);
            out[product_path(m->parts[parts[j]])] = {
                a.narrow(0, block * rank_, rank_).contiguous(),
                part_rows(*m, b, parts[j]).narrow(1, block * rank_, rank_).contiguous(),
                at::Tensor(),
                rank_,
                s,
                m->name};
          }
        }
        return;
      }
    }
    std::vector<bool> used(n, false);
    for (const ProductModule* m : fused)
      for (size_t p = 0; p < n; ++p)
        used[p] =
            used[p] || part_rows(*m, tensors.at(m->name).second, p).count_nonzero().item<int64_t>() != 0;
    if (std::none_of(used.begin(), used.end(), [](bool u) { return u; })) used.assign(n, true);
    for (const ProductModule* m : fused) {
      const auto& [a, b] = tensors.at(m->name);
      const int64_t r = module_rank(m->name);
      for (size_t p = 0; p < n; ++p)
        if (used[p])
          out[product_path(m->parts[p])] = {a.clone(), part_rows(*m, b, p).contiguous(), at::Tensor(),
                                            r,         scale(module_alpha(m->name), r),  m->name};
    }
  }

  InteropAdapter to_causal(const std::vector<const ProductModule*>& targeted,
                           const std::map<std::string, std::pair<at::Tensor, at::Tensor>>& tensors,
                           const Json& config) const {
    std::map<std::string, Product> products;
    std::vector<const ProductModule*> fused;
    for (const ProductModule* m : targeted) {
      if (m->parts.size() > 1) {
        fused.push_back(m);
        continue;
      }
      const int64_t r = module_rank(m->name);
      const auto& [a, b] = tensors.at(m->name);
      const auto magnitude = magnitudes_.find(m->name);
      products[product_path(m->parts[0])] = {
          a,
          b,
          magnitude == magnitudes_.end() ? at::Tensor() : magnitude->second,
          r,
          scale(module_alpha(m->name), r),
          m->name};
    }
    split_fused(fused, tensors, products);

    // One rank and one scale for all (train.lora has one of each).
    const Product& first = products.begin()->second;
    for (const auto& [path, p] : products) {
      if (p.rank != first.rank)
        refuse("rank_pattern", p.module + " has rank " + std::to_string(p.rank) + " and " + first.module +
                                   " " + std::to_string(first.rank) +
                                   ": causal's train.lora has one rank for every adapted product");
      if (std::abs(p.scale - first.scale) > kScaleTolerance * std::abs(first.scale))
        refuse(alpha_pattern_.empty() ? "rank_pattern" : "alpha_pattern",
               p.module + " has scale " + c10::str(p.scale) + " and " + first.module + " " +
                   c10::str(first.scale) +
                   ": causal's train.lora has one scale (alpha / r) for every adapted product");
    }

    // Whole kinds: train.lora.targets adapts a kind on every block.
    std::map<std::string, std::set<int64_t>> blocks;
    for (const auto& [path, _] : products) blocks[lora_target_of(path)].insert(block_of(path));
    for (const auto& [kind, have] : blocks) {
      if (kind == "head" || static_cast<int64_t>(have.size()) == m_.n_layers) continue;
      std::string list;
      for (int64_t b : have) list += (list.empty() ? "" : ", ") + std::to_string(b);
      refuse(
          "target_modules",
          "adapts \"" + kind + "\" on blocks " + list + " of 0.." + std::to_string(m_.n_layers - 1) +
              " only: a partial set, which causal cannot hold (train.lora.targets adapts a kind of product "
              "on every block)");
    }

    InteropAdapter adapter;
    LoraConfig& lora = adapter.lora;
    lora.rank = first.rank;
    // The file's alpha when its rank is causal's (exact), else the alpha that gives the same scale.
    lora.alpha = first.rank == rank_ && std::abs(scale(alpha_, rank_) - first.scale) <=
                                            kScaleTolerance * std::abs(first.scale)
                     ? alpha_
                     : first.scale * (rslora_ ? std::sqrt(static_cast<double>(first.rank))
                                              : static_cast<double>(first.rank));
    lora.dropout = dropout_;
    lora.rslora = rslora_;
    lora.dora = dora_;
    lora.targets.clear();
    for (const std::string& kind : lora_target_names())
      if (blocks.count(kind)) lora.targets.push_back(kind);
    const RopePairing file_pairing = file_rope_pairing(InteropFormat::kHf);
    std::map<std::string, const MappedTensor*> rows;
    for (const ProductModule* m : targeted)
      for (const MappedTensor& row : m->parts) rows[product_path(row)] = &row;
    for (auto& [path, p] : products) {
      const MappedTensor& row = *rows.at(path);
      at::Tensor b = p.b, magnitude = p.magnitude;
      const RopePairing pairing = row.file_pairing.value_or(file_pairing);
      // B's rows (and the magnitudes) move back as import moves the base's q/k rows back (the inverse of
      // write_peft_adapter's).
      if (row.rotary_heads > 0 && m_.rope.pairing != pairing) {
        const auto move = [&](const at::Tensor& t) {
          return pairing == RopePairing::kInterleaved ? interleaved_to_halves(t, row.rotary_heads)
                                                      : halves_to_interleaved(t, row.rotary_heads);
        };
        b = move(b);
        if (magnitude.defined()) magnitude = move(magnitude.unsqueeze(1)).squeeze(1);
      }
      adapter.adapters[path] = {p.a.contiguous(), b.contiguous(),
                                magnitude.defined() ? magnitude.contiguous() : at::Tensor()};
    }
    adapter.base_copies = copies_;
    if (const Json* name = field(config, "base_model_name_or_path"); name != nullptr && name->is_string())
      adapter.base_model_name = name->get<std::string>();
    return adapter;
  }

  fs::path dir_;
  ModelConfig m_;
  std::string config_file_, tensor_file_;
  TargetArchitecture arch_;
  std::vector<ProductModule> products_;  // HF file order
  std::set<std::string> others_;         // modules with weights that are no products (embeddings, norms)
  std::map<std::string, MappedTensor> copyable_;  // HF tensor name -> its row, for base_copy
  std::map<std::string, std::pair<std::string, at::Tensor>> copies_;
  int64_t rank_ = 0;
  double alpha_ = 0.0, dropout_ = 0.0;
  bool rslora_ = false, dora_ = false;
  std::map<std::string, at::Tensor> magnitudes_;  // HF module -> DoRA magnitude (out)
  Json rank_pattern_, alpha_pattern_;
};

}  // namespace

InteropAdapter read_peft_adapter(const fs::path& dir, const ModelConfig& base,
                                 const std::string& base_source) {
  return PeftReader(dir, base, base_source).read();
}

std::string import_peft(const std::string& input, const ImportRequest& request) {
  const CheckpointInfo base = adapter_base_checkpoint(request.base);
  const std::string source = (base.dir / "config.json").string();
  const RunConfig config = parse_config_text(base.config.dump(), source, {}, ConfigScope::kModel);
  return import_adapter_run(base, read_peft_adapter(input, config.model, source), input, request);
}

}  // namespace causal
