// Decoder-only transformer (see transformer.h).
#include "model/transformer.h"

#include <torch/torch.h>

#include <set>

#include "model/autocast_scope.h"
#include "model/gpu_products.h"
#include "model/mask.h"
#include "model/rope.h"
#include "model/weight_init.h"

namespace causal {
namespace {

void check_config(const ModelConfig& c) {
  TORCH_CHECK(!c.inputs.empty(), "[transformer] expected at least one input field");
  std::set<std::string> names;
  for (const InputField& field : c.inputs) {
    TORCH_CHECK(!field.name.empty() && field.name.find('.') == std::string::npos,
                "[transformer] input field name '", field.name, "' must be non-empty without '.'");
    TORCH_CHECK(names.insert(field.name).second, "[transformer] duplicate input field name '", field.name,
                "'");
    TORCH_CHECK(field.vocab > 0, "[transformer] input '", field.name, "' expected vocab > 0, got ",
                field.vocab);
  }
  TORCH_CHECK(c.output_vocab > 0, "[transformer] expected output_vocab > 0, got ", c.output_vocab);
  TORCH_CHECK(c.n_layers > 0, "[transformer] expected n_layers > 0, got ", c.n_layers);
  TORCH_CHECK(c.max_seq_len > 0, "[transformer] expected max_seq_len > 0, got ", c.max_seq_len);
  TORCH_CHECK(c.n_heads > 0 && c.d_model % c.n_heads == 0,
              "[transformer] expected d_model divisible by n_heads, got ", c.d_model, " and ", c.n_heads);
  TORCH_CHECK(c.position != PositionKind::kRope || c.head_dim() % 2 == 0,
              "[transformer] rope needs an even head dim, got d_model/n_heads=", c.head_dim());
  if (c.tie_embeddings) {
    TORCH_CHECK(c.inputs.size() == 1 && c.inputs[0].vocab == c.output_vocab,
                "[transformer] tie_embeddings needs one input field whose vocab equals output_vocab=",
                c.output_vocab, ", got ", c.inputs.size(), " field(s), first vocab ", c.inputs[0].vocab);
  }
}

}  // namespace

TransformerImpl::TransformerImpl(const ModelConfig& config) : config_(config) {
  check_config(config_);
  const int64_t d = config_.d_model;
  torch::NoGradGuard no_grad;

  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> tables;
  for (const InputField& field : config_.inputs) {
    torch::nn::Embedding table(field.vocab, d);
    if (draws_initial_weights()) torch::nn::init::normal_(table->weight, 0.0, config_.init_std);
    tables.emplace_back(field.name, table.ptr());
    fields_.push_back(table);
  }
  embed_ = register_module("embed", torch::nn::ModuleDict(tables));
  if (config_.position == PositionKind::kLearned) {
    pos_embed_ = register_module("pos_embed", torch::nn::Embedding(config_.max_seq_len, d));
    if (draws_initial_weights()) torch::nn::init::normal_(pos_embed_->weight, 0.0, config_.init_std);
  }
  blocks_list_ = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < config_.n_layers; ++i) {
    blocks_.emplace_back(config_);
    blocks_list_->push_back(blocks_.back());
  }
  final_norm_ = register_module(
      "final_norm", Norm(NormOptions(d).kind(config_.norm).eps(config_.norm_eps).bias(config_.bias)));
  if (!config_.tie_embeddings) {
    head_ = register_module("head", Linear(LinearOptions(d, config_.output_vocab).bias(config_.bias)));
    if (draws_initial_weights()) torch::nn::init::normal_(head_->weight, 0.0, config_.init_std);
    if (head_->bias.defined()) torch::nn::init::zeros_(head_->bias);
  }
}

