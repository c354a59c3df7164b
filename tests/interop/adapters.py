"""LoRA adapters written by causal, loaded by their real consumers, and adapters PEFT creates for causal to
import (test-only; driven by tests/interop/test_adapter_export.cpp and test_peft_import.cpp, which compare
the numbers):
  adapters.py probe                                       (exit 0 when llama_cpp, peft and transformers import)
  adapters.py llama --base B.gguf --lora A.gguf --merged M.gguf --tokens T.json --out R.json
  adapters.py peft --base DIR --adapter DIR --merged DIR --tokens T.json --out R.json
  adapters.py peft-create --base DIR --out DIR --targets q_proj,v_proj --r 4 --alpha 8 [--rslora] --seed S
                          --tokens T.json --result R.json
llama and peft write {"base": [...], "adapted": [...], "merged": [...]}, peft-create {"base": [...],
"adapted": [...]} after saving its adapter (random A and B, so that B is not PEFT's zero init) with
save_pretrained: per sequence, the log-probabilities of tokens[1:] given tokens[:-1], in float64.
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


def peft_create(args, seqs):
    import torch
    from peft import LoraConfig, get_peft_model
    base = load_hf(args.base)
    result = {"base": hf_logprobs(base, seqs)}
    config = LoraConfig(r=args.r, lora_alpha=args.alpha, target_modules=args.targets.split(","),
                        use_rslora=args.rslora, use_dora=args.dora, lora_dropout=0.0, task_type="CAUSAL_LM")
    model = get_peft_model(base, config)
    generator = torch.Generator().manual_seed(args.seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_magnitude_vector" in name:  # DoRA: the base's row norms, each moved by about 20%
                p.mul_(1 + 0.2 * torch.randn(p.shape, generator=generator))
            elif "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.3)
    model.eval()
    result["adapted"] = hf_logprobs(model, seqs)
    model.save_pretrained(args.out)
    return result


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["probe", "llama", "peft", "peft-create"])
    p.add_argument("--base")
    p.add_argument("--lora")
    p.add_argument("--adapter")
    p.add_argument("--merged")
    p.add_argument("--tokens")
    p.add_argument("--out")
    p.add_argument("--targets")
    p.add_argument("--r", type=int)
    p.add_argument("--alpha", type=float)
    p.add_argument("--rslora", action="store_true")
    p.add_argument("--dora", action="store_true")
    p.add_argument("--seed", type=int)
    p.add_argument("--result")
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
    if args.command == "peft-create":
        json.dump(peft_create(args, seqs), open(args.result, "w"))
        return 0
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
