#!/usr/bin/python3
"""PyTorch peer of the data-parallel training-step benchmark: median wall time of one full
training step (forward, cross-entropy, backward, clip_grad_norm 1.0, AdamW step, zero_grad),
float32 on CPU, for configuration A or B of torch_train_step.py (whose model code it imports).

    OMP_WAIT_POLICY=passive python3 bench/torch_ddp_step.py --config A --ranks 1 --threads 1
    OMP_WAIT_POLICY=passive python3 bench/torch_ddp_step.py --config A --ranks 2 --threads 1
    (the same with --config B; --steps 20 --warmup 3 are the defaults)

--ranks 1: one process, the plain model, no process group (the single-process baseline).
--ranks N>=2: N processes, torch.distributed gloo on 127.0.0.1 (env:// with a free port),
the model wrapped in DistributedDataParallel (default bucket size). The GLOBAL batch stays the
config's batch: each rank takes batch/N samples (random token ids, seed 1000+rank; the model
is initialised with seed 0 on every rank).

Each rank is a fresh child process (this script re-invoking itself) whose OMP_NUM_THREADS,
MKL_NUM_THREADS and OPENBLAS_NUM_THREADS are set to --threads before torch is imported; it also
calls torch.set_num_threads(T). OMP_WAIT_POLICY is passed through from the environment as is.

Timing (rank 0): a dist.barrier() before the timed steps, then time.perf_counter() around each
step; ms_per_step is the median. Communication alone: allreduce_ms is the median over 10
repetitions (after 2 untimed ones, each preceded by a barrier) of one gloo all_reduce(SUM) of a
float32 tensor with the model's parameter count (grad_bytes = 4 * parameters, the tied LM head
counted once). Comparing the N-rank step with (1-rank step) / N and with allreduce_ms shows
how much of the gradient communication DDP overlapped with the backward pass.

Output: one JSON line from rank 0:
  {"impl", "config", "ranks", "threads", "ms_per_step", "grad_bytes", "allreduce_ms", "torch"}
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train_step import CONFIGS, build  # noqa: E402  (does not import torch at load time)


def child(args):
    import torch
    import torch.nn.functional as F

    rank, world = args.rank, args.ranks
    torch.set_num_threads(args.threads)
    ddp = world > 1
    if ddp:
        import datetime
        import torch.distributed as dist
        dist.init_process_group("gloo", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=300))

    c = CONFIGS[args.config]
    B, L, V = c["batch"] // world, c["seq"], c["vocab"]
    torch.manual_seed(0)  # same initial weights on every rank (DDP also broadcasts them)
    model = build(c, 0.1)
    model.train()
    params = list(model.parameters())  # deduplicated: the tied LM head counts once
    n_params = sum(p.numel() for p in params)
    net = torch.nn.parallel.DistributedDataParallel(model) if ddp else model
    opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.01)

    g = torch.Generator().manual_seed(1000 + rank)  # ids 1..V-1, as in torch_train_step.py
    ids = lambda: torch.randint(1, V, (B, L), generator=g)  # noqa: E731
    if c["kind"] == "encdec":
        inputs, targets = (ids(), ids()), ids()
    else:
        inputs, targets = (ids(),), ids()

    def step():
        logits = net(*inputs)
        loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
        loss.backward()  # DDP: gradients all-reduced (averaged) in buckets during backward
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(args.warmup):
        step()
    if ddp:
        dist.barrier()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)

    allreduce_ms = None
    if ddp:
        buf = torch.ones(n_params, dtype=torch.float32)
        ar = []
        for i in range(12):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(buf, op=dist.ReduceOp.SUM)
            if i >= 2:
                ar.append(time.perf_counter() - t0)
        allreduce_ms = statistics.median(ar) * 1e3
        dist.barrier()
        dist.destroy_process_group()

    if rank == 0:
        print(json.dumps(dict(
            impl="pytorch-ddp-gloo" if ddp else "pytorch", config=args.config, ranks=world,
            threads=args.threads, ms_per_step=statistics.median(times) * 1e3,
            grad_bytes=4 * n_params, allreduce_ms=allreduce_ms, torch=torch.__version__)),
            flush=True)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="A", choices=["A", "B", "C"])
    ap.add_argument("--ranks", type=int, default=1, choices=[1, 2])
    ap.add_argument("--steps", type=int, default=20, help="timed steps")
    ap.add_argument("--warmup", type=int, default=3, help="untimed warm-up steps")
    ap.add_argument("--threads", type=int, default=1, help="threads per rank")
    ap.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)  # child mode
    args = ap.parse_args()
    if args.rank is not None:
        child(args)
        return

    t = str(args.threads)
    env = dict(os.environ, OMP_NUM_THREADS=t, MKL_NUM_THREADS=t, OPENBLAS_NUM_THREADS=t)
    if args.ranks > 1:
        with socket.socket() as s:  # a free port (released just before the children bind it)
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # gloo's pairs on loopback too
    cmd = [sys.executable, os.path.abspath(__file__), "--config", args.config,
           "--ranks", str(args.ranks), "--steps", str(args.steps), "--warmup",
           str(args.warmup), "--threads", t]
    procs = [subprocess.Popen(cmd + ["--rank", str(r)], env=env) for r in range(args.ranks)]
    # If one rank fails, stop the others instead of letting them wait in a collective.
    failed = False
    while any(p.poll() is None for p in procs):
        if any(p.poll() not in (None, 0) for p in procs):
            failed = True
            for p in procs:
                if p.poll() is None:
                    p.terminate()
        time.sleep(0.1)
    failed = failed or any(p.returncode != 0 for p in procs)
    if failed:
        print("a rank failed: " + ", ".join(str(p.returncode) for p in procs), file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
