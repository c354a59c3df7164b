// Bits per byte for a subword tokenizer: evaluate_text against the definition, computed here by hand.
#include <torch/torch.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "config/config.h"
#include "data/sentencepiece_backend.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/text_batches.h"
#include "data/text_encode.h"
#include "data/token_file.h"
#include "model/transformer.h"
#include "support/sentencepiece.h"
#include "support/tolerance.h"
#include "task/text_eval.h"

using namespace causal;
namespace fs = std::filesystem;

// bits per byte = (summed loss over every label / ln 2) / text bytes = loss/ln2 x tokens/bytes, where the
// bytes are those of the documents' text (not of the ids), so it compares tokenizers fairly.
CATCH_TEST_CASE("bits per byte equals loss/ln2 x tokens/bytes by hand for a BPE file",
                "[contract][text][numerics]") {
  CAUSAL_SKIP_WITHOUT_SENTENCEPIECE();
  const fs::path dir = fs::temp_directory_path() / ("causal_bpb_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::string> docs;
  std::string text;
  for (int i = 0; i < 12; ++i) {
    docs.push_back("the cat " + std::to_string(i * 7) + " sat on the mat, caf\xC3\xA9 " + std::to_string(i));
    text += (i ? "\n\n" : "") + docs.back();
  }
  std::ofstream(dir / "in.txt", std::ios::binary) << text;
  TokenizerTrainOptions t;
  t.inputs = {(dir / "in.txt").string()};
  t.vocab_size = 320;
  t.out = (dir / "bpe.model").string();
  t.threads = 1;
  train_tokenizer(t);
  EncodeOptions e;
  e.inputs = t.inputs;
  e.tokenizer = t.out;
  e.out = (dir / "val.tok").string();
  e.doc_separator = "\\n\\n";
  encode_text(e);
  const TokenFile file(e.out);
  CATCH_REQUIRE(file.num_documents() == 12);

  ModelConfig m;
  m.inputs = {InputField{"token", 320}};
  m.output_vocab = 320;
  m.d_model = 32;
  m.n_layers = 1;
  m.n_heads = 4;
  m.n_kv_heads = 4;
  m.ffn_hidden = 64;
  m.max_seq_len = 64;
  torch::manual_seed(3);
  Transformer model(m);
  TextRowOptions rows;
  rows.seq_len = 64;
  rows.layout = TextLayout::kPadded;
  const TextEvalReport report = evaluate_text(model, file, rows, 5, torch::kCPU);

  // By hand: every document alone, cross-entropy from log-softmax, bytes from the text itself.
  torch::NoGradGuard no_grad;
  model->eval();
  double loss_sum = 0.0;
  int64_t tokens = 0, bytes = 0;
  double logit_bound = 0.0;  // the largest over the documents (tolerance.h (4)); padded rows hold 64 keys
  for (int64_t d = 0; d < file.num_documents(); ++d) {
    const std::vector<int64_t> ids = file.document(d);
    const auto n = static_cast<int64_t>(ids.size());
    CATCH_REQUIRE(n - 1 <= rows.seq_len);
    const torch::Tensor input =
        torch::tensor(std::vector<int64_t>(ids.begin(), ids.end() - 1)).view({1, n - 1, 1});
    const torch::Tensor labels = torch::tensor(std::vector<int64_t>(ids.begin() + 1, ids.end()));
    const torch::Tensor logits = model->forward(ModelInputs{input}).logits[0];  // (T,V)
    logit_bound = std::max(logit_bound, testing::logits_bound(m, logits, 64, 64).max().item<double>());
    const torch::Tensor logp = logits.log_softmax(-1);
    loss_sum -= logp.gather(1, labels.view({-1, 1})).sum().item<double>();
    tokens += n - 1;
    bytes += static_cast<int64_t>(docs[d].size());
  }
  CATCH_CHECK(report.tokens == tokens);
  CATCH_CHECK(report.bytes == bytes);
  CATCH_REQUIRE(tokens < bytes);  // guards: a subword file, where per token and per byte differ
  const double loss = loss_sum / tokens, loss_bound = testing::loss_bound(logit_bound, loss, tokens);
  CATCH_CHECK(testing::scalars_close(report.loss, loss, loss_bound, "loss"));
  CATCH_CHECK(report.bits_per_byte ==
              Catch::Detail::Approx(report.loss / std::log(2.0) * tokens / bytes).epsilon(1e-9));
  // The same figures scaled (bits per byte) and exponentiated (perplexity: e^(x + d) - e^x = e^x (e^d - 1)).
  const double per_byte = static_cast<double>(tokens) / std::log(2.0) / static_cast<double>(bytes);
  CATCH_CHECK(testing::scalars_close(report.bits_per_byte, loss * per_byte, loss_bound * per_byte, "bpb"));
  CATCH_CHECK(testing::scalars_close(report.perplexity, std::exp(loss),
                                     std::exp(loss) * std::expm1(loss_bound), "perplexity"));
  fs::remove_all(dir);
}
