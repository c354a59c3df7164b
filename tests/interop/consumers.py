"""Test-only: runs causal's exports in the real consumers (transformers, llama.cpp via llama-cpp-python) and
builds transformers models for `causal import`. Driven by tests/interop/test_consumers.cpp, which compares
the figures written here with causal's own. The product never needs Python.

  consumers.py check --docs DOCS.json [--gguf F.gguf] [--hf DIR] --out RESULT.json
  consumers.py make-hf --arch ARCH --docs DOCS.json --out DIR     (writes DIR and DIR.loss.json: the mean NLL
                                                                    and every document's per-token log-probs)
      ARCH: llama, llama-tied (tie_word_embeddings), qwen2 (Qwen2ForCausalLM, GQA, tied), gpt2 (exact GELU),
            gpt2-gelu-new (GPT-2's own tanh GELU)
  consumers.py make-gguf --hf DIR --out F.gguf                    (gguf-py's writer, from a llama or qwen2 DIR)
"""
import argparse
import json
import math
import sys


def log_probs_of_labels(logits, ids):
    """Per-token log-probabilities of ids[1:] given ids[:-1], in float64. logits: (T, V) for ids[:-1]."""
    import numpy as np
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=1))
    labels = np.asarray(ids[1:])
    return (z[np.arange(len(labels)), labels] - lse).tolist()


def check_hf(hf_dir, docs, result):
    import torch
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    worst = 0.0
    with torch.no_grad():
        for doc, expected in zip(docs["docs"], docs["logprobs"]):
            logits = model(torch.tensor([doc[:-1]])).logits[0]
            got = log_probs_of_labels(logits.numpy(), doc)
            worst = max(worst, max(abs(a - b) for a, b in zip(got, expected)))
    result["hf_max_abs_logprob_diff"] = worst
    # The tokenizer files transformers loads: the same ids as causal (BOS, then the text's).
    try:
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(hf_dir, use_fast=bool(docs.get("bytes")))
        mismatches = 0
        for text, doc in zip(docs["texts"], docs["docs"]):
            if tok(text)["input_ids"] != doc[:-1]:
                mismatches += 1
        result["hf_tokenizer_mismatches"] = mismatches
    except Exception as e:  # reported, not hidden: the C++ side decides what it requires
        result["hf_tokenizer_error"] = f"{type(e).__name__}: {e}"


class GgmlGelu:
    """GELU as llama.cpp's CPU backend computes it for gpt2 (ggml_vec_gelu_f32 with GGML_GELU_FP16): the input
    rounded to float16, looked up in a float16 table of the tanh approximation; |x| >= 10 passes through."""

    def __new__(cls):
        import torch

        class Module(torch.nn.Module):
            def forward(self, x):
                h = x.half().float()
                c = math.sqrt(2.0 / math.pi)
                y = (0.5 * h * (1.0 + torch.tanh(c * h * (1.0 + 0.044715 * h * h)))).half().float()
                y = torch.where(x >= 10.0, x, y)
                return torch.where(x <= -10.0, torch.zeros_like(x), y)

        return Module()


def check_ggml_gelu_oracle(hf_dir, docs, llama_logprobs, result):
    """transformers running the HF export with llama.cpp's GELU: what llama.cpp computes if the GGUF file holds
    the right weights in the right layout, so its per-token comparison stays strict."""
    import torch
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32, attn_implementation="eager")
    for block in model.transformer.h:
        block.mlp.act = GgmlGelu()
    model.eval()
    worst, nll, count = 0.0, 0.0, 0
    with torch.no_grad():
        for doc, got in zip(docs["docs"], llama_logprobs):
            logits = model(torch.tensor([doc[:-1]])).logits[0]
            oracle = log_probs_of_labels(logits.numpy(), doc)
            worst = max(worst, max(abs(a - b) for a, b in zip(oracle, got)))
            nll -= sum(oracle)
            count += len(oracle)
    result["llama_vs_ggml_gelu_oracle_max_abs_logprob_diff"] = worst
    result["ggml_gelu_oracle_mean_nll"] = nll / count


