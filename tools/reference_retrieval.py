#!/usr/bin/env python3
"""The retrieval lab (docs/retrieval-lab.md) in plain PyTorch, timed, as an independent
reference for `causal train --config configs/retrieval.json`.

Usage: tools/reference_retrieval.py [--seed 12] [--compile] [--json]
Runs on whichever torch the interpreter imports: Debian's python3-torch (1.13) from /usr/bin/python3, or the
pinned wheel with PYTHONPATH set to its site folder (docs/libtorch.md). --compile (torch 2.x) trains
torch.compile of the model; compile_seconds is the first step, which compiles.
"""
import argparse
import json
import time

import torch
from torch import nn


def make_examples(count, generator, key_count, value_count, pairs, excluded=None):
    seen = set() if excluded is None else set(excluded)
    keys, values, answers = [], [], []
    while len(keys) < count:
        context_keys = torch.randperm(key_count, generator=generator)[:pairs]
        context_values = torch.randint(value_count, (pairs,), generator=generator)
        chosen = int(torch.randint(pairs, (), generator=generator))
        key_row = torch.cat((context_keys, context_keys[chosen:chosen + 1]))
        value_row = torch.cat((context_values, torch.tensor([value_count])))
        signature = tuple(key_row.tolist() + value_row.tolist())
        if signature in seen:
            continue
        seen.add(signature)
        keys.append(key_row)
        values.append(value_row)
        answers.append(int(context_values[chosen]))
    return torch.stack(keys), torch.stack(values), torch.tensor(answers), seen


class Retriever(nn.Module):
    def __init__(self, key_count, value_count, width):
        super().__init__()
        self.key = nn.Embedding(key_count, width)
        self.value = nn.Embedding(value_count + 1, width)
        self.layer = nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=64, dropout=0.0,
                                                batch_first=True, norm_first=True)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, value_count)

    def forward(self, keys, values):
        x = self.key(keys) + self.value(values)
        blocked = torch.ones(keys.shape[1], keys.shape[1], dtype=torch.bool).triu(1)
        return self.head(self.norm(self.layer(x, src_mask=blocked)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--compile", action="store_true", help="train torch.compile of the model (torch 2.x)")
    parser.add_argument("--json", action="store_true", help="print results as one JSON object")
    args = parser.parse_args()

    start = time.perf_counter()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    key_count, value_count, pairs, width = 8, 8, 4, 32
    train_keys, train_values, train_y, train_rows = make_examples(
        2048, torch.Generator().manual_seed(120), key_count, value_count, pairs)
    test_keys, test_values, test_y, all_rows = make_examples(
        384, torch.Generator().manual_seed(121), key_count, value_count, pairs, train_rows)
    assert len(all_rows) == len(train_rows) + len(test_y)

    model = Retriever(key_count, value_count, width)
    forward = torch.compile(model) if args.compile else model
    compile_seconds = 0.0
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.005, weight_decay=0.01)
    loss_fn = nn.CrossEntropyLoss()
    sampler = torch.Generator().manual_seed(122)
    initial = loss_fn(model(train_keys[:128], train_values[:128])[:, -1], train_y[:128]).item()
    train_start = time.perf_counter()
    for step in range(320):
        step_start = time.perf_counter()
        ids = torch.randint(len(train_y), (64,), generator=sampler)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(forward(train_keys[ids], train_values[ids])[:, -1], train_y[ids])
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step == 0 and args.compile:
            compile_seconds = time.perf_counter() - step_start
    train_seconds = time.perf_counter() - train_start
    model.eval()
    with torch.no_grad():
        logits = model(test_keys, test_values)
        test_loss = loss_fn(logits[:, -1], test_y).item()
        accuracy = (logits[:, -1].argmax(-1) == test_y).float().mean().item()
        no_context = model(test_keys[:, -1:], test_values[:, -1:])[:, -1]
        no_context_accuracy = (no_context.argmax(-1) == test_y).float().mean().item()
        matched = (test_keys[:, :pairs] == test_keys[:, -1:]).long().argmax(-1)
        changed = test_values.clone()
        changed_answers = (test_y + 1) % value_count
        changed[torch.arange(len(test_y)), matched] = changed_answers
        revised = model(test_keys, changed)[:, -1].argmax(-1)
        intervention_accuracy = (revised == changed_answers).float().mean().item()
    results = {"initial_loss": initial, "test_loss": test_loss, "test_accuracy": accuracy,
               "no_context_accuracy": no_context_accuracy, "intervention_accuracy": intervention_accuracy,
               "train_seconds": train_seconds, "compile_seconds": compile_seconds,
               "total_seconds": time.perf_counter() - start}
    print(json.dumps(results) if args.json else "\n".join(f"{k:24s} {v:.6g}" for k, v in results.items()))


if __name__ == "__main__":
    main()
