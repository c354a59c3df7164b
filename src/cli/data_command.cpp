// `causal data encode|inspect`: text -> token files, and what a token file holds.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/errors.h"
#include "data/text_encode.h"

namespace causal::cli {

Command add_data_command(CLI::App& app) {
  CLI::App* data =
      app.add_subcommand("data", "Prepare text data: encode text files into token files, inspect them");
  data->require_subcommand(1);

  auto options = std::make_shared<EncodeOptions>();
  CLI::App* encode = data->add_subcommand("encode",
                                          "Text files -> a .tok token file (docs/data.md). Each input file "
                                          "is one document unless --doc-separator "
                                          "splits it; every document is stored as [BOS, ids..., EOS].");
  encode->add_option("--input", options->inputs, "Text files, encoded in this order")->required();
  encode->add_option("--tokenizer", options->tokenizer, "Tokenizer: bytes (256 byte ids + BOS, EOS, PAD)")
      ->capture_default_str();
  encode->add_option("--out", options->out, "Token file to write (training split)")->required();
  encode->add_option("--val-out", options->val_out, "Token file for the validation split (whole documents)");
  encode
      ->add_option("--val-fraction", options->val_fraction,
                   "Share of documents written to --val-out, spread evenly over the input order")
      ->check(CLI::Range(0.0, 1.0));
  encode->add_option("--doc-separator", options->doc_separator,
                     "Split inputs into documents at this string (escapes \\n \\t \\r \\\\ allowed)");

  auto tok_path = std::make_shared<std::string>();
  CLI::App* inspect = data->add_subcommand(
      "inspect", "Header, document count and document length statistics of a token file");
  inspect->add_option("file", *tok_path, "Token file (.tok)")->required();

  return {data, [=] {
            if (encode->parsed()) {
              std::cout << encode_text_files(*options) << std::flush;
            } else if (inspect->parsed()) {
              std::cout << inspect_token_file(*tok_path) << std::flush;
            }
            return kExitOk;
          }};
}

}  // namespace causal::cli
