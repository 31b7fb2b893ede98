#!/usr/bin/python3
"""PyTorch peer of the C++ training-step benchmark: one full step (forward, backward, gradient
clipping, AdamW step, zero_grad) for three transformer configurations, float32, CPU.

Meant for Debian's /usr/bin/python3 (torch 1.13, OpenMP + pthread OpenBLAS):

    /usr/bin/python3 bench/torch_train_step.py --configs A,B,C --threads 1,2 --steps 10 --warmup 2

Every (config, threads) pair runs in a fresh child process (this script re-invoking itself), so
the peak RSS (getrusage ru_maxrss) belongs to that pair alone; it includes the Python interpreter
and libtorch themselves, reported separately as base_rss_mb (ru_maxrss right after import).

Configurations (as the C++ benchmark builds them):
  A  encoder-decoder, vocab 1000 (src and tgt), d 128, 4 heads, d_ff 512, 2+2 layers, L 32, B 32
  B  decoder-only LM, vocab 96, d 256, 8 heads, d_ff 1024, 4 layers, L 128, B 16
  C  encoder-decoder (paper's base), vocab 8000, d 512, 8 heads, d_ff 2048, 6+6 layers, L 64, B 16

Threads: the child calls torch.set_num_threads(t) and gets OMP_NUM_THREADS=t,
OPENBLAS_NUM_THREADS=t (Debian's torch calls the pthread OpenBLAS through libblas.so.3, and
torch.set_num_threads does NOT limit OpenBLAS's own thread pool) and OMP_WAIT_POLICY (passive
unless --wait-policy says otherwise).

Tokens per step = batch * sequence length (target tokens for the encoder-decoder); tokens/s is
computed from the median step time.
"""
import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time

CONFIGS = {
    "A": dict(kind="encdec", vocab=1000, d=128, heads=4, d_ff=512, layers=2, seq=32, batch=32),
    "B": dict(kind="lm", vocab=96, d=256, heads=8, d_ff=1024, layers=4, seq=128, batch=16),
    "C": dict(kind="encdec", vocab=8000, d=512, heads=8, d_ff=2048, layers=6, seq=64, batch=16),
}


def build(cfg, dropout):
    import torch
    import torch.nn as nn

    class Embed(nn.Module):
        """embed(ids) * sqrt(d) + sinusoidal PE (buffer), then dropout."""

        def __init__(self, vocab, d, max_len, p):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.scale = math.sqrt(d)
            pos = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
            div = torch.pow(10000.0, torch.arange(0, d, 2, dtype=torch.float32) / d)
            pe = torch.zeros(max_len, d)
            pe[:, 0::2] = torch.sin(pos / div)
            pe[:, 1::2] = torch.cos(pos / div)
            self.register_buffer("pe", pe)
            self.drop = nn.Dropout(p)

        def forward(self, ids):
            return self.drop(self.emb(ids) * self.scale + self.pe[: ids.size(1)])

    class EncDec(nn.Module):
        def __init__(self, c, p):
            super().__init__()
            d = c["d"]
            self.src_embed = Embed(c["vocab"], d, c["seq"], p)
            self.tgt_embed = Embed(c["vocab"], d, c["seq"], p)
            self.transformer = nn.Transformer(
                d_model=d, nhead=c["heads"], num_encoder_layers=c["layers"],
                num_decoder_layers=c["layers"], dim_feedforward=c["d_ff"], dropout=p,
                activation="relu", batch_first=True, norm_first=False)
            self.generator = nn.Linear(d, c["vocab"])
            # Float additive mask (0 / -inf); a bool mask would be converted to this on every
            # attention call inside F.multi_head_attention_forward.
            self.register_buffer("tgt_mask", nn.Transformer.generate_square_subsequent_mask(c["seq"]))

        def forward(self, src, tgt):
            L = tgt.size(1)
            h = self.transformer(self.src_embed(src), self.tgt_embed(tgt),
                                 tgt_mask=self.tgt_mask[:L, :L])
            return self.generator(h)

    class LM(nn.Module):
        def __init__(self, c, p):
            super().__init__()
            d = c["d"]
            self.tok_embed = nn.Embedding(c["vocab"], d)
            self.pos_embed = nn.Embedding(c["seq"], d)
            self.drop = nn.Dropout(p)
            # A plain ModuleList (not nn.TransformerEncoder, whose 1.13 wrapper only adds
            # nested-tensor/fast-path checks that do not apply in training).
            self.blocks = nn.ModuleList(
                nn.TransformerEncoderLayer(d, c["heads"], c["d_ff"], dropout=p, activation="gelu",
                                           batch_first=True, norm_first=True)
                for _ in range(c["layers"]))
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, c["vocab"], bias=False)
            self.lm_head.weight = self.tok_embed.weight  # tied
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(c["seq"]))
            self.register_buffer("positions", torch.arange(c["seq"]))

        def forward(self, ids):
            L = ids.size(1)
            x = self.drop(self.tok_embed(ids) + self.pos_embed(self.positions[:L]))
            m = self.mask[:L, :L]
            for blk in self.blocks:
                x = blk(x, src_mask=m)
            return self.lm_head(self.ln_f(x))

    return EncDec(cfg, dropout) if cfg["kind"] == "encdec" else LM(cfg, dropout)


