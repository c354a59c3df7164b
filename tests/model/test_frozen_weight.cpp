// A LoRA base held in bfloat16 or ggml's blocks (train.lora.base_dtype, model/frozen_weight.h) against an
// independent reference: the plain float32 product over the weight as io/gguf_quants dequantizes its blocks
// (or as bfloat16 rounds it). A held product computes what that product computes, forward and input
// gradient, a tile of rows at a time; a held model computes what the plain model over those values does
// (logits, both loss kernels, the KV cache, adapter gradients), and the cost model counts its bytes.
#include <torch/torch.h>
// Torch first: its glog macros must not replace Catch's.
#include <catch2/catch.hpp>
#include <map>
#include <optional>

#include "checkpoint/checkpoint.h"
#include "config/config_io.h"
#include "config/cost_model.h"
#include "model/autocast_scope.h"
#include "model/frozen_weight.h"
#include "model/kv_cache.h"
#include "model/lora.h"
#include "model/transformer.h"
#include "model/weight_init.h"
#include "support/held_weights.h"
#include "support/scratch_dir.h"
#include "support/small_model.h"
#include "support/training_steps.h"
#include "task/objective.h"

using namespace causal;

namespace {

const std::vector<BaseDtype> kHeld = {BaseDtype::kBf16, BaseDtype::kQ8_0, BaseDtype::kQ4_0, BaseDtype::kQ4_1,
                                      BaseDtype::kQ4_K};

double held_error(const torch::Tensor& got, const torch::Tensor& want) {
  return (got.to(torch::kFloat) - want.to(torch::kFloat)).abs().max().item<double>() /
         want.to(torch::kFloat).abs().max().item<double>();
}

// d_model and FFN 256, so that every format (q4_k's 256-element blocks included) holds every row; each FFN
// kind, tied and untied heads, biases on and off.
std::vector<ModelConfig> held_models() {
  std::vector<ModelConfig> models;
  for (const FfnKind ffn : {FfnKind::kGelu, FfnKind::kSwiglu, FfnKind::kRelu}) {
    ModelConfig c = testing::small_text_model(AttentionKind::kSdpa, 8);
    c.d_model = 256;
    c.ffn_hidden = 256;
    c.n_layers = 1;
    c.init_std = 0.05;
    c.ffn = ffn;
    c.tie_embeddings = ffn == FfnKind::kGelu;
    c.bias = ffn != FfnKind::kSwiglu;
    models.push_back(c);
  }
  return models;
}

LoraConfig held_targets(const ModelConfig& c, BaseDtype dtype) {
  LoraConfig lora;
  lora.rank = 4;
  lora.alpha = 6.0;
  lora.targets = {"q", "k", "v", "o", "up", "down"};
  if (c.ffn == FfnKind::kSwiglu) lora.targets.push_back("gate");
  if (!c.tie_embeddings && c.ffn == FfnKind::kSwiglu) lora.targets.push_back("head");
  lora.base_dtype = dtype;
  return lora;
}

// A model with adapters whose b is nonzero (it starts at zero, which would hide a wrong base under it).
Transformer held_adapted_model(const ModelConfig& c, const LoraConfig& lora) {
  torch::manual_seed(1);
  Transformer model(c);
  attach_lora(*model, lora);
  torch::NoGradGuard no_grad;
  torch::manual_seed(3);
  for (auto& item : model->named_parameters())
    if (is_adapter_parameter(item.key())) item.value().normal_(0.0, 0.1);
  return model;
}

Batch held_batch() {
  torch::manual_seed(8);
  return testing::random_micro_batches(1, 3, c10::Device(c10::kCPU)).front();
}

}  // namespace

