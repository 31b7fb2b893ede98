#!/usr/bin/env python3
"""Issue 47's speed goals from bench/gpu_ops.cc's and bench/torch_gpu_ops.py's JSON lines (the same
card, the same run): one line a goal, "met" or "NOT met" with both rates.

  python3 bench/gpu_compare.py TAPEGRAD.jsonl TORCH.jsonl
"""
import json
import sys


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.startswith("{")]
    except OSError:
        return []  # (a peer that did not run: its goals read "owed")


def main():
    ours, theirs = load(sys.argv[1]), load(sys.argv[2])
    for o in (r for r in ours if r["case"] == "overhead"):
        print(f"info one-element {o['op']} on the GPU: {o['host_ns']} ns of host time an op (the driver's launch "
              f"included), {o['ns']} ns with the device's work")
    for o in (r for r in ours if r["case"] == "matmul"):
        t = next((r for r in theirs if r["case"] == "matmul" and r["n"] == o["n"] and r["dtype"] == o["dtype"]), None)
        if t is None:
            print(f"goal matmul {o['dtype']} n={o['n']} >= 0.95x torch.matmul: ours {o['tflops']} TFLOP/s, no PyTorch "
                  f"figure in this run: owed")
            continue
        ratio = o["tflops"] / t["tflops"]
        print(f"goal matmul {o['dtype']} n={o['n']} >= 0.95x torch.matmul: {o['tflops']} vs {t['tflops']} TFLOP/s "
              f"({ratio:.2f}x): {'met' if ratio >= 0.95 else 'NOT met'}")
    for o in (r for r in ours if r["case"] == "attention" and r["dtype"] == "float32"):
        t = next((r for r in theirs if r["case"] == "attention" and r["d"] == o["d"] and r["T"] == o["T"]
                  and r["causal"] == o["causal"] and r["peer"] == "torch math"), None)
        if t is not None:
            print(f"info attention float32 d={o['d']} T={o['T']} causal={o['causal']}: ours {o['tflops']} vs SDPA math "
                  f"{t['tflops']} TFLOP/s ({o['tflops'] / t['tflops']:.2f}x)")
    for o in (r for r in ours if r["case"] == "attention" and r["dtype"] == "bfloat16"):
        t = next((r for r in theirs if r["case"] == "attention" and r["d"] == o["d"] and r["T"] == o["T"]
                  and r["causal"] == o["causal"] and r["peer"] == "torch flash"), None)
        if t is None:
            print(f"goal attention d={o['d']} T={o['T']} causal={o['causal']} >= 0.8x SDPA flash (bf16): ours "
                  f"{o['tflops']} TFLOP/s, no PyTorch figure in this run: owed")
            continue
        ratio = o["tflops"] / t["tflops"]
        print(f"goal attention d={o['d']} T={o['T']} causal={o['causal']} >= 0.8x SDPA flash (bf16): ours {o['dtype']} "
              f"{o['tflops']} vs {t['tflops']} TFLOP/s ({ratio:.2f}x): {'met' if ratio >= 0.8 and o['dtype'] == 'bfloat16' else 'NOT met'}")


if __name__ == "__main__":
    main()
