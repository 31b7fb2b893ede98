#!/usr/bin/env python3
"""tests/golden/bf16_rounding.txt: float32 bit patterns and the bfloat16 bits PyTorch's
.to(torch.bfloat16) gives them (ties both ways, subnormals, values that round to infinity, signed
zeros, infinities, NaNs, and random patterns over the whole range). tests/bf16_test.cc checks that
every conversion path of tapegrad gives the same bits (NaNs: a NaN; PyTorch writes 0xFFFF on its
vectorized path and 0x7FC0 on its scalar one, tapegrad keeps the sign and quiets the payload).
Run from the repository root with PyTorch 2.x: python3 tools/make_bf16_golden.py"""
import random
import struct

import torch

patterns = [
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000,  # zeros, infinities
    0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFBFFFFF,  # NaNs, quiet and signalling
    0x3F800000, 0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF,  # 1.0, ties to even (down, up), near ties
    0xBF808000, 0xBF818000, 0x40490FDB,  # negative ties, pi
    0x00000001, 0x00008000, 0x00018000, 0x00017FFF, 0x00008001, 0x007FFFFF, 0x007F8000, 0x807FFFFF, 0x80008000,  # subnormals
    0x00800000, 0x00807FFF, 0x00808000,  # the smallest normal and its ties
    0x7F7FFFFF, 0x7F7F7FFF, 0x7F7F8000, 0xFF7F8000, 0x7F7E8000,  # huge: the largest, ties to even past it (infinity)
]
rng = random.Random(2026)
patterns += [rng.getrandbits(32) for _ in range(4000)]
patterns += [(rng.getrandbits(16) << 16) | 0x8000 for _ in range(500)]  # exact ties everywhere
x = torch.tensor(struct.unpack(f"<{len(patterns)}f", struct.pack(f"<{len(patterns)}I", *patterns)), dtype=torch.float32)
y = x.to(torch.bfloat16).view(torch.int16).tolist()
with open("tests/golden/bf16_rounding.txt", "w") as f:
    f.write(f"# float32 bits -> bfloat16 bits from torch {torch.__version__} .to(torch.bfloat16) (tools/make_bf16_golden.py)\n")
    for p, b in zip(patterns, y):
        f.write(f"{p:08x} {b & 0xFFFF:04x}\n")
