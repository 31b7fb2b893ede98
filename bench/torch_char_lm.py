#!/usr/bin/python3
"""PyTorch peer of examples/train_lm.cc: the same GPT-style character language model, trained
the same way, so wall time and validation loss can be compared with ./build/train_lm.

Meant for Debian's /usr/bin/python3 (torch 1.13, OpenMP + pthread OpenBLAS), float32, CPU:

    OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1 \\
      /usr/bin/python3 bench/torch_char_lm.py --text data/kjv.txt --threads 1

    (and the C++ side: ./build/train_lm --text data/kjv.txt --threads 1)

Threads: with --threads N > 0 the script sets OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and
MKL_NUM_THREADS to N in its own environment before importing torch, and calls
torch.set_num_threads(N) (torch.set_num_threads does not limit the pthread OpenBLAS that Debian's
torch calls through libblas.so.3). Still export OMP_WAIT_POLICY=passive (OpenMP threads otherwise
spin between parallel regions, which distorts timings on a loaded machine) and
OPENBLAS_NUM_THREADS=N yourself, as the other bench/torch_*.py runs do.

What is the same as train_lm:
  data      the file as bytes (.gz read through gzip); vocabulary = distinct bytes by descending
            count, ties by ascending byte value; first size*9//10 ids train, the rest validation.
  model     tok_embed [V, d] ~ N(0, 0.02), learned pos_embed [context, d] ~ N(0, 0.02),
            h = tok + pos (then dropout); per block (pre-norm):
              h = h + Dropout(W_o(Attn(W_q x, W_k x, W_v x))),  x = LayerNorm1(h)   (causal)
              h = h + Dropout(Linear2(Dropout(GELU_erf(Linear1(LayerNorm2(h))))))
            q/k/v/o projections: d x d with bias, Xavier-uniform weights (each its own d x d
            matrix), zero biases; FFN d -> 4d -> d with PyTorch's default Linear init;
            LayerNorm eps 1e-5; final LayerNorm; logits = h tok_embed^T (tied, no bias).
  training  AdamW(lr, betas (0.9, 0.99), eps 1e-8, weight_decay) over all parameters (biases,
            norms and embeddings included, as tg::AdamW over named_parameters());
            clip_grad_norm_ 1.0; lr of step s (1-based): lr*s/warmup for s <= warmup, then cosine
            to 0.1*lr at total = max(steps, warmup+1); B random windows of context+1 ids starting
            uniformly in [0, len(train)-context-1) (torch's generator: not train_lm's stream).
  eval      every --eval_every steps and after the last: mean cross-entropy (nats/char) over
            n = min((len(valid)-1)//context, eval_windows) windows starting at
            j*available//n*context, in batches of --batch, eval mode, no grad.

Attention implementation (--attn): all three are the same model with the same updates.
  fused     (default) one Linear(d, 3d) for q, k, v whose three d x d slices are initialised
            separately (AdamW is element-wise and clipping uses the global norm, so this equals
            separate q/k/v layers), then plain matmul / additive causal mask / softmax / matmul;
  separate  three nn.Linear(d, d) for q, k, v, same attention math;
  mha       nn.MultiheadAttention(batch_first=True), packed in_proj re-initialised per slice,
            out_proj Xavier, zero biases (torch 1.13's training path is the same bmm/softmax
            math plus input checks and batch_first transposes).
Measured on the default model (1 thread, batch 12 x 64, full training step, 2-core machine under
load, two interleaved runs): fused 82 / 82 ms, mha 82 / 81 ms, separate 87 / 84 ms median per step:
fused and mha tie within the noise, separate is a few per cent slower (three small GEMMs instead
of one); fused is the default as the plainest of the two fastest.

Timing: wall_s is the training steps alone (batch sampling, forward, backward, clipping, AdamW),
from the first step to the last, excluding data loading, model construction and every
evaluation; eval_s is the time spent in evaluation (periodic and final). train_lm's
"N s of training" covers its whole loop, i.e. also its periodic validations, the one after the
last step and its checkpoint writes: compare it with wall_s + eval_s (run both with the same
--eval_every; with --eval_every > --steps each validates once, after the last step).
"""
import argparse
import gzip
import json
import math
import os
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--text", default="data/kjv.txt", help="training text (bytes; .gz accepted)")
    ap.add_argument("--layers", type=int, default=4, help="transformer blocks")
    ap.add_argument("--heads", type=int, default=4, help="attention heads per block")
    ap.add_argument("--width", type=int, default=128, help="model width d_model (d_ff is 4x)")
    ap.add_argument("--context", type=int, default=64, help="characters per training sequence")
    ap.add_argument("--batch", type=int, default=12, help="sequences per step")
    ap.add_argument("--steps", type=int, default=2000, help="training steps")
    ap.add_argument("--lr", type=float, default=1e-3,
                    help="peak learning rate (AdamW, warm-up then cosine decay to 10%%)")
    ap.add_argument("--warmup", type=int, default=100, help="warm-up steps")
    ap.add_argument("--dropout", type=float, default=0.0, help="dropout")
    ap.add_argument("--weight_decay", type=float, default=0.01, help="AdamW weight decay")
    ap.add_argument("--eval_every", type=int, default=250, help="steps between validation runs")
    ap.add_argument("--eval_windows", type=int, default=200,
                    help="validation windows (of --context characters, evenly spaced)")
    ap.add_argument("--seed", type=int, default=1, help="random seed (weights, batches, dropout)")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads (0: leave torch's and the BLAS's defaults alone)")
    ap.add_argument("--attn", choices=("fused", "separate", "mha"), default="fused",
                    help="attention implementation (see above)")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="bf16: forward and loss under torch.autocast('cpu', torch.bfloat16), as its docs say "
                         "(float32 weights, optimizer and gradients), the peer of train_lm --precision bf16")
    ap.add_argument("--json", action="store_true", help="also print one JSON line with the results")
    args = ap.parse_args()
    L, H, D, T, B = args.layers, args.heads, args.width, args.context, args.batch
    if L < 1 or H < 1 or D < 1 or D % H != 0 or T < 2 or B < 1 or args.steps < 0:
        ap.error(f"bad model flags: --layers {L} --heads {H} --width {D} (a multiple of heads) "
                 f"--context {T} (>= 2) --batch {B} --steps {args.steps}")
    if args.warmup < 0 or args.eval_every < 1 or args.eval_windows < 1 or not 0 <= args.dropout < 1:
        ap.error("--warmup must be >= 0, --eval_every and --eval_windows >= 1, --dropout in [0, 1)")
    return args


