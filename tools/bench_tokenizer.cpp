// tools/bench-tokenizer's C++ side: causal's byte-level BPE encoding one thread's worth of text, timed.
//   bench_tokenizer export TOKENIZER DIR          writes DIR/tokenizer.json (+ tokenizer_config.json)
//   bench_tokenizer time TOKENIZER REPS FILE...   one JSON line: seconds per rep (the first cold), bytes,
//   tokens bench_tokenizer ids TOKENIZER FILE            the ids of the file, space-separated
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "core/errors.h"
#include "data/byte_bpe_tokenizer.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw causal::DataError("cannot read " + path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 2 ? argv[1] : "";
    if (mode == "export" && argc == 4) {
      const auto tokenizer = causal::load_byte_bpe(argv[2]);
      std::ofstream(std::string(argv[3]) + "/tokenizer.json")
          << causal::hf_tokenizer_json(tokenizer->model());
      std::ofstream(std::string(argv[3]) + "/tokenizer_config.json")
          << causal::hf_tokenizer_config_json(tokenizer->model());
      return 0;
    }
    if (mode == "ids" && argc == 4) {
      const auto tokenizer = causal::load_byte_bpe(argv[2]);
      for (int64_t id : tokenizer->encode(read_file(argv[3])))
        std::printf("%lld ", static_cast<long long>(id));
      std::printf("\n");
      return 0;
    }
    if (mode == "time" && argc >= 5) {
      const auto tokenizer = causal::load_byte_bpe(argv[2]);  // a fresh word cache: the first rep is cold
      const int reps = std::stoi(argv[3]);
      std::vector<std::string> docs;
      size_t bytes = 0;
      for (int i = 4; i < argc; ++i) {
        docs.push_back(read_file(argv[i]));
        bytes += docs.back().size();
      }
      std::printf("{\"seconds\": [");
      size_t tokens = 0;
      for (int r = 0; r < reps; ++r) {
        tokens = 0;
        const auto start = std::chrono::steady_clock::now();
        for (const std::string& doc : docs) tokens += tokenizer->encode(doc).size();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf("%s%.6f", r ? ", " : "", s);
      }
      std::printf("], \"bytes\": %zu, \"tokens\": %zu}\n", bytes, tokens);
      return 0;
    }
    std::cerr
        << "usage: bench_tokenizer export TOKENIZER DIR | time TOKENIZER REPS FILE... | ids TOKENIZER FILE\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench_tokenizer: " << e.what() << "\n";
    return 3;
  }
}
