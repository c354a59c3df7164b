// Model-level contracts of the loss mask (token file v3, docs/data.md): only masked-in labels reach the loss
// and its denominator, through packing and padding alike, and a row with nothing supervised adds nothing.
// Steps go through accumulate_gradients, the trainer's own forward/backward.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/text_batches.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "model/transformer.h"
#include "support/scratch_dir.h"
#include "support/small_model.h"
#include "support/tolerance.h"
#include "task/objective.h"
#include "train/trainer.h"

using namespace causal;

namespace {

// An instruction example: the prompt's bytes are masked out, the answer's bytes and the EOS count.
struct Example {
  std::string prompt, answer;
};

// Writes the examples as a masked byte token file, in the layout `data encode --format prompt-completion`
// gives, and returns its path.
std::string write_examples(const testing::ScratchDir& dir, const std::string& name,
                           const std::vector<Example>& examples) {
  ByteTokenizer tok;
  std::vector<int64_t> tokens, starts, bytes;
  std::vector<uint8_t> mask;
  for (const Example& e : examples) {
    starts.push_back(static_cast<int64_t>(tokens.size()));
    tokens.push_back(tok.info().bos_id);
    mask.push_back(0);
    for (unsigned char c : e.prompt) tokens.push_back(c), mask.push_back(0);
    for (unsigned char c : e.answer) tokens.push_back(c), mask.push_back(1);
    tokens.push_back(tok.info().eos_id);
    mask.push_back(1);
    bytes.push_back(static_cast<int64_t>(e.answer.size()));
  }
  const std::string path = (dir.path / name).string();
  write_token_file(path, tok.info(), tokens, starts, std::nullopt, bytes, "", mask);
  return path;
}

TextRowOptions rows_of(int64_t seq_len, TextLayout layout) {
  TextRowOptions o;
  o.seq_len = seq_len;
  o.layout = layout;
  o.isolate_documents = true;
  return o;
}

Batch batch_of(const TokenFile& file, const TextRowOptions& o) {
  std::vector<int64_t> order(file.num_documents());
  for (int64_t d = 0; d < file.num_documents(); ++d) order[d] = d;
  return collate_rows(file, plan_rows(file, order, o), o);
}

struct Step {
  StepGradients result;
  std::vector<torch::Tensor> grads;
};

Step step(Transformer& model, const Batch& batch) {
  Step s;
  s.result = accumulate_gradients(model, {batch}, TrainConfig{}, /*collect_diagnostics=*/false);
  for (auto& p : model->parameters())
    s.grads.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  return s;
}

bool grads_equal(const Step& a, const Step& b) {
  bool equal = true;
  for (size_t i = 0; i < a.grads.size(); ++i) equal = equal && torch::equal(a.grads[i], b.grads[i]);
  return equal;
}

const std::vector<Example> kExamples = {
    {"Q: upper cat\nA: ", "CAT"}, {"Q: reverse dog\nA: ", "god"}, {"Q: upper owl\nA: ", "OWL"}};

// The same examples with every prompt byte after the first replaced: each replaced byte is a masked-out
// label (and the input of the next position, which the test keeps from the original).
std::vector<Example> with_prompts_changed(std::vector<Example> examples) {
  for (Example& e : examples) {
    for (size_t i = 1; i < e.prompt.size(); ++i) e.prompt[i] = 'x';
  }
  return examples;
}

}  // namespace

CATCH_TEST_CASE(
    "loss mask: changing masked-out labels changes neither the loss nor any gradient, and a "
    "masked-in one does",
    "[contract][text]") {
  const testing::ScratchDir dir("loss_mask_labels");
  const TokenFile original(write_examples(dir, "a.tok", kExamples));
  const TokenFile prompts_changed(write_examples(dir, "b.tok", with_prompts_changed(kExamples)));
  std::vector<Example> answer_changed = kExamples;
  answer_changed[1].answer[1] = 'u';  // "gud": one masked-in label
  const TokenFile answer_file(write_examples(dir, "c.tok", answer_changed));
  CATCH_REQUIRE(original.supervised_labels() == 3 + 1 + 3 + 1 + 3 + 1);

  torch::manual_seed(5);
  Transformer model(testing::small_byte_model());
  for (TextLayout layout : {TextLayout::kPacked, TextLayout::kPadded}) {
    const TextRowOptions o = rows_of(32, layout);
    const Batch a = batch_of(original, o);
    // Labels from the changed files, inputs from the original: only labels differ.
    Batch b = batch_of(prompts_changed, o);
    Batch c = batch_of(answer_file, o);
    b.tokens = a.tokens;
    c.tokens = a.tokens;
    CATCH_REQUIRE(a.valid_tokens() == original.supervised_labels());
    const Step sa = step(model, a), sb = step(model, b), sc = step(model, c);
    CATCH_CHECK(sa.result.valid_tokens == original.supervised_labels());
    CATCH_CHECK(sa.result.loss == sb.result.loss);
    CATCH_CHECK(grads_equal(sa, sb));
    CATCH_CHECK(sa.result.loss != sc.result.loss);
    CATCH_CHECK_FALSE(grads_equal(sa, sc));
  }
  // Guard: the files do differ at masked-out labels, so the equality above is the mask's doing.
  int64_t changed = 0;
  for (int64_t i = 0; i < original.num_tokens(); ++i) {
    if (original.token(i) != prompts_changed.token(i)) {
      CATCH_CHECK_FALSE(original.supervised(i));
      ++changed;
    }
  }
  CATCH_CHECK(changed > 20);
}

