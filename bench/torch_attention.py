"""Causal attention forward + backward in PyTorch, the peer of bench/bench_attention.cc.

B 16, 8 heads, head size 64, float32. impl 'manual' is matmul -> masked_fill -> softmax -> matmul
(any PyTorch); 'sdpa' is torch.nn.functional.scaled_dot_product_attention(is_causal=True)
(PyTorch 2.x). Each case runs in a fresh process so that its peak resident memory (ru_maxrss)
can be read; printed: impl, T, threads, seconds per forward + backward (best of the timed runs),
peak extra memory in MB (peak RSS after the runs minus RSS with the inputs allocated).

  OMP_WAIT_POLICY=passive python torch_attention.py --threads 2 --T 128 512 1024 --impl manual sdpa
"""
import argparse
import resource
import subprocess
import sys
import time


def one(impl, T, threads, runs):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    B, H, d = 16, 8, 64
    q, k, v = (torch.randn(B, H, T, d, requires_grad=True) for _ in range(3))
    g = torch.randn(B, H, T, d)
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)

    def step():
        if impl == "sdpa":
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = torch.matmul(q, k.transpose(-1, -2)) / d ** 0.5
            o = torch.matmul(torch.softmax(s.masked_fill(mask, float("-inf")), -1), v)
        o.backward(g)
        q.grad = k.grad = v.grad = None

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    step()  # warm-up
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"{impl}\t{T}\t{threads}\t{best:.6f}\t{(peak - base) / 1024:.1f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--T", type=int, nargs="+", default=[128, 512, 1024])
    ap.add_argument("--impl", nargs="+", default=["manual"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--one", nargs=3)  # internal: impl T threads
    a = ap.parse_args()
    if a.one:
        one(a.one[0], int(a.one[1]), int(a.one[2]), a.runs)
        return
    for impl in a.impl:
        for T in a.T:
            for th in a.threads:
                subprocess.run([sys.executable, __file__, "--one", impl, str(T), str(th), "--runs", str(a.runs)], check=True)


if __name__ == "__main__":
    main()
