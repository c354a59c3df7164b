"""Test-only: reference token ids for causal's byte-level BPE tokenizer, from llama.cpp (llama-cpp-python) and
HF `tokenizers`. Driven by tests/interop/test_tokenizers.cpp, which encodes the same texts with causal and
compares. The product never needs Python.

  tokenizer_reference.py --texts TEXTS.json --brown DIR --work DIR --out RESULT.json [--gguf F.gguf]
                         [--export DIR]

TEXTS.json is a list of strings. RESULT.json: {"cases": [{"name", "tokenizer", "ids": [[...] per text]}],
"skipped": ["why", ...]}: `tokenizer` is the file causal loads for the case (a GGUF or a tokenizer.json).
Cases whose packages or files are missing are listed in "skipped" with the reason. Exit status 2 when
`tokenizers` itself is missing (the whole test skips).
"""
import argparse
import glob
import json
import os
import sys

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
          r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
         r"\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# The GGUF pre-tokenizer names llama.cpp reads each trained kind with ("default": llama.cpp's own regexes
# for a GGUF that names none, on the GPT-2 vocabulary).
GGUF_PRE = {"gpt2": ["gpt-2", "default"], "llama3": ["llama-bpe"], "qwen2": ["qwen2"], "smollm": ["smollm"]}


def train(kind, files, out_dir):
    """A small BPE trained by HF tokenizers on `files` with the pre-tokenizer of `kind`."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(ignore_merges=(kind == "llama3")))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=(kind in ("gpt2", "smollm")))
    if kind == "gpt2":
        tok.pre_tokenizer = byte_level
    elif kind == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    else:
        split = pre_tokenizers.Split(Regex(LLAMA3 if kind == "llama3" else QWEN2), behavior="isolated", invert=False)
        tok.pre_tokenizer = pre_tokenizers.Sequence([split, byte_level])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train(files, trainer)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "tokenizer.json")
    tok.save(path)
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}, f)
    return path


def hf_ids(path, texts):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(path)
    return [tok.encode(t, add_special_tokens=False).ids for t in texts]


def llama_ids(gguf, texts):
    from llama_cpp import Llama
    llm = Llama(model_path=gguf, vocab_only=True, verbose=False)
    return [llm.tokenize(t.encode("utf-8"), add_bos=False, special=True) for t in texts]


def write_vocab_gguf(tokenizer_json, pre, path):
    """A GGUF holding only a llama header and the tokenizer metadata of an HF tokenizer.json (gguf-py)."""
    import gguf
    with open(tokenizer_json) as f:
        data = json.load(f)
    vocab = data["model"]["vocab"]
    added = {a["id"]: a for a in data.get("added_tokens", [])}
    n = max(max(vocab.values()), max(added) if added else -1) + 1
    tokens = [""] * n
    for text, i in vocab.items():
        tokens[i] = text
    types = [gguf.TokenType.NORMAL] * n
    for i, a in added.items():
        tokens[i] = a["content"]
        types[i] = gguf.TokenType.CONTROL if a["special"] else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(256)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_eos_token_id(tokens.index("<|endoftext|>"))
    w.add_add_bos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", required=True)
    parser.add_argument("--brown", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--gguf", default="")
    parser.add_argument("--export", default="", help="folder of causal's hf_tokenizer_json of the GGUF")
    args = parser.parse_args()
    try:
        import tokenizers  # noqa: F401
    except ImportError as e:
        print(f"tokenizers is missing ({e})")
        return 2
    with open(args.texts, encoding="utf-8") as f:
        texts = json.load(f)
    cases, skipped = [], []

    def case(name, tokenizer, ids_of):
        try:
            cases.append({"name": name, "tokenizer": tokenizer, "ids": ids_of()})
        except Exception as e:  # a consumer that cannot load the file is reported, not fatal
            skipped.append(f"{name}: {type(e).__name__}: {e}")

    gguf_file = args.gguf if args.gguf and os.path.isfile(args.gguf) else ""
    if not gguf_file:
        skipped.append("SmolLM2 GGUF cases: CAUSAL_SMOLLM2_GGUF unset or missing")
    try:
        import llama_cpp  # noqa: F401
        have_llama = True
    except ImportError as e:
        have_llama = False
        skipped.append(f"llama.cpp cases: llama-cpp-python is missing ({e})")
    if gguf_file and have_llama:
        case("llama.cpp smollm2 gguf", gguf_file, lambda: llama_ids(gguf_file, texts))
    if gguf_file:
        try:
            from transformers import AutoTokenizer
            out = os.path.join(args.work, "smollm2-transformers")
            tok = AutoTokenizer.from_pretrained(os.path.dirname(gguf_file), gguf_file=os.path.basename(gguf_file))
            tok.save_pretrained(out)
            path = os.path.join(out, "tokenizer.json")
            case("HF tokenizers on transformers' conversion of the smollm2 gguf", path, lambda: hf_ids(path, texts))
        except ImportError as e:
            skipped.append(f"transformers conversion of the GGUF: transformers is missing ({e})")
    if args.export and os.path.isfile(os.path.join(args.export, "tokenizer.json")):
        path = os.path.join(args.export, "tokenizer.json")
        case("HF tokenizers on causal's export of the smollm2 gguf", path, lambda: hf_ids(path, texts))
    files = sorted(glob.glob(os.path.join(args.brown, "*.txt")))
    for kind in ["gpt2", "llama3", "qwen2", "smollm"]:
        path = train(kind, files, os.path.join(args.work, "trained-" + kind))
        case(f"HF tokenizers, {kind} pre-tokenizer, trained on brown", path, lambda: hf_ids(path, texts))
        for pre in GGUF_PRE[kind] if have_llama else []:
            gguf_path = os.path.join(args.work, f"trained-{kind}-{pre}.gguf")
            try:
                write_vocab_gguf(path, pre, gguf_path)
            except Exception as e:
                skipped.append(f"gguf of trained {kind}: {type(e).__name__}: {e}")
                continue
            case(f"llama.cpp, pre {pre}, {kind} trained on brown", gguf_path, lambda: llama_ids(gguf_path, texts))
    with open(args.out, "w") as f:
        json.dump({"cases": cases, "skipped": skipped}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
