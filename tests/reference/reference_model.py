#!/usr/bin/env python3
"""Independent float64 PyTorch re-implementation of causal's model forward pass, used to check the
logits and loss that causal's C++ code computes (docs/model.md describes the architecture).

Usage:
  tests/reference/reference_model.py --config CONFIG.json --weights model.safetensors --batch batch.safetensors
  tests/reference/reference_model.py --checkpoint DIR --batch batch.safetensors   (DIR/{config.json,model.safetensors})
  options: --tol 1e-5 (max allowed |logit diff| and |loss diff|), --json (print a JSON object instead)

The config is causal's resolved run config (a run folder's config.json, or `causal train --config F
--print-config`), every field present and the derived ones filled in: defaults are causal's to apply, never
this script's. Only its "model" section is used. The weights file must hold
exactly the model's parameters (named as in docs/model.md). The batch file holds `tokens` (B,T,F) or (B,T)
int64 and optionally `positions`, `segment_ids` (B,T) int64, `key_valid` (B,T) bool, `labels` (B,T) int64
(-100 = ignored), and causal's results `logits` (B,T,V) and `loss` (mean cross-entropy over labels != -100).
Everything is computed in float64, in evaluation mode (no dropout).

Prints `parity max_abs_logit_diff=.. loss_ref=.. loss_causal=.. loss_diff=..` (fields whose inputs are absent
are left out). Exit code 0: within --tol; 1: a difference exceeds --tol; 2: bad input (one-line message).
Needs only torch (Debian's python3-torch: run with /usr/bin/python3 if another python3 comes first on PATH).
"""
import argparse
import json
import math
import os
import struct
import sys
from types import SimpleNamespace

import torch

IGNORE_LABEL = -100
DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}
# The fields of a resolved model section and their JSON types (src/config/config.h ModelConfig, RopeConfig):
# each must be present, and a field this reference does not know is refused, since it might change the
# forward pass. The kernel and autocast choices change how causal computes, not what: this reference always
# computes in float64.
MODEL_FIELDS = {"inputs": list, "output_vocab": int, "d_model": int, "n_layers": int, "n_heads": int,
                "n_kv_heads": int, "ffn": str, "ffn_hidden": int, "ffn_multiple_of": int, "norm": str,
                "norm_eps": float, "position": str, "max_seq_len": int, "rope": dict, "attention": str,
                "attention_block": int, "attention_window": int, "autocast": str, "kernels": str, "weight_shadows": str, "qk_norm": bool, "bias": bool, "qkv_bias": bool,
                "tie_embeddings": bool,
                "dropout": float, "init_std": float}
ROPE_FIELDS = {"theta": float, "pairing": str, "scaling": str, "factor": float, "original_max_seq_len": int,
               "beta_fast": float, "beta_slow": float}
INPUT_FIELDS = {"name": str, "vocab": int}
RESOLVED_HINT = "expected causal's resolved config (a run folder's config.json, or causal train --print-config)"
ENUMS = {"ffn": ("gelu", "gelu_tanh", "swiglu", "relu"), "norm": ("layernorm", "rmsnorm"), "position": ("none", "learned", "rope"),
         "attention": ("reference", "sdpa", "flash", "query_blocks"), "autocast": ("off", "bf16"), "kernels": ("auto", "aten"), "weight_shadows": ("auto", "on", "off"), "pairing": ("interleaved", "halves"),
         "scaling": ("none", "linear", "ntk", "yarn")}
BATCH_NAMES = ("tokens", "positions", "segment_ids", "key_valid", "labels", "logits", "loss")


class InputError(Exception):
    """Bad input: reported as one line, exit code 2."""