ARGS = parse_args()
if ARGS.threads > 0:  # before torch (OpenMP) and OpenBLAS are loaded: they read these once
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(ARGS.threads)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


# ---- data ----

def read_bytes(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read()


def build_vocab(data):
    """Byte values by descending count; ties keep ascending byte order (a stable sort of 0..255)."""
    counts = torch.bincount(torch.frombuffer(bytearray(data), dtype=torch.uint8).long(), minlength=256).tolist()
    return sorted((c for c in range(256) if counts[c] > 0), key=lambda c: -counts[c])  # stable


def encode(data, chars):
    id_of = torch.full((256,), len(chars) - 1, dtype=torch.int64)
    id_of[torch.tensor(chars, dtype=torch.int64)] = torch.arange(len(chars), dtype=torch.int64)
    return id_of[torch.frombuffer(bytearray(data), dtype=torch.uint8).long()]


# ---- model ----

def xavier_slices_(weight, parts):
    """Xavier-uniform on each of `parts` stacked [d, d] blocks, as separate d x d layers get."""
    with torch.no_grad():
        for w in weight.chunk(parts, 0):
            nn.init.xavier_uniform_(w)


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads, impl, max_len):
        super().__init__()
        self.d, self.heads, self.dk, self.impl = d, heads, d // heads, impl
        if impl == "mha":
            self.mha = nn.MultiheadAttention(d, heads, dropout=0.0, bias=True, batch_first=True)
            xavier_slices_(self.mha.in_proj_weight, 3)
            nn.init.zeros_(self.mha.in_proj_bias)
            nn.init.xavier_uniform_(self.mha.out_proj.weight)
            nn.init.zeros_(self.mha.out_proj.bias)
        else:
            if impl == "fused":
                self.w_qkv = nn.Linear(d, 3 * d)
                xavier_slices_(self.w_qkv.weight, 3)
                nn.init.zeros_(self.w_qkv.bias)
            else:
                self.w_q, self.w_k, self.w_v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
                for lin in (self.w_q, self.w_k, self.w_v):
                    nn.init.xavier_uniform_(lin.weight)
                    nn.init.zeros_(lin.bias)
            self.w_o = nn.Linear(d, d)
            nn.init.xavier_uniform_(self.w_o.weight)
            nn.init.zeros_(self.w_o.bias)
        # Additive causal mask: 0 on and below the diagonal, -inf above (every query sees key 0,
        # so no row is all -inf).
        self.register_buffer(
            "mask", torch.full((max_len, max_len), float("-inf")).triu(1), persistent=False)
        self.scale = 1.0 / math.sqrt(self.dk)

    def forward(self, x):
        B, T, D = x.shape
        m = self.mask[:T, :T]
        if self.impl == "mha":
            return self.mha(x, x, x, attn_mask=m, need_weights=False)[0]
        if self.impl == "fused":
            q, k, v = self.w_qkv(x).split(D, dim=-1)
        else:
            q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)
        # [B, T, D] -> [B, h, T, d_k]
        q, k, v = (t.view(B, T, self.heads, self.dk).transpose(1, 2) for t in (q, k, v))
        w = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * self.scale + m, dim=-1)
        y = torch.matmul(w, v).transpose(1, 2).reshape(B, T, D)
        return self.w_o(y)