def check_gguf(path, docs, result, hf_dir=None):
    from llama_cpp import Llama
    # f32 weights (the export) and an f32 KV cache; logits for every position; the model's own context.
    llm = Llama(model_path=path, n_ctx=0, n_batch=512, n_threads=2, logits_all=True,
                type_k=0, type_v=0, flash_attn=False, verbose=False)
    worst, nll, count, all_logprobs = 0.0, 0.0, 0, []
    for doc, expected in zip(docs["docs"], docs["logprobs"]):
        llm.reset()
        llm.eval(doc[:-1])
        got = log_probs_of_labels(llm.scores[: len(doc) - 1], doc)
        worst = max(worst, max(abs(a - b) for a, b in zip(got, expected)))
        nll -= sum(got)
        count += len(got)
        all_logprobs.append(got)
    if hf_dir and llm.metadata.get("general.architecture") == "gpt2":
        check_ggml_gelu_oracle(hf_dir, docs, all_logprobs, result)
    result["llama_max_abs_logprob_diff"] = worst
    result["llama_mean_nll"] = nll / count
    result["llama_tokens"] = count
    # llama.cpp's tokenizer on the documents' text: BOS, then exactly causal's ids (EOS is not text).
    mismatches = []
    for text, doc in zip(docs["texts"], docs["docs"]):
        ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
        if ids != doc[:-1]:
            mismatches.append({"text": text[:60], "llama": ids[:40], "causal": doc[:40]})
    result["llama_tokenizer_mismatches"] = len(mismatches)
    if mismatches:
        result["llama_tokenizer_first_mismatch"] = mismatches[0]
    # Greedy continuation of the prompt, 40 tokens or up to EOS, through llama.cpp's own KV cache.
    llm.reset()
    tokens = llm.tokenize(docs["prompt"].encode("utf-8"), add_bos=True, special=False)
    llm.eval(tokens)
    generated = []
    for _ in range(40):
        row = llm.scores[llm.n_tokens - 1]
        nxt = int(row.argmax())
        if nxt == llm.token_eos():
            break
        generated.append(nxt)
        llm.eval([nxt])
    result["llama_greedy_ids"] = generated
    result["llama_greedy_hex"] = llm.detokenize(generated).hex()


def make_hf(arch, docs, out):
    import torch
    torch.manual_seed(0)
    if arch in ("llama", "llama-tied"):
        from transformers import LlamaConfig, LlamaForCausalLM
        config = LlamaConfig(vocab_size=259, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                             rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=arch == "llama-tied",
                             bos_token_id=256, eos_token_id=257, pad_token_id=258, initializer_range=0.1)
        model = LlamaForCausalLM(config)
    elif arch == "qwen2":
        from transformers import Qwen2Config, Qwen2ForCausalLM
        config = Qwen2Config(vocab_size=259, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                             rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
                             use_sliding_window=False, bos_token_id=256, eos_token_id=257, pad_token_id=258,
                             initializer_range=0.1)
        model = Qwen2ForCausalLM(config)
    elif arch in ("gpt2", "gpt2-gelu-new"):
        from transformers import GPT2Config, GPT2LMHeadModel
        config = GPT2Config(vocab_size=259, n_positions=256, n_embd=64, n_layer=2, n_head=4,
                            activation_function="gelu" if arch == "gpt2" else "gelu_new", resid_pdrop=0.0,
                            embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5, bos_token_id=256,
                            eos_token_id=257, initializer_range=0.1)
        model = GPT2LMHeadModel(config)
    else:
        raise SystemExit(f"make-hf: unknown --arch {arch}")
    # Every parameter moved off its initial value (norm weights 1, biases 0), so a misplaced one shows.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    model.eval()
    model.save_pretrained(out, safe_serialization=True)
    nll, count, logprobs = 0.0, 0, []
    with torch.no_grad():
        for doc in docs["docs"]:
            logits = model(torch.tensor([doc[:-1]])).logits[0]
            got = log_probs_of_labels(logits.numpy(), doc)
            nll -= sum(got)
            count += len(got)
            logprobs.append(got)
    with open(out + ".loss.json", "w") as f:
        json.dump({"loss": nll / count, "tokens": count, "logprobs": logprobs}, f)


