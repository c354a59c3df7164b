"""LoRA adapters written by causal, loaded by their real consumers (test-only; driven by
tests/interop/test_adapter_export.cpp, which compares the numbers):
  adapters.py probe                                       (exit 0 when llama_cpp, peft and transformers import)
  adapters.py llama --base B.gguf --lora A.gguf --merged M.gguf --tokens T.json --out R.json
  adapters.py peft --base DIR --adapter DIR --merged DIR --tokens T.json --out R.json
Each writes {"base": [...], "adapted": [...], "merged": [...]}: per sequence, the log-probabilities of
tokens[1:] given tokens[:-1], in float64.
"""
import argparse
import json
import sys


def log_probs_of_labels(logits, ids):
    import numpy as np
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=1))
    labels = np.asarray(ids[1:])
    return (z[np.arange(len(labels)), labels] - lse).tolist()


def llama_logprobs(model_path, seqs, lora_path=None):
    from llama_cpp import Llama
    kwargs = {"lora_path": lora_path} if lora_path else {}
    llm = Llama(model_path=model_path, n_ctx=0, n_batch=512, n_threads=2, logits_all=True, type_k=0, type_v=0,
                flash_attn=False, verbose=False, **kwargs)
    out = []
    for seq in seqs:
        llm.reset()
        llm.eval(seq[:-1])
        out.append(log_probs_of_labels(llm.scores[: len(seq) - 1], seq))
    return out


def hf_logprobs(model, seqs):
    import torch
    out = []
    with torch.no_grad():
        for seq in seqs:
            logits = model(torch.tensor([seq[:-1]])).logits[0]
            out.append(log_probs_of_labels(logits.numpy(), seq))
    return out


def load_hf(path):
    import torch
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    return model


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["probe", "llama", "peft"])
    p.add_argument("--base")
    p.add_argument("--lora")
    p.add_argument("--adapter")
    p.add_argument("--merged")
    p.add_argument("--tokens")
    p.add_argument("--out")
    args = p.parse_args()
    if args.command == "probe":
        try:
            import llama_cpp  # noqa: F401
            import numpy  # noqa: F401
            import peft  # noqa: F401
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except Exception as e:
            print(f"{type(e).__name__}: {e}")
            return 1
        return 0
    seqs = json.load(open(args.tokens))
    result = {}
    if args.command == "llama":
        result["base"] = llama_logprobs(args.base, seqs)
        result["adapted"] = llama_logprobs(args.base, seqs, lora_path=args.lora)
        result["merged"] = llama_logprobs(args.merged, seqs)
    else:
        from peft import PeftModel
        result["base"] = hf_logprobs(load_hf(args.base), seqs)
        adapted = PeftModel.from_pretrained(load_hf(args.base), args.adapter)
        adapted.eval()
        result["adapted"] = hf_logprobs(adapted, seqs)
        result["merged"] = hf_logprobs(load_hf(args.merged), seqs)
    json.dump(result, open(args.out, "w"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