// The invariant: a held product is x W^T over the held values, forward and dx = dy W, whatever the
// tiling (300 rows: a whole tile of 256 and a part); the held values are the reference's to the bit, and
// differ from the float32 weight (the comparison is not vacuous).
CATCH_TEST_CASE("frozen weight: a held product equals float32's over the dequantized weight, forward and dx",
                "[unit][lora]") {
  torch::manual_seed(2);
  const torch::Tensor w = torch::randn({300, 256}) * 0.05;  // (out, in)
  for (const BaseDtype dtype : kHeld) {
    CATCH_INFO(to_string(dtype));
    const torch::Tensor storage = frozen_storage(w, dtype);
    CATCH_CHECK(static_cast<double>(storage.nbytes()) == 300 * 256 * base_dtype_bytes(dtype));
    const torch::Tensor dense = frozen_dense(storage, dtype, 256);
    CATCH_CHECK(torch::equal(dense, testing::held_values(w, dtype)));
    CATCH_CHECK(!torch::equal(dense, w));
    CATCH_CHECK(torch::equal(frozen_rows(storage, dtype, 256, 250, 40), dense.narrow(0, 250, 40)));

    const torch::Tensor x = (torch::randn({3, 7, 256})).requires_grad_();
    const torch::Tensor x_ref = x.detach().clone().requires_grad_();
    const torch::Tensor y = frozen_product(x, storage, dtype, 256);  // (3,7,300)
    const torch::Tensor y_ref = torch::linear(x_ref, dense);
    CATCH_REQUIRE(y.sizes() == y_ref.sizes());
    // Float32 rounding of sums of 256 products (tiles change the order of nothing in forward).
    CATCH_CHECK(held_error(y, y_ref) < 1e-6);
    const torch::Tensor dy = torch::randn_like(y);
    y.backward(dy);
    y_ref.backward(dy);
    // dx sums over 300 rows in two tiles: float32 rounding of a reordered sum.
    CATCH_CHECK(held_error(x.grad(), x_ref.grad()) < 1e-6);
    CATCH_CHECK(!storage.requires_grad());
  }
  CATCH_CHECK_THROWS_WITH(frozen_storage(torch::randn({4, 48}), BaseDtype::kQ4_K),
                          Catch::Contains("whole 256-element blocks"));
}

// The invariant: under bf16 autocast a held Linear runs its products in bfloat16 on the held values, as
// autocast runs a float32 Linear holding those values: the same dtype out, the same numbers to bfloat16's
// rounding, and the input's gradient in its own dtype.
CATCH_TEST_CASE("frozen weight: a held Linear under bf16 autocast computes what autocast's Linear does",
                "[unit][lora]") {
  for (const BaseDtype dtype : kHeld) {
    CATCH_INFO(to_string(dtype));
    torch::manual_seed(4);
    Linear held(LinearOptions(256, 300));
    Linear plain(LinearOptions(256, 300));
    {
      torch::NoGradGuard no_grad;
      held->weight.normal_(0.0, 0.05);
      held->bias.normal_(0.0, 0.1);
      plain->weight.copy_(testing::held_values(held->weight, dtype));
      plain->bias.copy_(held->bias);
    }
    for (Linear* l : {&held, &plain})
      for (auto& p : (*l)->parameters()) p.requires_grad_(false);
    held->hold_weight(dtype);
    const torch::Tensor x = torch::randn({2, 5, 256}).requires_grad_();
    const torch::Tensor x_ref = x.detach().clone().requires_grad_();
    torch::Tensor y, y_ref;
    {
      const AutocastScope autocast(c10::kCPU, torch::kBFloat16);
      y = held(x);
      y_ref = plain(x_ref);
    }
    CATCH_CHECK(y.scalar_type() == y_ref.scalar_type());
    CATCH_CHECK(held_error(y, y_ref) < 1e-2);
    const torch::Tensor dy = torch::randn_like(y);
    y.backward(dy);
    y_ref.backward(dy);
    CATCH_CHECK(x.grad().scalar_type() == torch::kFloat);
    CATCH_CHECK(held_error(x.grad(), x_ref.grad()) < 2e-2);
  }
}