def make_gguf(hf_dir, out):
    """A GGUF file written by gguf-py (llama.cpp's own Python writer) from a transformers Llama, with
    convert_hf_to_gguf.py's q/k permutation, or from a Qwen2, whose q/k rows and biases convert_hf_to_gguf.py
    keeps as they are (llama.cpp's qwen2 rotates halves): a file of another origin for `causal import` (no
    causal.config)."""
    import gguf
    from safetensors.torch import load_file
    with open(hf_dir + "/config.json") as f:
        c = json.load(f)
    w = load_file(hf_dir + "/model.safetensors")
    heads, kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
    arch = c["model_type"]

    def permute(t, n_head):  # transformers' rotate-half rows -> llama.cpp's adjacent pairs, per head
        if arch == "qwen2":
            return t
        return t.reshape(n_head, 2, t.shape[0] // n_head // 2, *t.shape[1:]).swapaxes(1, 2).reshape(t.shape)

    writer = gguf.GGUFWriter(out, arch)
    writer.add_context_length(c["max_position_embeddings"])
    writer.add_embedding_length(c["hidden_size"])
    writer.add_feed_forward_length(c["intermediate_size"])
    writer.add_block_count(c["num_hidden_layers"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(c["hidden_size"] // heads)
    writer.add_rope_freq_base(c["rope_theta"])
    writer.add_layer_norm_rms_eps(c["rms_norm_eps"])
    writer.add_file_type(0)
    writer.add_tensor("token_embd.weight", w["model.embed_tokens.weight"].numpy())
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        writer.add_tensor(f"blk.{i}.attn_norm.weight", w[p + "input_layernorm.weight"].numpy())
        writer.add_tensor(f"blk.{i}.attn_q.weight", permute(w[p + "self_attn.q_proj.weight"], heads).numpy())
        writer.add_tensor(f"blk.{i}.attn_k.weight", permute(w[p + "self_attn.k_proj.weight"], kv_heads).numpy())
        writer.add_tensor(f"blk.{i}.attn_v.weight", w[p + "self_attn.v_proj.weight"].numpy())
        if arch == "qwen2":
            writer.add_tensor(f"blk.{i}.attn_q.bias", w[p + "self_attn.q_proj.bias"].numpy())
            writer.add_tensor(f"blk.{i}.attn_k.bias", w[p + "self_attn.k_proj.bias"].numpy())
            writer.add_tensor(f"blk.{i}.attn_v.bias", w[p + "self_attn.v_proj.bias"].numpy())
        writer.add_tensor(f"blk.{i}.attn_output.weight", w[p + "self_attn.o_proj.weight"].numpy())
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", w[p + "post_attention_layernorm.weight"].numpy())
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", w[p + "mlp.gate_proj.weight"].numpy())
        writer.add_tensor(f"blk.{i}.ffn_up.weight", w[p + "mlp.up_proj.weight"].numpy())
        writer.add_tensor(f"blk.{i}.ffn_down.weight", w[p + "mlp.down_proj.weight"].numpy())
    writer.add_tensor("output_norm.weight", w["model.norm.weight"].numpy())
    if not c.get("tie_word_embeddings"):  # tied: no output tensor, llama.cpp reads token_embd
        writer.add_tensor("output.weight", w["lm_head.weight"].numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["probe", "check", "make-hf", "make-gguf"])
    parser.add_argument("--docs")
    parser.add_argument("--gguf")
    parser.add_argument("--hf")
    parser.add_argument("--arch")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.command == "probe":
        try:
            import llama_cpp  # noqa: F401
            import numpy  # noqa: F401
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except ImportError as e:
            print(f"missing {e.name}")
            return 1
        return 0
    if args.command == "make-gguf":
        make_gguf(args.hf, args.out)
        return 0
    with open(args.docs) as f:
        docs = json.load(f)
    if args.command == "make-hf":
        make_hf(args.arch, docs, args.out)
        return 0
    result = {}
    if args.hf:
        check_hf(args.hf, docs, result)
    if args.gguf:
        check_gguf(args.gguf, docs, result, args.hf)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
