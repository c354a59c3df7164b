"""Test-only: the references `causal eval --tasks` is compared with. Driven by tests/interop/test_benchmarks.cpp,
which checks the figures written here against causal's. The product never needs Python.

  benchmarks.py probe
  benchmarks.py lm-eval --hf DIR --tasks F.jsonl --layout generic|hellaswag --work DIR --out RESULT.json
      [--slow-tokenizer]   lm-eval-harness (simple_evaluate, HFLM with add_bos_token=True) on an HF folder,
                           through a task YAML written into --work over the same JSONL; hellaswag layout files
                           go through lm-eval's own hellaswag process_docs
  benchmarks.py transformers --hf DIR --tasks F.jsonl --out RESULT.json
                           a plain scoring loop: transformers' model, the folder's tokenizer (HF tokenizers),
                           lm-eval's pair encoding written out here, each pair run alone in float64 sums
  benchmarks.py make-hf --brown DIR --out DIR
                           a random Llama with a byte-level BPE tokenizer that HF tokenizers trains on DIR
  benchmarks.py hellaswag --tasks F.jsonl --out H.jsonl
                           the generic items rewritten in HellaSwag's layout, with the bracket artifacts
                           lm-eval's preprocess removes

RESULT.json: {"acc", "acc_norm", "items": [{"logprobs": [...], "pred", "pred_norm"}, ...]} in file order.
"""
import argparse
import glob
import json
import os
import sys


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def figures(items, answers):
    """acc and acc_norm as lm-eval's process_results computes them (np.argmax: the first on a tie)."""
    import numpy as np
    out = {"items": [], "acc": 0.0, "acc_norm": 0.0}
    for (lls, choices), answer in zip(items, answers):
        lengths = np.array([float(len(c)) for c in choices])
        pred, pred_norm = int(np.argmax(lls)), int(np.argmax(np.array(lls) / lengths))
        out["items"].append({"logprobs": list(lls), "pred": pred, "pred_norm": pred_norm})
        out["acc"] += pred == answer
        out["acc_norm"] += pred_norm == answer
    out["acc"] /= len(answers)
    out["acc_norm"] /= len(answers)
    return out