// The invariant: holding swaps the registered parameter's tensor in place (what .to(), bundles and
// named_parameters see), only for a frozen weight and once, and a path that wants a whole float32 product
// weight is refused by name rather than fed bytes.
CATCH_TEST_CASE("frozen weight: hold_weight stores the parameter in place, once, frozen only",
                "[unit][lora]") {
  Linear layer(LinearOptions(64, 8).bias(false));
  CATCH_CHECK_THROWS_WITH(layer->hold_weight(BaseDtype::kQ8_0), Catch::Contains("only a frozen weight"));
  layer->weight.requires_grad_(false);
  const torch::Tensor before = layer->weight.detach().clone();
  layer->hold_weight(BaseDtype::kQ4_1);
  const torch::Tensor registered = layer->named_parameters()["weight"];
  CATCH_CHECK(registered.scalar_type() == torch::kByte);
  CATCH_CHECK(registered.sizes() == torch::IntArrayRef({8, 2 * 20}));
  CATCH_CHECK(registered.is_same(layer->weight));
  CATCH_CHECK(torch::equal(layer->dense_weight(), testing::held_values(before, BaseDtype::kQ4_1)));
  CATCH_CHECK_THROWS_WITH(layer->hold_weight(BaseDtype::kBf16), Catch::Contains("held in q4_1 already"));
  CATCH_CHECK_THROWS_WITH(layer->product_weight(c10::kCPU), Catch::Contains("has no whole product weight"));
}

// The invariant: a base held a weight at a time as it loads (hold_each_loaded, into a model built under
// SkipWeightInit, as an adapter run builds it) holds the bits that loading it whole and then holding it
// does, every product held and nothing else; the guard ends with its scope.
CATCH_TEST_CASE("frozen weight: a base held as it loads holds what the loaded base held after does",
                "[unit][lora]") {
  testing::ScratchDir dir("held_as_loaded");
  for (const ModelConfig& c : held_models()) {
    torch::manual_seed(5);
    Transformer base(c);
    NamedTensors stored;
    for (const auto& item : base->named_parameters()) stored.emplace_back(item.key(), item.value());
    save_safetensors((dir.path / "model.safetensors").string(), stored);
    for (const BaseDtype dtype : kHeld) {
      CATCH_INFO(to_string(c.ffn) << " " << to_string(dtype));
      const LoraConfig lora = held_targets(c, dtype);
      Transformer after(c);
      attach_lora(*after, lora);
      load_frozen_weights(dir.path, *after);
      hold_base_weights(*after, dtype);

      std::optional<Transformer> streamed;
      {
        const SkipWeightInit unchanged(false);
        CATCH_CHECK(draws_initial_weights());
      }
      {
        const SkipWeightInit loaded_next;
        CATCH_CHECK(!draws_initial_weights());
        {
          const SkipWeightInit nested(false);  // an inner scope that does not skip keeps the outer's skip
          CATCH_CHECK(!draws_initial_weights());
        }
        streamed.emplace(c);
      }
      CATCH_CHECK(draws_initial_weights());
      attach_lora(**streamed, lora);
      load_frozen_weights(dir.path, **streamed, hold_each_loaded(**streamed, dtype));

      auto want = after->named_parameters();
      int held = 0;
      for (const auto& item : (*streamed)->named_parameters()) {
        if (is_adapter_parameter(item.key())) continue;
        CATCH_INFO(item.key());
        CATCH_CHECK(item.value().scalar_type() == want[item.key()].scalar_type());
        CATCH_CHECK(torch::equal(item.value(), want[item.key()]));
        held += item.value().scalar_type() != torch::kFloat;
      }
      int products = 0;
      for (const auto& item : (*streamed)->named_modules("", false))
        if (auto* product = dynamic_cast<LinearImpl*>(item.value().get())) products += product->held();
      CATCH_CHECK(held == products);
      CATCH_CHECK(held >= 5);
    }
  }
}