def child(name, threads, args):
    import torch
    import torch.nn.functional as F

    base_rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    c = CONFIGS[name]
    B, L, V = c["batch"], c["seq"], c["vocab"]

    model = build(c, args.dropout)
    model.train()
    params = list(model.parameters())  # deduplicated: the tied LM head counts once
    n_params = sum(p.numel() for p in params)
    opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.01)

    # Ids from 1..V-1: pad id 0 never appears, so the causal mask is the only mask.
    if c["kind"] == "encdec":
        src = torch.randint(1, V, (B, L))
        tgt_in = torch.randint(1, V, (B, L))
        tgt_out = torch.randint(1, V, (B, L))
        inputs, targets = (src, tgt_in), tgt_out
    else:
        inputs, targets = (torch.randint(1, V, (B, L)),), torch.randint(1, V, (B, L))

    def step():
        # --autocast: PyTorch's mixed precision on the CPU, as its users run it (bfloat16).
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast):
            logits = model(*inputs)
            loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t0)

    med = statistics.median(times)
    tokens = B * L
    print(json.dumps(dict(
        config=name, kind=c["kind"], threads=threads, steps=args.steps, warmup=args.warmup,
        dropout=args.dropout, wait_policy=os.environ.get("OMP_WAIT_POLICY"),
        params=n_params, tokens_per_step=tokens,
        median_ms=med * 1e3, min_ms=min(times) * 1e3, tokens_per_s=tokens / med,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        base_rss_mb=base_rss_kb / 1024.0, final_loss=float(loss.detach()),
        torch=torch.__version__, autocast=args.autocast,
        cpu_capability=torch.backends.cpu.get_cpu_capability())), flush=True)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="A,B,C", help="comma-separated subset of A,B,C")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed warm-up steps")
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--wait-policy", default="passive", help="OMP_WAIT_POLICY for the children")
    ap.add_argument("--json", action="store_true", help="one JSON line per result")
    ap.add_argument("--autocast", action="store_true", help="torch.autocast('cpu', torch.bfloat16) around forward and loss")
    ap.add_argument("--child", nargs=2, metavar=("CONFIG", "THREADS"), help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        child(args.child[0], int(args.child[1]), args)
        return

    configs = [s.strip().upper() for s in args.configs.split(",") if s.strip()]
    for n in configs:
        if n not in CONFIGS:
            ap.error(f"unknown config {n!r} (choose from {','.join(CONFIGS)})")
    threads = [int(t) for t in args.threads.split(",") if t.strip()]

    if not args.json:
        print(f"{'config':<7}{'threads':>7}{'median ms':>12}{'min ms':>12}{'tokens/s':>12}"
              f"{'peak RSS MB':>13}{'params':>12}", flush=True)
    failed = False
    for n in configs:
        for t in threads:
            env = dict(os.environ, OMP_NUM_THREADS=str(t), OPENBLAS_NUM_THREADS=str(t),
                       MKL_NUM_THREADS=str(t), OMP_WAIT_POLICY=args.wait_policy)
            cmd = [sys.executable, os.path.abspath(__file__), "--child", n, str(t),
                   "--steps", str(args.steps), "--warmup", str(args.warmup),
                   "--dropout", str(args.dropout)] + (["--autocast"] if args.autocast else [])
            p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True)
            if p.returncode != 0:
                print(f"config {n} threads {t}: child failed with status {p.returncode}",
                      file=sys.stderr)
                failed = True
                continue
            r = json.loads(p.stdout.strip().splitlines()[-1])
            if args.json:
                print(json.dumps(r), flush=True)
            else:
                print(f"{n:<7}{t:>7}{r['median_ms']:>12.2f}{r['min_ms']:>12.2f}"
                      f"{r['tokens_per_s']:>12.0f}{r['peak_rss_mb']:>13.1f}{r['params']:>12}",
                      flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