TASK_YAML = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {path}
test_split: test
output_type: multiple_choice
{body}
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
"""
GENERIC = 'doc_to_text: context\ndoc_to_choice: choices\ndoc_to_target: answer\ntarget_delimiter: " "'
# lm-eval's hellaswag.yaml, its process_docs included.
HELLASWAG = ('process_docs: !function utils.process_docs\ndoc_to_text: "{{query}}"\ndoc_to_target: "{{label}}"\n'
             'doc_to_choice: "choices"')


def run_lm_eval(args):
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager
    os.makedirs(args.work, exist_ok=True)
    name = "causal_" + os.path.splitext(os.path.basename(args.tasks))[0].replace("-", "_")
    body = GENERIC if args.layout == "generic" else HELLASWAG
    with open(os.path.join(args.work, name + ".yaml"), "w") as f:
        f.write(TASK_YAML.format(name=name, path=os.path.abspath(args.tasks), body=body))
    if args.layout == "hellaswag":
        with open(os.path.join(args.work, "utils.py"), "w") as f:
            f.write("from lm_eval.tasks.hellaswag.utils import process_docs  # noqa: F401\n")
    model = HFLM(pretrained=args.hf, device="cpu", dtype="float32", batch_size=16, add_bos_token=True,
                 use_fast_tokenizer=not args.slow_tokenizer)
    results = lm_eval.simple_evaluate(model=model, tasks=[name], num_fewshot=0, log_samples=True,
                                      bootstrap_iters=0, task_manager=TaskManager(include_path=args.work))
    samples = sorted(results["samples"][name], key=lambda s: s["doc_id"])
    docs = read_jsonl(args.tasks)
    items, answers = [], []
    for sample in samples:
        lls = [float(resp[0][0]) for resp in sample["resps"]]
        # The choices as lm-eval measured them: its doc after process_docs (hellaswag: preprocessed endings).
        items.append((lls, sample["doc"]["choices"]))
        answers.append(int(sample["target"]))
    out = figures(items, answers)
    out["lm_eval_acc"] = results["results"][name]["acc,none"]
    out["lm_eval_acc_norm"] = results["results"][name]["acc_norm,none"]
    out["lm_eval_max_length"] = model.max_length
    out["documents"] = len(docs)
    with open(args.out, "w") as f:
        json.dump(out, f)


def python_rstrip_pair(context, continuation):
    """lm-eval's _encode_pair: the context's trailing whitespace (str.isspace) joins the continuation."""
    kept = context.rstrip()
    return kept, context[len(kept):] + continuation


def run_transformers(args):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(args.hf, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    tok = AutoTokenizer.from_pretrained(args.hf)
    bos = tok.bos_token_id
    window = model.config.max_position_embeddings
    items, answers = [], []
    with torch.no_grad():
        for doc in read_jsonl(args.tasks):
            lls = []
            for choice in doc["choices"]:
                context, continuation = python_rstrip_pair(doc["context"], " " + choice)
                ctx = [bos] + tok.encode(context, add_special_tokens=False)
                whole = [bos] + tok.encode(context + continuation, add_special_tokens=False)
                cont = whole[len(ctx):]
                ids = (ctx + cont)[-(window + 1):]
                logits = model(torch.tensor([ids[:-1]])).logits[0].to(torch.float64)
                logp = torch.log_softmax(logits, dim=-1)
                scored = logp[len(ids) - 1 - len(cont):]
                lls.append(float(sum(scored[j, t] for j, t in enumerate(cont))))
            items.append((lls, doc["choices"]))
            answers.append(doc["answer"])
    with open(args.out, "w") as f:
        json.dump(figures(items, answers), f)


def make_hf(args):
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train(sorted(glob.glob(os.path.join(args.brown, "*.txt"))), trainer)
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=176,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=10000.0,
                         tie_word_embeddings=False, bos_token_id=wrapped.bos_token_id,
                         eos_token_id=wrapped.eos_token_id, initializer_range=0.2)
    model = LlamaForCausalLM(config)
    model.eval()
    model.save_pretrained(args.out, safe_serialization=True)
    wrapped.save_pretrained(args.out)


def make_hellaswag(args):
    """Generic items as HellaSwag lines: the context split into ctx_a and a lower-cased ctx_b (capitalize()
    restores it), an activity label, and "[header]"/" [title]" artifacts that preprocess turns back."""
    out = []
    for i, doc in enumerate(read_jsonl(args.tasks)):
        context = doc["context"]
        cut = context.find(" ", len(context) // 2)
        ctx_a, ctx_b = (context, "") if cut < 0 else (context[:cut], context[cut + 1:])
        ctx_b = ctx_b[:1].lower() + ctx_b[1:]
        endings = [c + (" [step] " if j == i % 4 else "") for j, c in enumerate(doc["choices"])]
        if i % 3 == 0:
            endings = [e.replace(". ", " [title] ", 1) for e in endings]
        out.append({"ind": i, "activity_label": f"Item {i} [header]", "ctx_a": ctx_a, "ctx_b": ctx_b,
                    "ctx": ctx_a + " " + ctx_b, "endings": endings, "label": str(doc["answer"]),
                    "split": "val", "source_id": doc.get("id", "")})
    with open(args.out, "w", encoding="utf-8") as f:
        for line in out:
            f.write(json.dumps(line) + "\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["probe", "lm-eval", "transformers", "make-hf", "hellaswag"])
    parser.add_argument("--hf")
    parser.add_argument("--tasks")
    parser.add_argument("--layout", default="generic", choices=["generic", "hellaswag"])
    parser.add_argument("--work")
    parser.add_argument("--brown")
    parser.add_argument("--slow-tokenizer", action="store_true")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.command == "probe":
        try:
            import lm_eval  # noqa: F401
            import tokenizers  # noqa: F401
            import torch  # noqa: F401
            import transformers  # noqa: F401
            from lm_eval.models.huggingface import HFLM  # noqa: F401
        except ImportError as e:
            print(f"missing {e.name}")
            return 1
        return 0
    {"lm-eval": run_lm_eval, "transformers": run_transformers, "make-hf": make_hf,
     "hellaswag": make_hellaswag}[args.command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