class Block(nn.Module):
    def __init__(self, d, heads, dropout, impl, max_len):
        super().__init__()
        self.norm1 = nn.LayerNorm(d, eps=1e-5)
        self.self_attn = CausalSelfAttention(d, heads, impl, max_len)
        self.norm2 = nn.LayerNorm(d, eps=1e-5)
        self.linear1 = nn.Linear(d, 4 * d)  # PyTorch's default init, as tg::Linear's
        self.linear2 = nn.Linear(4 * d, d)
        self.drop1, self.drop_ff, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, h):
        h = h + self.drop1(self.self_attn(self.norm1(h)))
        return h + self.drop2(self.linear2(self.drop_ff(F.gelu(self.linear1(self.norm2(h))))))


class DecoderLM(nn.Module):
    def __init__(self, vocab, context, d, heads, layers, dropout, impl):
        super().__init__()
        self.tok_embed = nn.Embedding(vocab, d)
        nn.init.normal_(self.tok_embed.weight, 0.0, 0.02)
        self.pos_embed = nn.Parameter(torch.empty(context, d).normal_(0.0, 0.02))
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList(Block(d, heads, dropout, impl, context) for _ in range(layers))
        self.norm = nn.LayerNorm(d, eps=1e-5)

    def forward(self, ids):
        T = ids.size(1)
        h = self.drop(self.tok_embed(ids) + self.pos_embed[:T])
        for layer in self.layers:
            h = layer(h)
        return F.linear(self.norm(h), self.tok_embed.weight)  # tied head, no bias


# ---- training ----

def lr_at(step, peak, warmup, total, min_lr):
    """tg::WarmupCosineSchedule, step 1-based."""
    if step <= warmup:
        return peak * step / warmup
    if step >= total:
        return min_lr
    progress = (step - warmup) / (total - warmup)
    return min_lr + 0.5 * (peak - min_lr) * (1 + math.cos(math.pi * progress))


def windows(ids, starts, length):
    """[len(starts), length+1] rows ids[s : s+length+1]."""
    return ids[starts.unsqueeze(1) + torch.arange(length + 1)]


@torch.no_grad()
def evaluate(model, ids, context, batch, max_windows):
    available = (len(ids) - 1) // context
    n = min(available, max_windows)
    if n <= 0:
        return float("nan")
    was = model.training
    model.eval()
    total, count = 0.0, 0
    for i in range(0, n, batch):
        starts = torch.tensor([j * available // n * context for j in range(i, min(n, i + batch))])
        w = windows(ids, starts, context)
        x, y = w[:, :-1], w[:, 1:]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=ARGS.precision == "bf16"):
            logits = model(x)
        total += F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1),
                                 reduction="sum").item()
        count += y.numel()
    model.train(was)
    return total / count


