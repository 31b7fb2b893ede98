#!/usr/bin/env python3
"""PyTorch's side of bench/gpu_ops.cc on the same GPU: torch.matmul at n = 4096 and 8192 (float32
exact and bfloat16), and scaled_dot_product_attention held to its flash backend (bfloat16, the
goal; the math backend in float32 at T <= 1024, for reference beside tapegrad's plain kernel). CUDA events, 3 warm-up
calls, median of 20. One JSON line a case, as gpu_ops prints them.

  python3 bench/torch_gpu_ops.py [--repeats 20]
"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def median_ms(fn, repeats):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    for n in (4096, 8192):
        for dtype, name in ((torch.float32, "float32"), (torch.bfloat16, "bfloat16")):
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            ms = median_ms(lambda: torch.matmul(a, b), args.repeats)
            print(json.dumps({"case": "matmul", "dtype": name, "n": n, "ms": round(ms, 4),
                              "tflops": round(2 * n ** 3 / (ms * 1e-3) / 1e12, 1), "peer": "torch"}))
    for d in (64, 128):
        for T in (512, 1024, 2048, 4096):
            for causal in (True, False):
                B, H = 16384 // T, 2048 // d
                for dtype, name, backend in ((torch.bfloat16, "bfloat16", SDPBackend.FLASH_ATTENTION),
                                             (torch.float32, "float32", SDPBackend.MATH)):
                    if dtype == torch.float32 and T > 1024:
                        continue  # (float32 is for reference only, beside tapegrad's plain kernel)
                    q, k, v = (torch.randn(B, H, T, d, device="cuda", dtype=dtype) for _ in range(3))
                    with sdpa_kernel(backend):
                        ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), args.repeats)
                    flops = 4 * B * H * T * T * d / (2 if causal else 1)
                    print(json.dumps({"case": "attention", "dtype": name, "d": d, "T": T, "causal": causal,
                                      "ms": round(ms, 4), "tflops": round(flops / (ms * 1e-3) / 1e12, 1),
                                      "peer": "torch " + ("flash" if backend == SDPBackend.FLASH_ATTENTION else "math")}))


if __name__ == "__main__":
    main()
