// Data section of the run config: every field declared once, with its default and a one-line comment.
// visit_fields() is the single list of fields that JSON in/out, --set overrides and docs walk.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/enums.h"

namespace causal {

// The data section names its kind first; only that kind's fields belong in the file.
struct DataConfig {
  DataKind kind = DataKind::kRetrieval;  // "retrieval" (generated key/value task) | "text" (token files)

  // retrieval: sequences of `distractors + pairs` context records then one query record.
  int64_t key_count = 8;    // distinct keys; context keys in one example are distinct
  int64_t value_count = 8;  // distinct values; id value_count is the mask symbol
  int64_t pairs = 4;        // context records that may be queried
  int64_t distractors = 0;  // extra context records whose keys are never queried
  EvidencePosition evidence = EvidencePosition::kUniform;  // where the queried record sits
  int64_t evidence_index = 0;            // context index of the queried record when evidence == "fixed"
  std::vector<int64_t> eval_pairs = {};  // extra `pairs` counts evaluated (held-out lengths)
  int64_t train_examples = 2048;         // deduplicated training sequences
  int64_t test_examples = 384;           // test sequences, disjoint from training
  int64_t seed = 120;                    // data generator seed (train uses seed, test seed+1)
  int64_t val_examples = 384;            // validation sequences (seed + 1000), disjoint from train and test
  QueryMode query = QueryMode::kUnique;  // "unique" keys | "latest": the queried key repeats, latest wins
  bool query_only = false;               // inputs hold only the query record (a trained no-context baseline)

  // text: token files written by `causal data encode`.
  std::string train = "";                   // training token file (.tok)
  std::string val = "";                     // validation token file (.tok)
  int64_t seq_len = 256;                    // tokens per row
  TextLayout layout = TextLayout::kPacked;  // "packed" | "padded"
  bool isolate_documents = true;            // packed rows: documents cannot attend to each other

  template <class V>
  void visit_fields(V& v) {
    v.field("kind", kind);
    if (kind == DataKind::kRetrieval) {
      v.field("key_count", key_count);
      v.field("value_count", value_count);
      v.field("pairs", pairs);
      v.field("distractors", distractors);
      v.field("evidence", evidence);
      v.field("evidence_index", evidence_index);
      v.field("eval_pairs", eval_pairs);
      v.field("train_examples", train_examples);
      v.field("test_examples", test_examples);
      v.field("seed", seed);
      v.field("val_examples", val_examples);
      v.field("query", query);
      v.field("query_only", query_only);
    } else {
      v.field("train", train);
      v.field("val", val);
      v.field("seq_len", seq_len);
      v.field("layout", layout);
      v.field("isolate_documents", isolate_documents);
    }
  }
};

}  // namespace causal