# ---------------------------------------------------------------------------------------------- input files
def read_safetensors(path):
    """{name: tensor} from a standard safetensors file (the optional __metadata__ entry is skipped)."""
    try:
        with open(path, "rb") as f:
            data = bytearray(f.read())
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})")
    if len(data) < 8 or struct.unpack("<Q", data[:8])[0] > len(data) - 8:
        raise InputError(f"{path}: not a safetensors file (bad header length)")
    length = struct.unpack("<Q", data[:8])[0]
    try:
        header = json.loads(data[8:8 + length].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise InputError(f"{path}: safetensors header is not JSON")
    if not isinstance(header, dict):
        raise InputError(f"{path}: safetensors header is not a JSON object")
    body = memoryview(data)[8 + length:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape = DTYPES[entry["dtype"]], [int(d) for d in entry["shape"]]
            begin, end = (int(o) for o in entry["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{path}: tensor '{name}' has a malformed or unknown-dtype header entry")
        nbytes = math.prod(shape) * torch.empty(0, dtype=dtype).element_size()
        if min(shape, default=0) < 0 or not 0 <= begin <= end <= len(body) or end - begin != nbytes:
            raise InputError(f"{path}: tensor '{name}' byte range [{begin},{end}) does not hold {shape}")
        flat = torch.frombuffer(body[begin:end], dtype=dtype) if nbytes else torch.empty(0, dtype=dtype)
        tensors[name] = flat.clone().reshape(shape)
    return tensors


def read_section(given, fields, where):
    """`given` checked against `fields`: every key present, none unknown, JSON types and enum spellings."""
    if not isinstance(given, dict):
        raise InputError(f"config: {where}: expected an object")
    missing = [key for key in fields if key not in given]
    if missing:
        raise InputError(f"config: {where}: missing {', '.join(missing)}; {RESOLVED_HINT}")
    for key, value in given.items():
        if key not in fields:
            raise InputError(f"config: {where}.{key}: unknown key")
        kind = fields[key]
        if kind is bool or isinstance(value, bool):
            ok = kind is bool and isinstance(value, bool)
        else:  # float fields accept JSON integers; integer fields do not accept 3.0 (as causal's reader)
            ok = isinstance(value, (int, float) if kind is float else kind)
        if not ok:
            raise InputError(f"config: {where}.{key}: expected a {kind.__name__}, got {value!r}")
        if key in ENUMS and value not in ENUMS[key]:
            raise InputError(f"config: {where}.{key}: expected one of {'|'.join(ENUMS[key])}, got {value!r}")
    return dict(given)


def load_model_config(path):
    """The resolved model section as a namespace."""
    try:
        with open(path) as f:
            top = json.load(f)
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})")
    except ValueError as e:
        raise InputError(f"{path}: not JSON ({e})")
    if not isinstance(top, dict):
        raise InputError(f"{path}: expected a JSON object")
    m = SimpleNamespace(**read_section(top.get("model"), MODEL_FIELDS, "model"))
    m.rope = SimpleNamespace(**read_section(m.rope, ROPE_FIELDS, "model.rope"))
    names = []
    for i, field in enumerate(m.inputs):
        field = read_section(field, INPUT_FIELDS, f"model.inputs[{i}]")
        if not field["name"] or "." in field["name"] or field["name"] in names or field["vocab"] < 1:
            raise InputError(f"config: model.inputs[{i}]: bad or duplicate field {field}")
        names.append(field["name"])
        m.inputs[i] = SimpleNamespace(**field)
    if not m.inputs or min(m.d_model, m.n_layers, m.n_heads, m.output_vocab, m.max_seq_len) < 1:
        raise InputError("config: model: inputs, d_model, n_layers, n_heads, output_vocab, max_seq_len "
                         "must be >= 1")
    # causal fills these in when it resolves a config (0 = derive): 0 here means it was not resolved.
    if min(m.n_kv_heads, m.ffn_hidden, m.rope.original_max_seq_len) < 1:
        raise InputError(f"config: model.n_kv_heads, ffn_hidden and rope.original_max_seq_len must be >= 1; "
                         f"{RESOLVED_HINT}")
    if m.d_model % m.n_heads or m.n_heads % m.n_kv_heads:
        raise InputError(f"config: model: need n_kv_heads | n_heads | d_model, got {m.n_kv_heads}, "
                         f"{m.n_heads}, {m.d_model}")
    m.dk = m.d_model // m.n_heads
    if m.position == "rope" and m.dk % 2:
        raise InputError(f"config: model.position: rope needs an even head dim, got {m.dk}")
    if m.tie_embeddings and (len(m.inputs) != 1 or m.inputs[0].vocab != m.output_vocab):
        raise InputError("config: model.tie_embeddings: needs one input field with vocab == output_vocab")
    return m


def expected_parameters(m):
    """{name: shape} of every parameter causal's Transformer registers for this config."""
    d, dk, h, kv = m.d_model, m.dk, m.ffn_hidden, m.n_kv_heads * m.dk
    shapes = {f"embed.{f.name}.weight": (f.vocab, d) for f in m.inputs}
    if m.position == "learned":
        shapes["pos_embed.weight"] = (m.max_seq_len, d)

    def linear(name, n_in, n_out, bias=None):
        shapes[f"{name}.weight"] = (n_out, n_in)
        if m.bias if bias is None else bias:
            shapes[f"{name}.bias"] = (n_out,)

    def norm(name):
        shapes[f"{name}.weight"] = (d,)
        if m.norm == "layernorm" and m.bias:
            shapes[f"{name}.bias"] = (d,)

    for i in range(m.n_layers):
        p = f"blocks.{i}."
        norm(p + "attn_norm")
        qkv_bias = m.bias or m.qkv_bias  # qkv_bias: q, k and v have biases without model.bias (Qwen2)
        linear(p + "attn.q_proj", d, m.n_heads * dk, qkv_bias)
        linear(p + "attn.k_proj", d, kv, qkv_bias)
        linear(p + "attn.v_proj", d, kv, qkv_bias)
        if m.qk_norm:
            shapes[p + "attn.q_norm.weight"] = shapes[p + "attn.k_norm.weight"] = (dk,)
        linear(p + "attn.o_proj", m.n_heads * dk, d)
        norm(p + "ffn_norm")
        for name, n_in, n_out in ([("fc_in", d, h), ("fc_out", h, d)] if m.ffn != "swiglu" else
                                  [("gate_proj", d, h), ("up_proj", d, h), ("down_proj", h, d)]):
            linear(p + "ffn." + name, n_in, n_out)
    norm("final_norm")
    if not m.tie_embeddings:
        linear("head", d, m.output_vocab)
    return shapes


class Weights:
    """The weights file as float64 tensors; take() hands each one out exactly once."""

    def __init__(self, path, m):
        tensors, expected = read_safetensors(path), expected_parameters(m)
        missing = [n for n in expected if n not in tensors]
        unknown = [n for n in tensors if n not in expected]
        wrong = [f"{n} {tuple(t.shape)} (expected {expected[n]})" for n, t in tensors.items()
                 if n in expected and tuple(t.shape) != expected[n]]
        wrong += [f"{n} has dtype {t.dtype}" for n, t in tensors.items() if not t.dtype.is_floating_point]
        if missing or unknown or wrong:
            raise InputError(f"{path}: weights do not match the config: missing {missing or 'none'}; "
                             f"unknown/unused {unknown or 'none'}; bad {wrong or 'none'}")
        self.tensors = {n: t.double() for n, t in tensors.items()}

    def take(self, name):
        return self.tensors.pop(name)


# ---------------------------------------------------------------------------------------------- the model
def linear(x, W, name, bias):
    y = x @ W.take(name + ".weight").T
    return y + W.take(name + ".bias") if bias else y


def rms_norm(x, weight, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * weight


def norm(x, W, name, m):
    """model.norm over the last dim: RMSNorm (never a bias) or LayerNorm (biased variance, bias if m.bias)."""
    if m.norm == "rmsnorm":
        return rms_norm(x, W.take(name + ".weight"), m.norm_eps)
    centred = x - x.mean(-1, keepdim=True)
    y = centred / torch.sqrt((centred * centred).mean(-1, keepdim=True) + m.norm_eps)
    y = y * W.take(name + ".weight")
    return y + W.take(name + ".bias") if m.bias else y


def pair_frequency(i, dk, rope):
    """Angle per position of pair i (one pair at a time, from the published formulas)."""
    base, s = rope.theta, rope.factor
    if rope.scaling == "ntk":  # NTK-aware: a larger base
        return (base * s ** (dk / (dk - 2))) ** (-2.0 * i / dk)
    f = base ** (-2.0 * i / dk)
    if rope.scaling != "yarn":
        return f
    # YaRN: the pair index that turns r times over the original length, a ramp between beta_fast and beta_slow
    turning = lambda r: dk * math.log(rope.original_max_seq_len / (r * 2 * math.pi)) / (2 * math.log(base))
    low = max(math.floor(turning(rope.beta_fast)), 0)
    high = min(math.ceil(turning(rope.beta_slow)), dk - 1)
    if low == high:
        high += 0.001
    ramp = min(max((i - low) / (high - low), 0.0), 1.0)
    return f * (1 - ramp) + (f / s) * ramp


def rope_tables(positions, dk, rope):
    """cos, sin (B,1,T,dk/2): pair i of a token at position p turns by p' * pair_frequency(i); yarn also
    scales both by its temperature factor 0.1 ln(s) + 1."""
    inv_freq = torch.tensor([pair_frequency(i, dk, rope) for i in range(dk // 2)], dtype=torch.float64)
    pos = positions.double() / (rope.factor if rope.scaling == "linear" else 1.0)
    angles = pos[:, None, :, None] * inv_freq
    scale = 0.1 * math.log(rope.factor) + 1.0 if rope.scaling == "yarn" and rope.factor > 1 else 1.0
    return angles.cos() * scale, angles.sin() * scale


def rotate(x, tables, pairing):
    """Applies R(a) = [[cos a, -sin a], [sin a, cos a]] to dims (first[i], second[i]) of x (B,H,T,dk)."""
    cos, sin = tables
    half = x.shape[-1] // 2
    first = torch.arange(half) * 2 if pairing == "interleaved" else torch.arange(half)
    second = first + 1 if pairing == "interleaved" else first + half
    a, b = x[..., first], x[..., second]
    out = torch.empty_like(x)
    out[..., first], out[..., second] = a * cos - b * sin, a * sin + b * cos
    return out


def allowed_mask(batch, time, key_valid, segment_ids, window):
    """(B,1,T,T) bool: key index <= query index AND key valid AND same segment AND, with a window w > 0,
    query index - key index < w."""
    index = torch.arange(time)
    distance = index[:, None] - index[None, :]
    allowed = distance >= 0
    if window > 0:
        allowed = allowed & (distance < window)
    allowed = allowed.expand(batch, time, time)
    if key_valid is not None:
        allowed = allowed & key_valid[:, None, :]
    if segment_ids is not None:
        allowed = allowed & (segment_ids[:, :, None] == segment_ids[:, None, :])
    return allowed[:, None]


def attention(x, W, p, m, allowed, rope):
    B, T, _ = x.shape
    qkv_bias = m.bias or m.qkv_bias
    q = linear(x, W, p + "q_proj", qkv_bias).view(B, T, m.n_heads, m.dk).transpose(1, 2)
    k = linear(x, W, p + "k_proj", qkv_bias).view(B, T, m.n_kv_heads, m.dk).transpose(1, 2)
    v = linear(x, W, p + "v_proj", qkv_bias).view(B, T, m.n_kv_heads, m.dk).transpose(1, 2)
    if m.qk_norm:  # always RMSNorm over dk (weight shared by heads), whatever model.norm says
        q = rms_norm(q, W.take(p + "q_norm.weight"), m.norm_eps)
        k = rms_norm(k, W.take(p + "k_norm.weight"), m.norm_eps)
    if rope is not None:
        q, k = rotate(q, rope, m.rope.pairing), rotate(k, rope, m.rope.pairing)
    kv_head = torch.arange(m.n_heads) // (m.n_heads // m.n_kv_heads)  # query head h reads kv head h // G
    k, v = k[:, kv_head], v[:, kv_head]
    scores = (q @ k.transpose(-1, -2) / math.sqrt(m.dk)).masked_fill(~allowed, -math.inf)
    has_key = allowed.any(-1, keepdim=True)  # a query without any allowed key outputs exactly zero
    weights = torch.softmax(scores.masked_fill(~has_key, 0.0), -1) * has_key
    out = (weights @ v).transpose(1, 2).reshape(B, T, m.n_heads * m.dk)
    return linear(out, W, p + "o_proj", m.bias)


def feed_forward(x, W, p, m):
    if m.ffn == "gelu":  # exact (erf) GELU
        h = linear(x, W, p + "fc_in", m.bias)
        return linear(0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0))), W, p + "fc_out", m.bias)
    if m.ffn == "gelu_tanh":  # GPT-2's tanh approximation
        h = linear(x, W, p + "fc_in", m.bias)
        u = math.sqrt(2.0 / math.pi) * (h + 0.044715 * h ** 3)
        return linear(0.5 * h * (1.0 + torch.tanh(u)), W, p + "fc_out", m.bias)
    if m.ffn == "relu":
        return linear(linear(x, W, p + "fc_in", m.bias).clamp_min(0.0), W, p + "fc_out", m.bias)
    gate = linear(x, W, p + "gate_proj", m.bias)
    hidden = gate * torch.sigmoid(gate) * linear(x, W, p + "up_proj", m.bias)  # silu(gate) * up
    return linear(hidden, W, p + "down_proj", m.bias)


def forward(m, W, tokens, positions, segment_ids, key_valid):
    """Logits (B,T,V) float64 for tokens (B,T,F)."""
    B, T, _ = tokens.shape
    tables = [W.take(f"embed.{f.name}.weight") for f in m.inputs]
    x = sum(table[tokens[..., i]] for i, table in enumerate(tables))
    if m.position == "learned":
        x = x + W.take("pos_embed.weight")[positions]
    allowed = allowed_mask(B, T, key_valid, segment_ids, m.attention_window)
    rope = rope_tables(positions, m.dk, m.rope) if m.position == "rope" else None
    for i in range(m.n_layers):
        p = f"blocks.{i}."
        x = x + attention(norm(x, W, p + "attn_norm", m), W, p + "attn.", m, allowed, rope)
        x = x + feed_forward(norm(x, W, p + "ffn_norm", m), W, p + "ffn.", m)
    x = norm(x, W, "final_norm", m)
    return x @ tables[0].T if m.tie_embeddings else linear(x, W, "head", m.bias)


def mean_cross_entropy(logits, labels):
    """Mean over labels != -100 (0 when there are none, like causal's loss_sum / max(count, 1))."""
    valid = labels != IGNORE_LABEL
    if not bool(valid.any()):
        return 0.0
    rows, target = logits[valid], labels[valid]
    return float((torch.logsumexp(rows, -1) - rows.gather(-1, target[:, None])[:, 0]).mean())


# ---------------------------------------------------------------------------------------------- driver
def is_integer(x):
    return not x.dtype.is_floating_point and x.dtype != torch.bool


def check_range(path, what, x, high):
    if x.numel() and not 0 <= int(x.min()) <= int(x.max()) < high:
        raise InputError(f"{path}: {what} must lie in [0,{high})")


def load_batch(path, m):
    t = read_safetensors(path)
    unknown = sorted(set(t) - set(BATCH_NAMES))
    if unknown or "tokens" not in t:
        raise InputError(f"{path}: expected tensors {'|'.join(BATCH_NAMES)} with tokens required, got "
                         f"unknown {unknown or 'none'}{'' if 'tokens' in t else ' and no tokens'}")
    tokens, fields = t["tokens"], len(m.inputs)
    tokens = tokens[..., None] if tokens.dim() == 2 and fields == 1 else tokens
    if tokens.dim() != 3 or tokens.shape[2] != fields or not is_integer(tokens):
        raise InputError(f"{path}: expected integer tokens (B,T,{fields}), got {t['tokens'].dtype} "
                         f"{tuple(t['tokens'].shape)}")
    B, T = tokens.shape[:2]
    kinds = {"int": is_integer, "bool": lambda x: x.dtype == torch.bool,
             "float": lambda x: x.dtype.is_floating_point}

    def get(name, kind, shape):
        x = t.get(name)
        if x is not None and (tuple(x.shape) != shape or not kinds[kind](x)):
            raise InputError(f"{path}: expected {name} {kind} {shape}, got {x.dtype} {tuple(x.shape)}")
        return x.long() if x is not None and kind == "int" else x

    b = SimpleNamespace(tokens=tokens.long(), positions=get("positions", "int", (B, T)),
                        segment_ids=get("segment_ids", "int", (B, T)),
                        key_valid=get("key_valid", "bool", (B, T)), labels=get("labels", "int", (B, T)),
                        logits=get("logits", "float", (B, T, m.output_vocab)), loss=t.get("loss"))
    if b.loss is not None and (b.loss.numel() != 1 or not b.loss.dtype.is_floating_point or b.labels is None):
        raise InputError(f"{path}: expected loss as one float (scalar or (1,)) together with labels")
    if T > m.max_seq_len:
        raise InputError(f"{path}: {T} positions exceed max_seq_len {m.max_seq_len}")
    for i, f in enumerate(m.inputs):
        check_range(path, f"tokens of field '{f.name}'", b.tokens[..., i], f.vocab)
    if b.positions is None:
        b.positions = torch.arange(T).expand(B, T)
    if m.position == "learned":
        check_range(path, "positions (learned table)", b.positions, m.max_seq_len)
    if b.labels is not None:
        check_range(path, "labels other than -100", b.labels[b.labels != IGNORE_LABEL], m.output_vocab)
    return b


def run(args):
    if args.checkpoint and (args.config or args.weights):
        raise InputError("give either --checkpoint or --config and --weights, not both")
    if args.checkpoint:
        args.config = os.path.join(args.checkpoint, "config.json")
        args.weights = os.path.join(args.checkpoint, "model.safetensors")
    if not (args.config and args.weights):
        raise InputError("need --checkpoint DIR, or --config and --weights")
    m = load_model_config(args.config)
    W = Weights(args.weights, m)
    b = load_batch(args.batch, m)
    with torch.no_grad():
        logits = forward(m, W, b.tokens, b.positions, b.segment_ids, b.key_valid)
    assert not W.tensors, f"internal error: weights not used by the forward pass: {sorted(W.tensors)}"
    result = {}
    if b.logits is not None:
        diff = (logits - b.logits.double()).abs()
        result["max_abs_logit_diff"] = float(diff.max()) if diff.numel() else 0.0
    if b.labels is not None:
        result["loss_ref"] = mean_cross_entropy(logits, b.labels)
    if b.loss is not None:
        result["loss_causal"] = float(b.loss.reshape(()))
        result["loss_diff"] = abs(result["loss_ref"] - result["loss_causal"])
    ok = all(result[k] <= args.tol for k in ("max_abs_logit_diff", "loss_diff") if k in result)  # NaN fails
    return result, ok


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="causal's resolved config JSON (only `model` is read)")
    parser.add_argument("--weights", help="model.safetensors holding every parameter by name")
    parser.add_argument("--checkpoint", help="directory with config.json and model.safetensors")
    parser.add_argument("--batch", required=True, help="safetensors: tokens [, positions, ..., logits, loss]")
    parser.add_argument("--tol", type=float, default=1e-5, help="max allowed |logit diff| and |loss diff|")
    parser.add_argument("--json", action="store_true", help="print a JSON object instead of the parity line")
    args = parser.parse_args(argv)
    try:
        result, ok = run(args)
    except InputError as e:
        print(f"reference_model: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        finite = {k: (v if math.isfinite(v) else None) for k, v in result.items()}
        print(json.dumps({**finite, "tol": args.tol, "ok": ok}, sort_keys=True))
    else:
        print(" ".join(["parity"] + [f"{k}={v:.9g}" for k, v in result.items()]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
