#!/usr/bin/env python3
"""Test-only reference for tests/interop/test_gguf_quants_smollm2.cpp: every tensor of a GGUF file
dequantized by gguf-py (gguf.quants.dequantize) to float32, one line per tensor in file order:
`name sha256-of-the-little-endian-float32-bytes`.

Usage: gguf_dequantize.py FILE      (exit 3 with the reason when gguf or numpy is missing)
"""
import hashlib
import sys

try:
    import numpy as np
    from gguf import GGUFReader
    from gguf.quants import dequantize
except ImportError as e:
    print(f"gguf-py is missing: {e}", file=sys.stderr)
    sys.exit(3)


def main():
    reader = GGUFReader(sys.argv[1])
    for tensor in reader.tensors:
        values = np.ascontiguousarray(dequantize(tensor.data, tensor.tensor_type), dtype="<f4")
        print(tensor.name, hashlib.sha256(values.tobytes()).hexdigest())


if __name__ == "__main__":
    main()
