#!/usr/bin/env python3
"""Runs the retrieval studies of docs/retrieval-lab.md#studies with plain `causal train` / `causal eval`
loops and prints their tables (mean +- std over seeds) as Markdown.

Usage: tools/retrieval_studies.py [--causal build/causal] [--seeds 1,2,3] [--out runs/studies]
                                  [--only query-only,position,rope-scaling,difficulty]
Every figure is read from results.json or eval/*.json; nothing is tuned on the test split (every
setting is fixed in configs/ before the run). The std is the sample standard deviation (n - 1).
"""
import argparse
import json
import math
import pathlib
import subprocess
import sys


def run(causal, args):
    proc = subprocess.run([causal] + args, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"causal {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def train(causal, config, run_dir, sets):
    if not (run_dir / "results.json").exists():
        args = ["train", "--config", config, "--run-dir", str(run_dir)]
        for s in sets:
            args += ["--set", s]
        run(causal, args)
    return json.loads((run_dir / "results.json").read_text())


def newest_eval(run_dir, marker):
    files = sorted((run_dir / "eval").glob(f"*{marker}*.json"), key=lambda p: p.stat().st_mtime)
    return json.loads(files[-1].read_text())


def stats(values):
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return f"{mean:.3f} +- {std:.3f}"


def query_only(causal, seeds, out):
    rows = {"full model": [], "no-context ablation of the full model": [], "trained query-only model": []}
    for seed in seeds:
        full = train(causal, "configs/retrieval.json", out / f"full-s{seed}", [f"seed={seed}"])
        only = train(causal, "configs/retrieval.json", out / f"query-only-s{seed}",
                     [f"seed={seed}", "data.query_only=true"])
        rows["full model"].append(full["test_accuracy"])
        rows["no-context ablation of the full model"].append(full["no_context_accuracy"])
        rows["trained query-only model"].append(only["test_accuracy"])
    print(f"\n### Query-only vs no-context vs full model (test accuracy, seeds {seeds}; chance 0.125)\n")
    print("| model | test accuracy |\n| --- | --- |")
    for name, values in rows.items():
        print(f"| {name} | {stats(values)} |")


def position(causal, seeds, out):
    print(f"\n### Position on data.query \"latest\" (seeds {seeds})\n")
    print("| model.position | test accuracy | validation accuracy | intervention accuracy |")
    print("| --- | --- | --- | --- |")
    for kind in ["none", "learned", "rope"]:
        results = [train(causal, "configs/retrieval.json", out / f"latest-{kind}-s{seed}",
                         [f"seed={seed}", "data.query=latest", f"model.position={kind}"]) for seed in seeds]
        print(f"| {kind} | {stats([r['test_accuracy'] for r in results])} | "
              f"{stats([r['val_accuracy'] for r in results])} | "
              f"{stats([r['intervention_accuracy'] for r in results])} |")


def rope_scaling(causal, seeds, out, lengths=(4, 8, 16, 32), factor=4):
    scalings = ["none", "linear", "ntk", "yarn"]
    table = {s: {n: [] for n in lengths} for s in scalings}
    for seed in seeds:
        run_dir = out / f"rope-s{seed}"
        train(causal, "configs/retrieval-rope-scaling.json", run_dir, [f"seed={seed}"])
        for scaling in scalings:
            args = ["eval", "--run", str(run_dir), "--set", "data.distractors=0", "--set",
                    f"model.max_seq_len={max(lengths) + 1}", "--set", f"model.rope.scaling={scaling}",
                    "--lengths", ",".join(map(str, lengths))]
            if scaling != "none":
                args += ["--set", f"model.rope.factor={factor}"]
            text = run(causal, args)
            written = text.strip().splitlines()[-1].split("written to ")[-1]
            by_pairs = json.loads(pathlib.Path(written).read_text())["by_pairs"]
            for n in lengths:
                table[scaling][n].append(by_pairs[str(n)]["accuracy"])
    print(f"\n### Accuracy vs context length per RoPE scaling (factor {factor}; trained on 4..8 records; "
          f"seeds {seeds}; test split of each length)\n")
    print("| scaling | " + " | ".join(f"{n} records" for n in lengths) + " |")
    print("| --- |" + " --- |" * len(lengths))
    for scaling in scalings:
        print(f"| {scaling} | " + " | ".join(stats(table[scaling][n]) for n in lengths) + " |")


def difficulty(causal, seeds, out, lengths=(4, 8, 16, 32), distractors=(0, 1, 3, 7), depths=(0, 0.5, 1),
               config="configs/retrieval.json", prefix="full", trained="4 records"):
    cells = {}
    for seed in seeds:
        run_dir = out / f"{prefix}-s{seed}"
        train(causal, config, run_dir, [f"seed={seed}"])
        run(causal, ["eval", "--run", str(run_dir), "--difficulty", "--set", f"model.max_seq_len={max(lengths) + 1}",
                     "--lengths", ",".join(map(str, lengths)), "--distractors", ",".join(map(str, distractors)),
                     "--depths", ",".join(map(str, depths)), "--rows", "256"])
        grid = newest_eval(run_dir, "difficulty")
        for c in grid["cells"]:
            cells.setdefault((c["length"], c["distractors"]), {}).setdefault(c["evidence"], []).append(c["accuracy"])
    print(f"\n### Difficulty grid ({config}, trained on {trained}; 256 rows per cell; seeds {seeds})\n")
    for length in lengths:
        evidence = sorted({e for (l, _), by_e in cells.items() if l == length for e in by_e})
        print(f"\nlength {length} records\n")
        print("| distractors | " + " | ".join(f"evidence {e}" for e in evidence) + " |")
        print("| --- |" + " --- |" * len(evidence))
        for d in distractors:
            if (length, d) not in cells:
                continue
            by_e = cells[(length, d)]
            print(f"| {d} | " + " | ".join(stats(by_e[e]) if e in by_e else "-" for e in evidence) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--causal", default="build/causal")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--out", default="runs/studies")
    parser.add_argument("--only", default="query-only,position,rope-scaling,difficulty")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    out = pathlib.Path(args.out)
    studies = {"query-only": query_only, "position": position, "rope-scaling": rope_scaling,
               "difficulty": difficulty,
               # The same grid for the RoPE model of the scaling study (40 keys: up to 15 distractors).
               "difficulty-rope": lambda c, s, o: difficulty(
                   c, s, o, distractors=(0, 1, 3, 7, 15), config="configs/retrieval-rope-scaling.json",
                   prefix="rope", trained="4..8 records")}
    for name in args.only.split(","):
        studies[name](args.causal, seeds, out)


if __name__ == "__main__":
    main()
