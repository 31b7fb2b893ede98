#!/usr/bin/env python3
"""Issue 48's step-time goals from bench/gpu_train.cc's and bench/torch_gpu_train.py's JSON lines
(the same card, the same run): one line a goal, "met" or "NOT met" with both times, torch.compile
beside where it ran; then, for each case gpu_train profiled (--profile), where its GPU time goes.

  python3 bench/gpu_train_compare.py TAPEGRAD.jsonl TORCH.jsonl
"""
import json
import sys

# (config, batch) -> {precision: the most our time may be, as a share of PyTorch eager's}
GOALS = {("C", 256): {"bf16": 0.5, "tf32": 0.7, "fp32": 1.0},
         ("A", 32): {"bf16": 0.2, "tf32": 0.2, "fp32": 0.4},
         ("B", 16): {"bf16": 0.2, "tf32": 0.2, "fp32": 0.4},
         ("C", 16): {"bf16": 0.2, "tf32": 0.2, "fp32": 0.4}}


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.startswith("{")]


def main():
    ours, theirs = load(sys.argv[1]), load(sys.argv[2])
    failed = False
    for o in (r for r in ours if r.get("case", "train") == "train"):
        limits = GOALS.get((o["config"], o["batch"]))
        if not limits or o["precision"] not in limits:
            continue
        peers = {t["peer"]: t for t in theirs if t.get("config") == o["config"] and t.get("batch") == o["batch"]
                 and t.get("precision") == o["precision"] and "ms" in t}
        eager = peers.get("torch eager")
        mode = " as a CUDA graph" if o.get("graph") else ""
        if eager is None:
            print(f"goal step {o['config']} batch {o['batch']} {o['precision']}{mode}: no PyTorch figure: NOT met")
            failed = True
            continue
        ratio = o["ms"] / eager["ms"]
        ok = ratio <= limits[o["precision"]]
        extra = "".join(f"; {p} {t['ms']} ms" for p, t in peers.items() if p != "torch eager")
        print(f"goal step {o['config']} batch {o['batch']} {o['precision']}{mode} <= {limits[o['precision']]}x PyTorch eager: "
              f"{o['ms']} vs {eager['ms']} ms ({ratio:.2f}x; {o['kernels']} kernels, {o['host_us']} host us a step{extra}): "
              f"{'met' if ok else 'NOT met'}")
        failed = failed or not ok
        if o["config"] == "C" and o["batch"] == 256 and not o.get("graph"):
            mem = o["peak_mib"] / eager["peak_mib"]
            print(f"goal peak memory C batch 256 {o['precision']} <= 1.0x PyTorch's: {o['peak_mib']} vs {eager['peak_mib']} "
                  f"MiB ({mem:.2f}x): {'met' if mem <= 1.0 else 'NOT met'}")
            failed = failed or mem > 1.0
    for o in (r for r in ours if r.get("case") == "train_error"):
        mode = " as a CUDA graph" if o.get("graph") else ""
        print(f"goal step {o['config']} batch {o['batch']} {o['precision']}{mode}: failed: {o['error']}: NOT met")
        failed = True
    profiles = {}
    for r in (r for r in ours if r.get("case") == "profile"):
        profiles.setdefault((r["config"], r["batch"], r["precision"]), []).append(r)
    for (config, batch, precision), rows in profiles.items():
        total = sum(r["ms_per_step"] for r in rows)
        launches = sum(r["launches_per_step"] for r in rows)
        print(f"profile step {config} batch {batch} {precision}: {total:.2f} ms of GPU time a step, {launches:.0f} launches")
        for r in sorted(rows, key=lambda r: -r["ms_per_step"])[:12]:
            print(f"  {r['op']:<28} {r['ms_per_step']:8.3f} ms {100 * r['share']:5.1f}%  {r['launches_per_step']:6.1f} launches")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
