// "Did you mean" hints for unknown config keys: edit distance against the keys valid at that place.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace causal {

// Levenshtein distance where swapping two adjacent characters also counts as one edit.
std::size_t edit_distance(const std::string& a, const std::string& b);

// The valid key a misspelt `key` most likely meant, or "" when none is close enough to guess.
std::string closest_key(const std::string& key, const std::vector<std::string>& valid);

// Keys that are valid elsewhere, with the reason they are not valid here
// (e.g. {"seq_len", "belongs to data.kind \"text\", ..."}).
using KeysElsewhere = std::vector<std::pair<std::string, std::string>>;

// One-line problem text for an unknown key, the first hint that applies: the section variant it belongs
// to (`elsewhere`), the full path of a field with exactly that name in another section (`same_name`, e.g.
// "train.optimizer.lr" for "lr" in train), a close key here, else the list of valid keys.
std::string unknown_key_problem(const std::string& key, const std::vector<std::string>& valid,
                                const KeysElsewhere& elsewhere = {},
                                const std::vector<std::string>& same_name = {});

}  // namespace causal
