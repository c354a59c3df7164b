// Model-level contracts of text batches: packed documents cannot see each other, padding is invisible to
// the loss and every gradient, and positions restart per document.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "config/config.h"
#include "data/text_batches.h"
#include "data/token_file.h"
#include "model/transformer.h"
#include "support/byte_docs.h"
#include "support/small_model.h"
#include "support/tolerance.h"
#include "task/objective.h"

using namespace causal;
namespace fs = std::filesystem;

namespace {

// Writes documents (byte strings) to a token file in a fresh temp dir and opens it.
struct DocFile {
  fs::path dir;
  std::unique_ptr<TokenFile> file;
  explicit DocFile(const std::vector<std::string>& docs) {
    dir = fs::temp_directory_path() / ("causal_text_contract_" + std::to_string(::getpid()) + "_" +
                                       std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::create_directories(dir);
    testing::write_byte_docs((dir / "d.tok").string(), docs);
    file = std::make_unique<TokenFile>((dir / "d.tok").string());
  }
  ~DocFile() { fs::remove_all(dir); }
};

ModelConfig text_model(PositionKind position) { return testing::small_byte_model(position); }

TextRowOptions packed(int64_t seq_len, bool isolate) {
  TextRowOptions o;
  o.seq_len = seq_len;
  o.layout = TextLayout::kPacked;
  o.isolate_documents = isolate;
  return o;
}

// Logits of one document run alone in a row of exactly its length.
torch::Tensor alone(Transformer& model, const TokenFile& file, int64_t doc) {
  TextRowOptions o = packed(file.document_length(doc) - 1, true);
  Batch b = collate_rows(file, {TextRow{RowPiece{doc, 0, file.document_length(doc) - 1}}}, o);
  return model->forward(model_inputs(b)).logits[0];  // (T,V)
}

std::vector<torch::Tensor> grads_of(Transformer& model) {
  std::vector<torch::Tensor> out;
  for (auto& p : model->parameters())
    out.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  return out;
}

}  // namespace

// Packed+isolated row == its documents run separately (logits within the bound of two computations of one
// model, tolerance.h (4)), for RoPE and learned positions; without isolation the second document sees the
// first and the same comparison fails.
CATCH_TEST_CASE("packed isolated documents equal the documents run separately",
                "[contract][text][numerics]") {
  DocFile f({"the cat sat", "on a mat!"});
  for (PositionKind position : {PositionKind::kRope, PositionKind::kLearned}) {
    torch::manual_seed(1);
    Transformer model(text_model(position));
    model->eval();
    const int64_t len_a = f.file->document_length(0) - 1, len_b = f.file->document_length(1) - 1;
    const TextRow row{RowPiece{0, 0, len_a}, RowPiece{1, 0, len_b}};
    torch::NoGradGuard no_grad;
    for (bool isolate : {true, false}) {
      Batch b = collate_rows(*f.file, {row}, packed(32, isolate));
      torch::Tensor logits = model->forward(model_inputs(b)).logits[0];  // (T,V)
      const torch::Tensor bound = testing::logits_bound(model->config(), logits, 32, 32);
      const auto same = [&](int64_t doc, int64_t start, int64_t len) {
        return testing::within(logits.slice(0, start, start + len), alone(model, *f.file, doc),
                               bound.slice(0, start, start + len),
                               "document " + std::to_string(doc) + (isolate ? "" : ", not isolated"));
      };
      const bool a_same = static_cast<bool>(same(0, 0, len_a));
      const bool b_same = static_cast<bool>(same(1, len_a, len_b));
      CATCH_CHECK(a_same);  // the first document never sees anything but itself
      CATCH_CHECK(b_same == isolate);
    }
  }
}

// The loss of a packed row equals the loss of its documents computed separately (same valid-token count).
CATCH_TEST_CASE("packed isolated loss equals the separate documents' loss", "[contract][text][numerics]") {
  DocFile f({"alpha beta", "gamma", "delta epsilon zeta"});
  torch::manual_seed(2);
  Transformer model(text_model(PositionKind::kRope));
  model->eval();
  torch::NoGradGuard no_grad;
  TextRow row;
  double separate_sum = 0;
  int64_t separate_count = 0;
  for (int64_t d = 0; d < 3; ++d) {
    const int64_t pairs = f.file->document_length(d) - 1;
    row.push_back(RowPiece{d, 0, pairs});
    Batch one = collate_rows(*f.file, {TextRow{RowPiece{d, 0, pairs}}}, packed(pairs, true));
    separate_sum += loss_sum(model->forward(model_inputs(one)).logits, one.labels).item<double>();
    separate_count += one.valid_tokens();
  }
  Batch b = collate_rows(*f.file, {row}, packed(48, true));  // 36 pairs and some padding
  CATCH_REQUIRE(b.valid_tokens() == separate_count);
  const torch::Tensor logits = model->forward(model_inputs(b)).logits;
  const double packed_loss = loss_sum(logits, b.labels).item<double>();
  // The mean over the tokens from logits within tolerance.h (4) of each other.
  const double logit_bound = testing::logits_bound(model->config(), logits, 48, 48).max().item<double>();
  const double separate = separate_sum / separate_count;
  CATCH_CHECK(testing::scalars_close(packed_loss / separate_count, separate,
                                     testing::loss_bound(logit_bound, separate, separate_count), "loss"));
}

// Perturbing document A leaves document B's logits and the gradients of B's loss bitwise unchanged.
CATCH_TEST_CASE("perturbing one packed document leaves the other's logits and gradients bitwise equal",
                "[contract][text]") {
  DocFile f({"first document", "second one"});
  torch::manual_seed(3);
  Transformer model(text_model(PositionKind::kRope));
  const int64_t len_a = f.file->document_length(0) - 1, len_b = f.file->document_length(1) - 1;
  Batch b = collate_rows(*f.file, {TextRow{RowPiece{0, 0, len_a}, RowPiece{1, 0, len_b}}}, packed(32, true));
  auto b_loss_and_grads = [&](const Batch& batch) {
    model->zero_grad();
    ModelOutput out = model->forward(model_inputs(batch));
    torch::Tensor labels = batch.labels.clone();
    labels.slice(1, 0, len_a).fill_(kIgnoreLabel);  // B's loss only
    loss_sum(out.logits, labels).backward();
    return std::make_pair(out.logits.detach().slice(1, len_a, len_a + len_b).clone(), grads_of(model));
  };
  auto [logits0, grads0] = b_loss_and_grads(b);
  Batch changed = b;
  changed.tokens = b.tokens.clone();
  changed.tokens.slice(1, 1, len_a).fill_(static_cast<int64_t>('z'));  // rewrite A after its BOS
  CATCH_REQUIRE_FALSE(torch::equal(changed.tokens, b.tokens));
  auto [logits1, grads1] = b_loss_and_grads(changed);
  CATCH_CHECK(torch::equal(logits0, logits1));
  bool all_equal = true;
  for (size_t i = 0; i < grads0.size(); ++i) all_equal = all_equal && torch::equal(grads0[i], grads1[i]);
  CATCH_CHECK(all_equal);
  // Guard: with isolation off the same perturbation does reach B.
  Batch open =
      collate_rows(*f.file, {TextRow{RowPiece{0, 0, len_a}, RowPiece{1, 0, len_b}}}, packed(32, false));
  Batch open_changed = open;
  open_changed.tokens = changed.tokens;
  CATCH_CHECK_FALSE(torch::equal(b_loss_and_grads(open).first, b_loss_and_grads(open_changed).first));
}

// PAD ids and the PAD embedding row change neither the loss nor any gradient.
CATCH_TEST_CASE("padding changes neither the loss nor any gradient", "[contract][text]") {
  DocFile f({"short", "a somewhat longer document"});
  torch::manual_seed(4);
  Transformer model(text_model(PositionKind::kLearned));
  for (TextLayout layout : {TextLayout::kPadded, TextLayout::kPacked}) {
    TextRowOptions o = packed(32, true);
    o.layout = layout;
    std::vector<TextRow> rows = plan_rows(*f.file, {0, 1}, o);
    Batch b = collate_rows(*f.file, rows, o);
    const torch::Tensor pad = b.key_valid.logical_not();  // (B,T)
    CATCH_REQUIRE(pad.any().item<bool>());                // there is padding to perturb
    auto loss_and_grads = [&](const Batch& batch) {
      model->zero_grad();
      torch::Tensor loss =
          loss_sum(model->forward(model_inputs(batch)).logits, batch.labels) / batch.valid_tokens();
      loss.backward();
      return std::make_pair(loss.item<double>(), grads_of(model));
    };
    auto [loss0, grads0] = loss_and_grads(b);
    Batch other = b;
    other.tokens = b.tokens.clone();
    other.tokens.select(2, 0).masked_fill_(pad,
                                           static_cast<int64_t>('q'));  // PAD ids replaced by a real byte
    auto [loss1, grads1] = loss_and_grads(other);
    {
      torch::NoGradGuard no_grad;  // a different PAD embedding row
      model->named_parameters()["embed.token.weight"][258].normal_();
    }
    auto [loss2, grads2] = loss_and_grads(b);
    CATCH_CHECK(loss0 == loss1);
    CATCH_CHECK(loss0 == loss2);
    bool equal = true;
    for (size_t i = 0; i < grads0.size(); ++i) {
      equal = equal && torch::equal(grads0[i], grads1[i]) && torch::equal(grads0[i], grads2[i]);
    }
    CATCH_CHECK(equal);
  }
}

CATCH_TEST_CASE("text contract: a batch moved with all keys valid reaches the model without key_valid",
                "[unit][task]") {
  Batch full{torch::zeros({2, 4, 1}, torch::kLong), torch::arange(4).repeat({2, 1}), torch::Tensor(),
             torch::ones({2, 4}, torch::kBool), torch::zeros({2, 4}, torch::kLong)};
  const Batch moved = full.to(c10::kCPU);
  CATCH_CHECK(moved.unpadded);
  CATCH_CHECK(moved.key_valid.defined());  // the batch keeps it: evaluation and the tasks read it
  CATCH_CHECK_FALSE(model_inputs(moved).key_valid.defined());
  Batch padded = full;
  padded.key_valid = torch::ones({2, 4}, torch::kBool);
  padded.key_valid[1][0] = false;
  const Batch moved_padded = padded.to(c10::kCPU);
  CATCH_CHECK_FALSE(moved_padded.unpadded);
  CATCH_CHECK(torch::equal(model_inputs(moved_padded).key_valid, padded.key_valid));
  // A batch never moved keeps its key_valid: nobody checked it.
  CATCH_CHECK(model_inputs(full).key_valid.defined());
}