torch::Tensor TransformerImpl::checked_tokens(const ModelInputs& inputs, const KVCache* cache) const {
  const int64_t n_fields = static_cast<int64_t>(config_.inputs.size());
  torch::Tensor tokens = inputs.tokens;
  TORCH_CHECK(tokens.defined(), "[transformer] inputs.tokens is required");
  if (tokens.dim() == 2 && n_fields == 1) tokens = tokens.unsqueeze(-1);  // (B,T,1)
  TORCH_CHECK(tokens.dim() == 3 && tokens.size(2) == n_fields,
              "[transformer] expected tokens (B,T,F) with F=", n_fields, ", got ", tokens.sizes());
  TORCH_CHECK(tokens.scalar_type() == torch::kLong, "[transformer] expected tokens int64, got ",
              tokens.scalar_type());
  const int64_t batch = tokens.size(0);
  const int64_t time = tokens.size(1);
  const auto check_rows = [&](const torch::Tensor& t, const char* name, c10::ScalarType dtype) {
    if (!t.defined()) return;
    TORCH_CHECK(t.dim() == 2 && t.size(0) == batch && t.size(1) == time, "[transformer] expected ", name,
                " (B,T)=(", batch, ",", time, "), got ", t.sizes());
    TORCH_CHECK(t.scalar_type() == dtype, "[transformer] expected ", name, " ", dtype, ", got ",
                t.scalar_type());
  };
  check_rows(inputs.positions, "positions", torch::kLong);
  check_rows(inputs.segment_ids, "segment_ids", torch::kLong);
  check_rows(inputs.key_valid, "key_valid", torch::kBool);

  const int64_t cache_len = cache != nullptr ? cache->length() : 0;
  if (cache != nullptr) {
    TORCH_CHECK(cache->n_layers() == config_.n_layers && cache->batch_size() == batch,
                "[transformer] cache holds ", cache->n_layers(), " layers x batch ", cache->batch_size(),
                ", model has ", config_.n_layers, " layers and the input batch is ", batch);
  }
  TORCH_CHECK(cache_len + time <= config_.max_seq_len, "[transformer] ", cache_len, " cached + ", time,
              " new positions exceed max_seq_len ", config_.max_seq_len);
  return tokens;
}

AttentionMask TransformerImpl::attention_mask(MaskParts parts, bool cached) {
  const bool by_shape = !parts.key_valid.defined() && !parts.query_segment.defined() && !cached;
  const int64_t time = parts.query_index.size(-1);
  const c10::Device device = parts.query_index.device();
  ShapeMask& memo = shape_mask_;
  if (by_shape && memo.time == time && memo.device == device) return memo.mask;
  AttentionMask mask(std::move(parts));
  if (by_shape) memo = {time, device, mask};
  return mask;
}

torch::Tensor TransformerImpl::final_hidden(const ModelInputs& inputs, KVCache* cache) {
  const torch::Tensor tokens = checked_tokens(inputs, cache);  // (B,T,F)
  const int64_t batch = tokens.size(0);
  const int64_t time = tokens.size(1);
  const int64_t cache_len = cache != nullptr ? cache->length() : 0;

  // Only the forward runs under autocast: backward follows the casts autograd recorded.
  const AutocastScope autocast_scope(fields_[0]->weight.device().type(), autocast_dtype(config_.autocast));

  const auto index_options = torch::TensorOptions().dtype(torch::kLong).device(tokens.device());
  // Causal order: the token's place in the cached sequence, never its RoPE position.
  const torch::Tensor query_index = torch::arange(cache_len, cache_len + time, index_options);  // (T)
  const torch::Tensor key_index = torch::arange(0, cache_len + time, index_options);            // (Tk)
  const torch::Tensor positions = inputs.positions.defined()
                                      ? inputs.positions
                                      : query_index.unsqueeze(0).expand({batch, time});  // (B,T)

  torch::Tensor x = fields_[0](tokens.select(2, 0));  // (B,T,D)
  for (size_t f = 1; f < fields_.size(); ++f) x = x + fields_[f](tokens.select(2, static_cast<int64_t>(f)));
  if (config_.position == PositionKind::kLearned) x = x + pos_embed_(positions);
  x = hooks_.at(HookPoint::kEmbed, -1, x);

  torch::Tensor key_valid = inputs.key_valid;      // (B,Tk) or undefined
  torch::Tensor key_segment = inputs.segment_ids;  // (B,Tk) or undefined
  if (cache != nullptr) std::tie(key_valid, key_segment) = cache->extend_keys(key_valid, key_segment, time);

  // Batches carry key validity even without padding. All true, it masks nothing; on the CPU, where looking
  // costs no device sync, such a batch is masked as unpadded: no row repair, and a mask kept per shape.
  torch::Tensor mask_valid = key_valid;
  if (mask_valid.defined() && mask_valid.device().is_cpu() && mask_valid.all().item<bool>())
    mask_valid = torch::Tensor();

  AttentionContext context;
  context.mask = attention_mask(MaskParts{query_index, key_index, mask_valid, inputs.segment_ids, key_segment,
                                          config_.attention_window},
                                cache != nullptr);
  if (config_.position == PositionKind::kRope) {
    if (!rope_inv_freq_.defined() || rope_inv_freq_.device() != positions.device())
      rope_inv_freq_ = rope_inv_freq(config_.head_dim(), config_.rope).to(positions.device());
    context.rope = rope_tables(positions, config_.head_dim(), config_.rope, x.scalar_type(), rope_inv_freq_);
    context.pairing = config_.rope.pairing;
  }
  context.cache = cache;
  context.hooks = &hooks_;

  BlockStream stream{x, torch::Tensor()};
  for (int64_t i = 0; i < config_.n_layers; ++i) {
    context.layer = i;
    stream = blocks_[i](stream, context);
  }
  if (cache != nullptr) cache->commit(time, key_valid, key_segment);

  // In float32, whatever autocast does: what observes the final hidden state and the head read it so.
  const ResidualNormed last = final_norm_->add_then_forward(
      stream.residual, stream.pending, config_.kernels == ModelKernels::kAuto, c10::nullopt);
  return hooks_.at(HookPoint::kFinalNorm, -1, last.normed);  // (B,T,D)
}