def main():
    a = ARGS
    L, H, D, T, B, steps = a.layers, a.heads, a.width, a.context, a.batch, a.steps
    if a.threads > 0:
        torch.set_num_threads(a.threads)

    try:
        data = read_bytes(a.text)
    except OSError as e:
        sys.exit(f"torch_char_lm: {a.text}: {e.strerror or e}")
    if len(data) < 20 * (T + 1):
        sys.exit(f"torch_char_lm: {a.text}: {len(data)} bytes is too little text for --context {T} "
                 f"(need at least {20 * (T + 1)})")
    chars = build_vocab(data)
    all_ids = encode(data, chars)
    cut = len(all_ids) * 9 // 10
    train, valid = all_ids[:cut].clone(), all_ids[cut:].clone()

    torch.manual_seed(a.seed)
    model = DecoderLM(len(chars), T, D, H, L, a.dropout, a.attn)
    model.train()
    params = list(model.parameters())  # the tied head counts once
    n_params = sum(p.numel() for p in params)
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.99), eps=1e-8, weight_decay=a.weight_decay)
    total = max(steps, a.warmup + 1)
    min_lr = 0.1 * a.lr
    gen = torch.Generator().manual_seed(a.seed * 1000003)
    span = len(train) - T - 1

    print(f"torch_char_lm: {a.text}, {len(data)} characters ({len(chars)} distinct), "
          f"{len(valid)} held out; {n_params} parameters; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, attention {a.attn}, precision {a.precision}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}", flush=True)

    smooth, valid_loss, eval_s = float("nan"), float("nan"), 0.0
    t0 = time.perf_counter()
    for step in range(steps):
        w = windows(train, torch.randint(0, span, (B,), generator=gen), T)
        x, y = w[:, :-1], w[:, 1:]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        lr = lr_at(step + 1, a.lr, a.warmup, total, min_lr)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        l = loss.item()
        smooth = l if math.isnan(smooth) else 0.95 * smooth + 0.05 * l
        if (step + 1) % a.eval_every == 0 and step + 1 != steps:
            e0 = time.perf_counter()
            valid_loss = evaluate(model, valid, T, B, a.eval_windows)
            eval_s += time.perf_counter() - e0
            print(f"step {step + 1}/{steps}  loss {smooth:.4f}  lr {lr:.2e}  valid {valid_loss:.4f}  "
                  f"{time.perf_counter() - t0 - eval_s:.1f} s", flush=True)
    wall_s = time.perf_counter() - t0 - eval_s

    e0 = time.perf_counter()
    valid_loss = evaluate(model, valid, T, B, a.eval_windows)
    eval_s += time.perf_counter() - e0
    steps_per_s = steps / wall_s if wall_s > 0 else float("nan")
    tokens_per_s = steps * B * T / wall_s if wall_s > 0 else float("nan")
    print(f"step {steps}/{steps}  loss {smooth:.4f}  valid {valid_loss:.4f}")
    print(f"validation loss {valid_loss:.4f} nats/char ({valid_loss / math.log(2.0):.3f} bits/char), "
          f"{wall_s:.1f} s of training ({steps_per_s:.2f} steps/s, {tokens_per_s:.0f} tokens/s), "
          f"{eval_s:.1f} s of evaluation", flush=True)
    if a.json:
        print(json.dumps(dict(
            program="torch_char_lm", text=a.text, chars=len(data), vocab=len(chars),
            params=n_params, layers=L, heads=H, width=D, context=T, batch=B, steps=steps,
            lr=a.lr, warmup=a.warmup, dropout=a.dropout, weight_decay=a.weight_decay,
            eval_windows=a.eval_windows, seed=a.seed, attn=a.attn, precision=a.precision,
            threads=torch.get_num_threads(), omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"),
            openblas_num_threads=os.environ.get("OPENBLAS_NUM_THREADS"),
            torch=torch.__version__, wall_s=wall_s, eval_s=eval_s, train_loss_smoothed=smooth,
            valid_loss=valid_loss, steps_per_s=steps_per_s, tokens_per_s=tokens_per_s)), flush=True)


if __name__ == "__main__":
    main()
