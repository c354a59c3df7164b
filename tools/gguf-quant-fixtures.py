#!/usr/bin/env python3
"""Writes tests/io/fixtures/gguf_quants/: blocks of each quantized GGUF type causal reads, with gguf-py's
float32 values for them, and float32 rows with gguf-py's Q8_0, Q4_0 and Q4_1 bytes for them.
tests/io/test_gguf_quants.cpp holds causal's decoders and encoders to these bit for bit.

Usage: PYTHONPATH=<site with gguf 0.17.1 and numpy> tools/gguf-quant-fixtures.py [OUT_DIR]

Per type NAME (lower case): NAME.blocks (the raw blocks) and NAME.f32 (gguf.quants.dequantize's float32,
little-endian); q8_0_quantize.f32 (rows of 64 values) and q8_0_quantize.blocks, q4_0_quantize.blocks and
q4_1_quantize.blocks (gguf.quants.quantize's bytes for those rows). The blocks are random bytes with edge values written over some of them: zero, negative, subnormal,
the largest, infinite and NaN float16 scales, quants all zero and all ones, so every path of a decoder runs.
Deterministic (fixed seed): running it again rewrites the same bytes.
"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

# Byte offsets of each type's float16 fields (d, and m or dmin) within a block (ggml-common.h).
SCALE_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
BLOCKS = {32: 40, 256: 12}  # blocks per type, by block size: the fixtures stay near 100 KB in all

# float16 bits: +0, -0, smallest and largest subnormal, smallest normal, largest, 1, -1, +inf, -inf,
# quiet NaN, signalling NaN, negative NaN.
SPECIAL_F16 = [0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0x3C00, 0xBC00, 0x7C00, 0xFC00, 0x7E00, 0x7C01,
               0xFE01]


def blocks_for(qtype, rng):
    block_size, type_size = GGML_QUANT_SIZES[qtype]
    n = BLOCKS[block_size]
    raw = rng.integers(0, 256, size=(n, type_size), dtype=np.uint8)
    fields = SCALE_FIELDS[qtype]
    for i in range(n):
        for k, at in enumerate(fields):
            if i < len(SPECIAL_F16):
                # Block i: special value i in the first field, a plain scale in the others.
                bits = SPECIAL_F16[i] if k == 0 else int(np.float16(rng.normal(0, 0.05)).view(np.uint16))
            elif i % 3 == 0:
                bits = int(rng.integers(0, 1 << 16))  # any bits at all, from subnormal to NaN
            else:
                bits = int(np.float16(rng.normal(0, 0.05)).view(np.uint16))  # what real files hold
            raw[i, at:at + 2] = np.array([bits], dtype=np.uint16).view(np.uint8)
    # Quants all zero and all ones (largest nibbles, every high bit set) in two blocks with plain scales.
    quant_bytes = [b for b in range(type_size) if not any(at <= b < at + 2 for at in fields)]
    raw[n - 1, quant_bytes] = 0xFF
    raw[n - 2, quant_bytes] = 0x00
    return raw


def f16_rows(rng):
    # The float16 specials, then bfloat16's: infinities, quiet and signalling NaN, smallest subnormal.
    bf16 = [0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x0001, 0x8080]
    rows = np.concatenate([np.array(SPECIAL_F16 + bf16, dtype=np.uint16),
                           rng.integers(0, 1 << 16, size=237, dtype=np.uint16)])
    return rows.view(np.uint8).reshape(1, -1)


def q8_0_inputs(rng):
    rows = [
        rng.normal(0, 0.02, 64),                    # weights as trained
        rng.normal(0, 1.0, 64) * 10.0 ** rng.integers(-6, 6, 64),  # mixed magnitudes
        np.zeros(64),                               # max 0: d = 0, every q 0
        np.concatenate([np.arange(-15.5, 16.5, 1.0), np.arange(-127, 129, 8.0)]),  # halves: ties
        np.concatenate([np.full(32, 1e-7), np.full(32, -3e-6)]),  # float16 subnormal d
        np.concatenate([np.full(32, 9e6), rng.normal(0, 1e7, 32)]),  # d beyond float16: infinity
        np.concatenate([[-0.0] * 31 + [1.0], [127.0] + [63.5] * 31]),  # -0, exact ties at d = 1
        rng.uniform(-1, 1, 64).astype(np.float32) * np.float32(3.0517578e-05),
        # Tiny blocks: d a float32 subnormal and 1/d infinite (every q 0), then d just normal.
        np.concatenate([[3e-37, -1e-38, 2e-45, 0.0] * 8, [2e-36, -1e-36, 5e-37, 1e-45] * 8]),
    ]
    return np.array(rows, dtype=np.float32)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "io",
                                                                "fixtures", "gguf_quants")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20261206)
    cases = [(qtype, blocks_for(qtype, rng)) for qtype in SCALE_FIELDS]
    cases.append((T.F16, f16_rows(rng)))
    cases.append((T.BF16, f16_rows(rng)))
    with np.errstate(all="ignore"):  # infinite and NaN scales are the point
        for qtype, raw in cases:
            values = dequantize(raw, qtype).astype(np.float32, copy=False)
            name = qtype.name.lower()
            raw.tofile(os.path.join(out, name + ".blocks"))
            values.tofile(os.path.join(out, name + ".f32"))
        x = q8_0_inputs(rng)
        x.tofile(os.path.join(out, "q8_0_quantize.f32"))
        quantize(x, T.Q8_0).tofile(os.path.join(out, "q8_0_quantize.blocks"))
        # The same rows as Q4_0 and Q4_1 blocks (train.lora.base_dtype quantizes a base so).
        for qtype in (T.Q4_0, T.Q4_1):
            quantize(x, qtype).tofile(os.path.join(out, qtype.name.lower() + "_quantize.blocks"))
    total = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(f"wrote {len(cases)} types and the Q8_0 rows to {out} ({total} bytes)")


if __name__ == "__main__":
    main()