torch::Tensor TransformerImpl::head_weight() const {
  return config_.tie_embeddings ? fields_[0]->weight : head_->dense_weight();
}

bool TransformerImpl::head_held() const { return !config_.tie_embeddings && head_->held(); }

torch::Tensor TransformerImpl::head_bias() const {
  return config_.tie_embeddings ? torch::Tensor() : head_->bias;
}

LinearAdapterImpl* TransformerImpl::head_adapter() const {
  return config_.tie_embeddings ? nullptr : head_->adapter();
}

c10::optional<c10::ScalarType> TransformerImpl::head_shadow_dtype() const {
  if (head_held()) return c10::nullopt;  // products read the held storage
  return shadow_dtype(config_.weight_shadows, autocast_dtype(config_.autocast), head_weight());
}

torch::Tensor TransformerImpl::head_shadow() {
  const c10::optional<c10::ScalarType> dtype = head_shadow_dtype();
  if (!dtype) return torch::Tensor();
  const torch::Tensor weight = head_weight();
  return head_shadow_.copy({weight}, *dtype, head_rows(weight));
}

void TransformerImpl::refresh_weight_shadows() {
  const c10::optional<c10::ScalarType> products = autocast_dtype(config_.autocast);
  for (const Block& block : blocks_) {
    block->attn()->refresh_shadows(products);
    block->ffn()->refresh_shadows(products);
  }
  head_shadow();
}

torch::Tensor TransformerImpl::logits(const torch::Tensor& hidden) {
  const c10::ScalarType parameter_dtype = fields_[0]->weight.scalar_type();
  const AutocastScope autocast_scope(fields_[0]->weight.device().type(), autocast_dtype(config_.autocast));
  torch::Tensor logits;  // (B,T,V)
  if (head_held()) {
    logits = head_->product(hidden);  // tile by tile from the held storage
  } else {
    const torch::Tensor weight = head_weight();
    const c10::optional<c10::ScalarType> shadow = head_shadow_dtype();
    logits =
        head_product(hidden, weight, head_bias(),
                     shadow ? head_shadow_.weight({weight}, *shadow, head_rows(weight)) : torch::Tensor());
  }
  if (head_adapter() != nullptr) logits = head_->adapted(hidden, logits);
  // Losses, sampling and diagnostics read logits in the parameters' precision, whatever the head ran in,
  // and contiguous (a GPU's padded head leaves a view).
  if (logits.scalar_type() != parameter_dtype) logits = logits.to(parameter_dtype);
  return hooks_.at(HookPoint::kLogits, -1, logits.contiguous());
}

ModelOutput TransformerImpl::forward(const ModelInputs& inputs, KVCache* cache) {
  return ModelOutput{logits(final_hidden(inputs, cache))};
}

}  // namespace causal
