"""Test-only: llama.cpp (llama-cpp-python) on a real pretrained model and on causal's exports of it, for
tests/interop/test_pretrained.cpp, which compares these figures with causal's own. The product never needs
Python.

  pretrained.py score --docs DOCS.json --gguf F.gguf [--lora A.gguf] --out RESULT.json
      per-token log-probabilities of each document (ids given, not re-tokenized), compared with causal's
  pretrained.py chat --prompts PROMPTS.json --gguf F.gguf [--lora A.gguf] --max-tokens N --out RESULT.json
      llama.cpp's greedy answer to each prompt through the chat template in the file
  pretrained.py hf --docs DOCS.json --hf DIR [--peft DIR] --out RESULT.json
      transformers on an HF export (with a PEFT adapter on it): log-probabilities, and the tokenizer's ids
      when DOCS.json has "texts"
--lora loads a GGUF LoRA adapter over the model (llama-cpp-python's lora_path, scale 1).
"""
import argparse
import json
import sys

from consumers import log_probs_of_labels


def load(path, lora=None):
    from llama_cpp import Llama
    # An f32 KV cache and logits for every position; the model's own context; two threads as in the suite.
    kwargs = {"lora_path": lora} if lora else {}
    return Llama(model_path=path, n_ctx=2048, n_batch=512, n_threads=2, logits_all=True,
                 type_k=0, type_v=0, flash_attn=False, verbose=False, **kwargs)


def score(path, docs, lora=None):
    llm = load(path, lora)
    worst, total, nll, count = 0.0, 0.0, 0.0, 0
    for doc, expected in zip(docs["docs"], docs["logprobs"]):
        llm.reset()
        llm.eval(doc[:-1])
        got = log_probs_of_labels(llm.scores[: len(doc) - 1], doc)
        diffs = [abs(a - b) for a, b in zip(got, expected)]
        worst = max(worst, max(diffs))
        total += sum(diffs)
        nll -= sum(got)
        count += len(got)
    causal_nll = -sum(sum(d) for d in docs["logprobs"]) / count
    return {"max_abs_logprob_diff": worst, "mean_abs_logprob_diff": total / count,
            "llama_mean_nll": nll / count, "causal_mean_nll": causal_nll, "tokens": count}


def hf(hf_dir, docs, peft_dir=None):
    """transformers on causal's HF export (with PEFT's adapter): the same log-probabilities, and its
    tokenizer (the exported tokenizer.json) gives the documents' ids after BOS."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32, attn_implementation="eager")
    if peft_dir:
        from peft import PeftModel
        model = PeftModel.from_pretrained(model, peft_dir)
    model.eval()
    worst = 0.0
    with torch.no_grad():
        for doc, expected in zip(docs["docs"], docs["logprobs"]):
            got = log_probs_of_labels(model(torch.tensor([doc[:-1]])).logits[0].numpy(), doc)
            worst = max(worst, max(abs(a - b) for a, b in zip(got, expected)))
    if "texts" not in docs:
        return {"hf_max_abs_logprob_diff": worst}
    tok = AutoTokenizer.from_pretrained(hf_dir)
    mismatches = sum(tok(text, add_special_tokens=False)["input_ids"] != doc[1:-1]
                     for text, doc in zip(docs["texts"], docs["docs"]))
    return {"hf_max_abs_logprob_diff": worst, "hf_tokenizer_mismatches": mismatches}


def chat(path, prompts, max_tokens, lora=None):
    llm = load(path, lora)
    answers = []
    for prompt in prompts:
        messages = ([{"role": "system", "content": prompt["system"]}] if prompt.get("system") else []) + [
            {"role": "user", "content": prompt["user"]}]
        # Greedy: temperature 0 picks the argmax; no repetition penalty, nothing else reshapes the logits.
        out = llm.create_chat_completion(messages=messages, temperature=0.0, top_k=1, top_p=1.0, min_p=0.0,
                                         repeat_penalty=1.0, max_tokens=max_tokens, seed=0)
        answers.append(out["choices"][0]["message"]["content"])
    return {"answers": answers}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["probe", "score", "chat", "hf"])
    parser.add_argument("--hf")
    parser.add_argument("--docs")
    parser.add_argument("--prompts")
    parser.add_argument("--gguf")
    parser.add_argument("--lora")
    parser.add_argument("--peft")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.command == "probe":
        try:
            import llama_cpp  # noqa: F401
            import numpy  # noqa: F401
            import peft  # noqa: F401
            import transformers  # noqa: F401
        except ImportError as e:
            print(f"missing {e.name}")
            return 1
        return 0
    if args.command == "score":
        with open(args.docs) as f:
            result = score(args.gguf, json.load(f), args.lora)
    elif args.command == "hf":
        with open(args.docs) as f:
            result = hf(args.hf, json.load(f), args.peft)
    else:
        with open(args.prompts) as f:
            result = chat(args.gguf, json.load(f), args.max_tokens, args.lora)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
