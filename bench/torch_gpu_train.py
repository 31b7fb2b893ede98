#!/usr/bin/env python3
"""PyTorch peer of bench/gpu_train.cc on the same GPU: steps A, B and C (the models of
bench/torch_train_step.py; C also at batch 256) in float32, TF32 and bfloat16 autocast, as PyTorch
users run them: AdamW(fused=True), autocast over forward and loss, dropout 0.1, clip_grad_norm_,
each step ending with torch.cuda.synchronize(); the median of --steps steps after --warmup, the
peak of torch.cuda.max_memory_allocated, and torch.compile (default and reduce-overhead) beside
eager where --compile names the case. One JSON line a case.

    python3 bench/torch_gpu_train.py --configs A,B,C --precisions fp32,tf32,bf16 --compile C256bf16
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train_step import CONFIGS, build  # noqa: E402  (the same models as the CPU peer)


def run(name, batch, precision, compile_mode, args):
    import torch
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    torch.manual_seed(0)
    c = dict(CONFIGS[name])
    if batch:
        c["batch"] = batch
    B, L, V = c["batch"], c["seq"], c["vocab"]
    model = build(c, 0.1).cuda().train()
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.01, fused=True)
    if c["kind"] == "encdec":
        inputs = (torch.randint(1, V, (B, L), device="cuda"), torch.randint(1, V, (B, L), device="cuda"))
    else:
        inputs = (torch.randint(1, V, (B, L), device="cuda"),)
    targets = torch.randint(1, V, (B, L), device="cuda")
    forward = model if compile_mode == "eager" else torch.compile(model, mode=None if compile_mode == "default" else compile_mode)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = F.cross_entropy(forward(*inputs).reshape(-1, V), targets.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        return loss

    for _ in range(args.warmup):
        step()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t0)
    ms = statistics.median(times) * 1e3
    return dict(case="train", peer="torch " + compile_mode, config=name, precision=precision, batch=B, tokens=B * L,
                ms=round(ms, 3), tokens_per_s=round(B * L / (ms * 1e-3)),
                peak_mib=round(torch.cuda.max_memory_allocated() / 2**20, 1), loss=round(float(loss.detach()), 4),
                torch=torch.__version__, gpu=torch.cuda.get_device_name())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="A,B,C")
    ap.add_argument("--precisions", default="fp32,tf32,bf16")
    ap.add_argument("--c_batches", default="16,256")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--compile", default="C256bf16",
                    help="comma-separated cases (config, batch, precision: C256bf16) also run under torch.compile")
    args = ap.parse_args()
    compiled = {s.strip() for s in args.compile.split(",") if s.strip()}
    for name in [s.strip().upper() for s in args.configs.split(",") if s.strip()]:
        batches = [int(b) for b in args.c_batches.split(",")] if name == "C" else [0]
        for batch in batches:
            for precision in [s.strip() for s in args.precisions.split(",") if s.strip()]:
                key = f"{name}{batch or CONFIGS[name]['batch']}{precision}"
                for mode in ["eager"] + (["default", "reduce-overhead"] if key in compiled else []):
                    try:
                        print(json.dumps(run(name, batch, precision, mode, args)), flush=True)
                    except Exception as e:  # a compile mode that fails on this machine is reported, not fatal
                        print(json.dumps(dict(case="train", peer="torch " + mode, config=name, precision=precision,
                                              batch=batch, error=str(e)[:200])), flush=True)


if __name__ == "__main__":
    main()