// The invariant: a model whose base is held computes what the plain float32 model over the held values
// (the same adapters on it) computes: logits, the logits and chunked losses, their adapter gradients, and
// incremental decoding with a KV cache; the held parameters take the bytes the cost model plans for them.
CATCH_TEST_CASE("frozen weight: a held base computes what float32 over the dequantized base does",
                "[unit][lora]") {
  for (const ModelConfig& c : held_models()) {
    for (const BaseDtype dtype : kHeld) {
      CATCH_INFO(to_string(c.ffn) << (c.tie_embeddings ? " tied " : " untied ") << to_string(dtype));
      const LoraConfig lora = held_targets(c, dtype);
      Transformer held = held_adapted_model(c, lora);
      Transformer plain = held_adapted_model(c, lora);
      hold_base_weights(*held, dtype);
      {
        torch::NoGradGuard no_grad;
        auto target = plain->named_parameters();
        for (const auto& [name, value] : dense_parameters(*held)) target[name].copy_(value);
      }
      const std::map<std::string, torch::Tensor> folded = folded_parameters(*held),
                                                 want = folded_parameters(*plain);
      CATCH_REQUIRE(folded.size() == want.size());
      for (const auto& [name, value] : want) CATCH_CHECK(torch::equal(folded.at(name), value));

      // The bytes held: every product weight but a tied head's in the format, the rest float32.
      RunConfig run;
      run.model = c;
      resolve(run);
      int64_t bytes = 0;
      for (const auto& item : held->named_parameters()) bytes += static_cast<int64_t>(item.value().nbytes());
      CATCH_CHECK(model_cost(run.model, 8, 1, 4, lora).memory.parameters == bytes);

      const Batch batch = held_batch();
      held->eval();
      plain->eval();
      {
        torch::NoGradGuard no_grad;
        const torch::Tensor got = held->forward(model_inputs(batch)).logits;
        const torch::Tensor ref = plain->forward(model_inputs(batch)).logits;
        CATCH_CHECK(held_error(got, ref) < 1e-5);
        // Decoding: the first 10 positions, then the rest one at a time against the cache.
        const torch::Tensor tokens = batch.tokens;  // (B,T)
        KVCache cache(c.n_layers, tokens.size(0));
        ModelInputs first;
        first.tokens = tokens.narrow(1, 0, 10);
        held->forward(first, &cache);
        for (int64_t t = 10; t < tokens.size(1); ++t) {
          ModelInputs next;
          next.tokens = tokens.narrow(1, t, 1);
          const torch::Tensor step = held->forward(next, &cache).logits;  // (B,1,V)
          CATCH_CHECK(held_error(step, ref.narrow(1, t, 1)) < 1e-5);
        }
      }
      held->train();
      plain->train();
      for (const LossKernel kernel : {LossKernel::kLogits, LossKernel::kChunked}) {
        TrainConfig train;
        train.loss_kernel = kernel;
        train.loss_chunk_rows = 16;
        for (Transformer* m : {&held, &plain})
          for (auto& p : (*m)->parameters())
            if (p.grad().defined()) p.mutable_grad().reset();
        const torch::Tensor a = training_loss_sum(held, batch, train, false).sum;
        const torch::Tensor b = training_loss_sum(plain, batch, train, false).sum;
        CATCH_CHECK(std::abs(a.item<double>() - b.item<double>()) < 1e-5 * std::abs(b.item<double>()));
        a.backward();
        b.backward();
        auto plain_params = plain->named_parameters();
        for (const auto& item : held->named_parameters()) {
          CATCH_CHECK(item.value().grad().defined() == is_adapter_parameter(item.key()));
          if (!is_adapter_parameter(item.key())) continue;
          CATCH_INFO(item.key() << " " << to_string(kernel));
          CATCH_CHECK(held_error(item.value().grad(), plain_params[item.key()].grad()) < 1e-4);
        }
      }
    }
  }
}