CATCH_TEST_CASE("loss mask: packed and isolated equals padded, with masks", "[contract][text][numerics]") {
  const testing::ScratchDir dir("loss_mask_layouts");
  const TokenFile file(write_examples(dir, "a.tok", kExamples));
  torch::manual_seed(6);
  Transformer model(testing::small_byte_model());
  model->eval();
  torch::NoGradGuard no_grad;
  const Batch packed = batch_of(file, rows_of(64, TextLayout::kPacked));
  const Batch padded = batch_of(file, rows_of(64, TextLayout::kPadded));
  CATCH_REQUIRE(packed.tokens.size(0) == 1);  // all three examples share one row
  CATCH_REQUIRE(padded.tokens.size(0) == 3);
  // The same supervised (context, label) pairs: the labels of each layout, in order, are the same ids.
  auto labels_in_order = [](const Batch& b) {
    const torch::Tensor flat = b.labels.reshape({-1});
    return flat.masked_select(flat.ne(kIgnoreLabel));
  };
  CATCH_CHECK(torch::equal(labels_in_order(packed), labels_in_order(padded)));
  CATCH_CHECK(packed.valid_tokens() == file.supervised_labels());
  CATCH_CHECK(padded.valid_tokens() == file.supervised_labels());
  const torch::Tensor packed_logits = model->forward(model_inputs(packed)).logits;
  const double packed_loss = loss_sum(packed_logits, packed.labels).item<double>() / packed.valid_tokens();
  const double padded_loss =
      loss_sum(model->forward(model_inputs(padded)).logits, padded.labels).item<double>() /
      padded.valid_tokens();
  const double logit_bound =
      testing::logits_bound(model->config(), packed_logits, 64, 64).max().item<double>();
  CATCH_CHECK(testing::scalars_close(packed_loss, padded_loss,
                                     testing::loss_bound(logit_bound, padded_loss, packed.valid_tokens()),
                                     "masked loss, packed vs padded"));
}

CATCH_TEST_CASE("loss mask: a row whose every label is masked adds nothing to the loss, never a NaN",
                "[contract][text]") {
  const testing::ScratchDir dir("loss_mask_empty_row");
  // A prompt longer than a row: its first piece holds prompt labels only.
  const TokenFile file(write_examples(dir, "a.tok", {{std::string(40, 'p'), "ok"}, {"Q: hi\nA: ", "yes"}}));
  const TextRowOptions o = rows_of(16, TextLayout::kPadded);
  const std::vector<TextRow> rows = plan_rows(file, {0, 1}, o);
  const Batch all_masked = collate_rows(file, {rows[0]}, o);
  CATCH_REQUIRE(all_masked.valid_tokens() == 0);
  torch::manual_seed(7);
  Transformer model(testing::small_byte_model());
  // A step of nothing but masked labels: loss 0 and zero gradients, as the data contract says.
  const Step empty = step(model, all_masked);
  CATCH_CHECK(empty.result.loss == 0.0);
  CATCH_CHECK(empty.result.valid_tokens == 0);
  bool zero = true;
  for (const torch::Tensor& g : empty.grads) zero = zero && g.eq(0).all().item<bool>();
  CATCH_CHECK(zero);
  // Beside a supervised row it changes neither the denominator nor the loss (within rounding of the
  // batched products).
  const Batch answer_row = collate_rows(file, {rows.back()}, o);
  const Batch both = collate_rows(file, {rows[0], rows.back()}, o);
  const Step alone = step(model, answer_row), together = step(model, both);
  CATCH_CHECK(together.result.valid_tokens == alone.result.valid_tokens);
  CATCH_CHECK(std::isfinite(together.result.loss));
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->forward(model_inputs(answer_row)).logits;
  const double logit_bound = testing::logits_bound(model->config(), logits, 16, 16).max().item<double>();
  CATCH_CHECK(
      testing::scalars_close(together.result.loss, alone.result.loss,
                             testing::loss_bound(logit_bound, alone.result.loss, alone.result.valid_tokens),
                             "loss with and without the masked row"));
}
