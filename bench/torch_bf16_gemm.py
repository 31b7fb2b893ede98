#!/usr/bin/env python3
"""PyTorch's bfloat16 matrix products on the shapes of bench/bench_bf16.cc, one JSON line a case:
`a @ b` of bfloat16 tensors (oneDNN where the CPU has AVX512-BF16 or AMX), and float32 tensors
through F.linear / matmul under torch.autocast("cpu", torch.bfloat16), as a training step calls
them. Each thread count runs in its own process.

    python3 bench/torch_bf16_gemm.py [--threads 1,2] [--seconds 1]
"""
import argparse
import json
import os
import subprocess
import sys
import time

SHAPES = [(512, 512, 512, 0), (1024, 1024, 1024, 0), (2048, 2048, 2048, 0), (1024, 512, 512, 1), (1024, 2048, 512, 1),
          (1024, 512, 2048, 1), (1024, 512, 2048, 0), (1024, 2048, 512, 0)]


def child(threads, seconds):
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    for M, N, K, tb in SHAPES:
        for kind in ("bf16", "autocast"):
            dt = torch.bfloat16 if kind == "bf16" else torch.float32
            a = torch.randn(M, K, dtype=dt)
            b = torch.randn(N, K, dtype=dt) if tb else torch.randn(K, N, dtype=dt)

            def run():
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=kind == "autocast"):
                    return torch.nn.functional.linear(a, b) if tb else a @ b
            for _ in range(3):
                run()
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                run()
                n += 1
            dt_s = (time.perf_counter() - t0) / n
            print(json.dumps(dict(kind=kind, M=M, N=N, K=K, tb=tb, threads=threads, ms=dt_s * 1e3,
                                  gflops=2.0 * M * N * K / dt_s / 1e9, torch=torch.__version__,
                                  cpu_capability=torch.backends.cpu.get_cpu_capability())), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.seconds)
    for t in [int(x) for x in args.threads.split(",")]:
        env = dict(os.environ, OMP_NUM_THREADS=str(t), OMP_WAIT_POLICY="passive")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--child", str(t), "--seconds", str(args.seconds)], env=env,
                       check=True)


if __name__ == "__main__":
    main()
