// Token files -> training/evaluation batches: documents are cut into pieces of at most seq_len (input,
// label) pairs and laid out in rows, packed (several documents per row) or padded (one piece per row).
// The label shift happens here and only here (docs/data.md, "Rows and batches").
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "config/data_config.h"
#include "data/batch_source.h"
#include "data/token_file.h"

namespace causal {

struct TextRowOptions {
  int64_t seq_len = 256;                    // T: positions per row
  TextLayout layout = TextLayout::kPacked;  // "packed" | "padded"
  bool isolate_documents = true;            // packed: segment ids keep documents from attending to each other

  static TextRowOptions from(const DataConfig& data);
};

// A run of one document inside a row. A document of n stored tokens [BOS, ..., EOS] has n-1 pairs; the
// piece covers pairs begin .. begin+pairs-1: inputs tokens[begin .. begin+pairs-1], labels
// tokens[begin+1 .. begin+pairs]. Its positions restart at 0 and it is its own segment.
struct RowPiece {
  int64_t document = 0;  // index in the token file
  int64_t begin = 0;     // first input's index within the document (0 = its BOS)
  int64_t pairs = 0;     // positions the piece occupies, 1 .. seq_len
};
using TextRow = std::vector<RowPiece>;  // pieces in row order; their pairs sum to at most seq_len

// Rows for the documents in `order`. A document with more than seq_len pairs is cut into pieces of
// seq_len pairs plus a remainder; shorter documents are one piece. padded: one piece per row. packed:
// greedy in order, a piece that does not fit the rest of the current row starts the next one. So both
// layouts hold exactly the same pieces.
std::vector<TextRow> plan_rows(const TokenFile& file, const std::vector<int64_t>& order,
                               const TextRowOptions& options);

// The batch of `rows` (B = rows.size(), T = seq_len):
//   tokens (B,T,1) int64, PAD where no piece is; positions (B,T) int64, 0 .. pairs-1 per piece, 0 on PAD;
//   key_valid (B,T) bool, false on PAD; labels (B,T) int64, kIgnoreLabel on PAD and where the file's loss
//   mask leaves a label out (an instruction's prompt);
//   segment_ids (B,T) int64: pieces numbered 1, 2, ... in each row and 0 on PAD, defined only for packed
//   rows with isolate_documents (padded rows hold one piece; unisolated packed rows see each other).
Batch collate_rows(const TokenFile& file, const std::vector<TextRow>& rows, const TextRowOptions& options);

// Where a TextBatchSource stands: enough to continue the exact batch sequence after a restart.
struct TextCursor {
  int64_t epoch = 0;     // the pass over the documents being served, from 0
  int64_t position = 0;  // rows of that epoch already served (may equal its row count)
  uint64_t seed = 0;     // epoch e's document order is a permutation drawn from (seed, e)

  bool operator==(const TextCursor& o) const {
    return epoch == o.epoch && position == o.position && seed == o.seed;
  }
};
nlohmann::json cursor_to_json(const TextCursor& cursor);  // {"epoch":E,"position":P,"seed":S}
TextCursor cursor_from_json(const nlohmann::json& json);  // throws DataError on missing/mistyped fields

// Document order of epoch `epoch`: a Fisher-Yates permutation of 0..documents-1 driven by splitmix64, so
// it is the same on every platform and compiler (std::shuffle's is not).
std::vector<int64_t> epoch_order(int64_t documents, uint64_t seed, int64_t epoch);

// Training batches forever: each epoch shuffles the document order, plans rows and serves them B at a
// time; a batch that reaches the end of an epoch continues with the next epoch's rows.
class TextBatchSource : public BatchSource {
 public:
  TextBatchSource(TokenFile file, const TextRowOptions& options, int64_t batch_size, uint64_t seed);
  Batch next() override;
  nlohmann::json state() const override;               // cursor_to_json(cursor())
  void restore(const nlohmann::json& state) override;  // restore(cursor_from_json(state))

  TextCursor cursor() const { return {epoch_, position_, seed_}; }
  // Continues from `cursor` (its seed replaces this source's). Throws DataError if its position lies
  // beyond the rows of its epoch (a cursor from another token file or seq_len).
  void restore(const TextCursor& cursor);

  const TokenFile& file() const { return file_; }
  const TextRowOptions& options() const { return options_; }
  int64_t rows_in_epoch() const { return static_cast<int64_t>(rows_.size()); }

 private:
  void plan_epoch(int64_t epoch);

  TokenFile file_;
  TextRowOptions options_;
  int64_t batch_size_;
  uint64_t seed_;
  int64_t epoch_ = 0;
  int64_t position_ = 0;
  std::vector<TextRow> rows_;  // the current epoch's plan
};

// Every row of a token file, documents in file order (no shuffle), in batches of at most batch_size rows
// (the last may be smaller; none is padded with empty rows), so evaluation covers the split exactly once.
// `file` must outlive this object.
class TextEvalBatches {
 public:
  TextEvalBatches(const TokenFile& file, const TextRowOptions& options, int64_t batch_size);
  int64_t num_rows() const { return static_cast<int64_t>(rows_.size()); }
  int64_t num_batches() const { return (num_rows() + batch_size_ - 1) / batch_size_; }
  Batch batch(int64_t index) const;  // rows [index*B, min((index+1)*B, num_rows))

 private:
  const TokenFile& file_;
  TextRowOptions options_;
  int64_t batch_size_;
  std::vector<TextRow> rows_;
};

// Calls `fn` on every batch of TextEvalBatches(file, options, batch_size), in order.
void for_each_eval_batch(const TokenFile& file, const TextRowOptions& options, int64_t batch_size,
                         const std::function<void(const Batch&)>& fn);

}  // namespace causal
