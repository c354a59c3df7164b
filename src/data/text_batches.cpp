// Row planning, collation, the shuffled training source and in-order evaluation batches for token files.
#include "data/text_batches.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "core/errors.h"

namespace causal {
namespace {

void check_options(const TextRowOptions& options, int64_t batch_size) {
  if (options.seq_len < 1) {
    throw DataError("[text batches] seq_len must be >= 1, got " + std::to_string(options.seq_len));
  }
  if (batch_size < 1)
    throw DataError("[text batches] batch_size must be >= 1, got " + std::to_string(batch_size));
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

TextRowOptions TextRowOptions::from(const DataConfig& data) {
  return TextRowOptions{data.seq_len, data.layout, data.isolate_documents};
}

std::vector<TextRow> plan_rows(const TokenFile& file, const std::vector<int64_t>& order,
                               const TextRowOptions& options) {
  check_options(options, 1);
  const int64_t t = options.seq_len;
  std::vector<TextRow> rows;
  int64_t used = 0;  // positions taken in rows.back()
  for (int64_t d : order) {
    const int64_t pairs = file.document_length(d) - 1;  // >= 1: the file guarantees BOS and EOS
    for (int64_t begin = 0; begin < pairs; begin += t) {
      const RowPiece piece{d, begin, std::min(t, pairs - begin)};
      if (options.layout == TextLayout::kPacked && !rows.empty() && used + piece.pairs <= t) {
        rows.back().push_back(piece);
        used += piece.pairs;
      } else {
        rows.push_back(TextRow{piece});
        used = piece.pairs;
      }
    }
  }
  return rows;
}

Batch collate_rows(const TokenFile& file, const std::vector<TextRow>& rows, const TextRowOptions& options) {
  check_options(options, 1);
  const auto b = static_cast<int64_t>(rows.size());
  const int64_t t = options.seq_len;
  const int64_t pad = file.tokenizer().pad_id;
  at::Tensor tokens = at::full({b, t}, pad, at::kLong);           // (B,T)
  at::Tensor positions = at::zeros({b, t}, at::kLong);            // (B,T)
  at::Tensor segments = at::zeros({b, t}, at::kLong);             // (B,T)
  at::Tensor key_valid = at::zeros({b, t}, at::kBool);            // (B,T)
  at::Tensor labels = at::full({b, t}, kIgnoreLabel, at::kLong);  // (B,T)
  auto tok = tokens.accessor<int64_t, 2>();
  auto pos = positions.accessor<int64_t, 2>();
  auto seg = segments.accessor<int64_t, 2>();
  auto valid = key_valid.accessor<bool, 2>();
  auto lab = labels.accessor<int64_t, 2>();
  std::vector<int64_t> ids;
  for (int64_t r = 0; r < b; ++r) {
    int64_t col = 0, segment = 0;
    for (const RowPiece& piece : rows[r]) {
      ++segment;
      // Rows may come from a caller, not plan_rows: a bad piece must not read outside its document.
      // begin + pairs is the index of the piece's last label.
      if (piece.document < 0 || piece.document >= file.num_documents() || piece.pairs < 1 ||
          piece.begin < 0 || col + piece.pairs > t ||
          piece.begin + piece.pairs > file.document_length(piece.document) - 1) {
        throw DataError("[text batches] row " + std::to_string(r) + " piece (document " +
                        std::to_string(piece.document) + ", begin " + std::to_string(piece.begin) +
                        ", pairs " + std::to_string(piece.pairs) + ") does not fit seq_len " +
                        std::to_string(t) + " or its document in " + file.path());
      }
      // pairs inputs plus one more token: the label of the piece's last input.
      ids.resize(piece.pairs + 1);
      file.read_tokens(file.document_start(piece.document) + piece.begin, piece.pairs + 1, ids.data());
      const int64_t first_label = file.document_start(piece.document) + piece.begin + 1;
      for (int64_t j = 0; j < piece.pairs; ++j) {
        tok[r][col + j] = ids[j];
        lab[r][col + j] = file.supervised(first_label + j) ? ids[j + 1] : kIgnoreLabel;
        pos[r][col + j] = j;
        seg[r][col + j] = segment;
        valid[r][col + j] = true;
      }
      col += piece.pairs;
    }
  }
  Batch batch;
  batch.tokens = tokens.unsqueeze(2);  // (B,T,1): text has one input field
  batch.positions = positions;
  batch.segment_ids =
      options.layout == TextLayout::kPacked && options.isolate_documents ? segments : at::Tensor();
  batch.key_valid = key_valid;
  batch.labels = labels;
  return batch;
}

nlohmann::json cursor_to_json(const TextCursor& cursor) {
  return nlohmann::json{{"epoch", cursor.epoch}, {"position", cursor.position}, {"seed", cursor.seed}};
}

TextCursor cursor_from_json(const nlohmann::json& json) {
  auto fail = [&](const std::string& why) {
    throw DataError("[text batches] bad data cursor " + json.dump() + ": " + why);
  };
  if (!json.is_object()) fail("expected an object {\"epoch\",\"position\",\"seed\"}");
  for (const char* key : {"epoch", "position", "seed"}) {
    if (!json.contains(key)) fail(std::string("missing \"") + key + "\"");
    if (!json.at(key).is_number_integer()) fail(std::string("\"") + key + "\" must be an integer");
  }
  TextCursor c;
  c.epoch = json.at("epoch").get<int64_t>();
  c.position = json.at("position").get<int64_t>();
  if (json.at("seed").is_number_unsigned()) {
    c.seed = json.at("seed").get<uint64_t>();
  } else {
    const auto s = json.at("seed").get<int64_t>();
    if (s < 0) fail("\"seed\" must be >= 0");
    c.seed = static_cast<uint64_t>(s);
  }
  if (c.epoch < 0 || c.position < 0) fail("epoch and position must be >= 0");
  return c;
}

std::vector<int64_t> epoch_order(int64_t documents, uint64_t seed, int64_t epoch) {
  // Two rounds of mixing so that nearby (seed, epoch) pairs give unrelated streams.
  uint64_t state = seed;
  state = splitmix64(state) ^ static_cast<uint64_t>(epoch);
  splitmix64(state);
  std::vector<int64_t> order(documents);
  for (int64_t i = 0; i < documents; ++i) order[i] = i;
  for (int64_t i = documents - 1; i > 0; --i) {
    // Multiply-shift maps 64 random bits onto 0..i; the bias (< i / 2^64) is immaterial here.
    const auto j = static_cast<int64_t>((static_cast<unsigned __int128>(splitmix64(state)) * (i + 1)) >> 64);
    std::swap(order[i], order[j]);
  }
  return order;
}

TextBatchSource::TextBatchSource(TokenFile file, const TextRowOptions& options, int64_t batch_size,
                                 uint64_t seed)
    : file_(std::move(file)), options_(options), batch_size_(batch_size), seed_(seed) {
  check_options(options_, batch_size_);
  plan_epoch(0);
}

void TextBatchSource::plan_epoch(int64_t epoch) {
  rows_ = plan_rows(file_, epoch_order(file_.num_documents(), seed_, epoch), options_);
  epoch_ = epoch;
  position_ = 0;
}

Batch TextBatchSource::next() {
  std::vector<TextRow> batch_rows;
  batch_rows.reserve(batch_size_);
  while (static_cast<int64_t>(batch_rows.size()) < batch_size_) {
    if (position_ >= rows_in_epoch()) plan_epoch(epoch_ + 1);
    batch_rows.push_back(rows_[position_++]);
  }
  return collate_rows(file_, batch_rows, options_);
}

nlohmann::json TextBatchSource::state() const { return cursor_to_json(cursor()); }

void TextBatchSource::restore(const nlohmann::json& state) { restore(cursor_from_json(state)); }

void TextBatchSource::restore(const TextCursor& cursor) {
  if (cursor.epoch < 0 || cursor.position < 0) {
    throw DataError("[text batches] cannot restore cursor with negative epoch or position");
  }
  seed_ = cursor.seed;
  plan_epoch(cursor.epoch);
  if (cursor.position > rows_in_epoch()) {
    throw DataError("[text batches] cursor position " + std::to_string(cursor.position) +
                    " lies beyond the " + std::to_string(rows_in_epoch()) + " rows of epoch " +
                    std::to_string(cursor.epoch) + " in " + file_.path() + " (seq_len " +
                    std::to_string(options_.seq_len) + "): was it saved with another token file or seq_len?");
  }
  position_ = cursor.position;
}

TextEvalBatches::TextEvalBatches(const TokenFile& file, const TextRowOptions& options, int64_t batch_size)
    : file_(file), options_(options), batch_size_(batch_size) {
  check_options(options_, batch_size_);
  std::vector<int64_t> order(file_.num_documents());
  for (int64_t d = 0; d < file_.num_documents(); ++d) order[d] = d;
  rows_ = plan_rows(file_, order, options_);
}

Batch TextEvalBatches::batch(int64_t index) const {
  if (index < 0 || index >= num_batches()) {
    throw DataError("[text batches] eval batch " + std::to_string(index) + " out of range 0.." +
                    std::to_string(num_batches() - 1));
  }
  const int64_t begin = index * batch_size_;
  const int64_t end = std::min(begin + batch_size_, num_rows());
  const std::vector<TextRow> rows(rows_.begin() + begin, rows_.begin() + end);
  return collate_rows(file_, rows, options_);
}

void for_each_eval_batch(const TokenFile& file, const TextRowOptions& options, int64_t batch_size,
                         const std::function<void(const Batch&)>& fn) {
  const TextEvalBatches batches(file, options, batch_size);
  for (int64_t i = 0; i < batches.num_batches(); ++i) fn(batches.batch(i));
}

}  // namespace causal
