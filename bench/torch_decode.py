#!/usr/bin/env python3
"""PyTorch peer of tapegrad's translator decoding (build/translate): beam search, one sentence at
a time, with a model folder written by examples/train_translator, float32, CPU.

The model is rebuilt in PyTorch with tapegrad's parameter names, so model.safetensors loads 1:1
(load_state_dict strict): post-norm encoder-decoder (models/transformer.cc), ReLU feed-forward,
4 Linear projections per attention (w_q, w_k, w_v, w_o, weights [out, in] as torch.nn.Linear),
final norms on both stacks, embeddings * sqrt(d) + sinusoidal positions (computed in float64,
stored in float32), a separate generator Linear. Beam search is models/generate.cc's: the K best
continuations over all beams, eos ends a hypothesis (GNMT length penalty ((5 + len) / 6)^0.6),
stop once K finished and no live beam can beat the worst of them; with the key/value cache
(default) self-attention keys and values are appended, cross-attention ones projected once, and
all are reordered by the surviving beams' parents. The word tokenizer (text/split.cc,
text/vocab_tokenizer.cc) is re-implemented byte for byte, so source ids equal tapegrad's.

Timed per sentence as translate does: tokenize, encode, beam search, detokenize (model loading
and reading the input excluded). Each thread count runs in a fresh child process
(torch.set_num_threads(t), OMP_NUM_THREADS=t, OMP_WAIT_POLICY from --wait-policy); one JSON
line per thread count.

  /tmp/torch2/bin/python bench/torch_decode.py --load runs/translator \\
      --src /work/shared/data/multi30k/val.de.gz --threads 1,2 [--limit N] [--out FILE]
  # agreement with tapegrad on the first 20 sentences:
  zcat /work/shared/data/multi30k/val.de.gz | head -20 | build/translate --load runs/translator > tg.txt
  /tmp/torch2/bin/python bench/torch_decode.py --load runs/translator --src ... --limit 20 \\
      --threads 1 --check --compare tg.txt     (the differing lines go to stderr)
--no-cache recomputes the whole prefix at every step, as translate --no_cache.
"""
import argparse
import gzip
import json
import math
import os
import re
import struct
import sys
import time

from torch_children import cpu_model, run_per_thread  # bench/torch_children.py, beside this script

PAD, BOS, EOS, UNK = 0, 1, 2, 3


# ---- tokenizer (text/split.cc, text/vocab_tokenizer.cc, text/vocabulary.cc), on bytes ----

def _unescape(line):
    out, i = bytearray(), 0
    while i < len(line):
        if line[i:i + 1] == b"\\" and i + 1 < len(line) and line[i + 1:i + 2] in (b"\\", b"n", b"r"):
            out += {b"\\": b"\\", b"n": b"\n", b"r": b"\r"}[line[i + 1:i + 2]]
            i += 2
        else:
            out += line[i:i + 1]
            i += 1
    return bytes(out)


class WordTokenizer:
    # A word: a run of ASCII letters/digits, bytes >= 0x80 and apostrophes (C-locale isalnum);
    # C-locale whitespace separates; any other byte is a token of its own.
    WORD = re.compile(rb"[A-Za-z0-9\x80-\xff']+|[^A-Za-z0-9\x80-\xff'\s]")

    def __init__(self, path):
        data = open(path, "rb").read()
        nl = data.find(b"\n")
        header = data[:nl].rstrip(b"\r").decode()
        fields = header.split()
        if header in ("lowercase 0", "lowercase 1"):  # the older translator's files
            self.lowercase = header.endswith("1")
        elif fields[:3] == ["tapegrad", "tokenizer", "word"]:
            opts = dict(f.split("=", 1) for f in fields[3:])
            self.lowercase = opts.get("lowercase", "0") == "1"
            if opts.get("newlines", "0") == "1":
                sys.exit(f"{path}: newlines=1 is not supported here")
        else:
            sys.exit(f"{path}: not a word tokenizer (header {header!r})")
        body = data[nl + 1:]
        lines = body.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        self.tokens = [_unescape(l[:-1] if l.endswith(b"\r") else l) for l in lines]
        self.index = {t: i for i, t in enumerate(self.tokens)}
        assert self.tokens[:4] == [b"<pad>", b"<bos>", b"<eos>", b"<unk>"], path

    def encode(self, text):
        toks = self.WORD.findall(text)
        if self.lowercase:
            toks = [t.lower() for t in toks]  # bytes.lower() touches ASCII only, as tapegrad
        get = self.index.get
        return [get(t, UNK) for t in toks]

    def decode(self, ids):
        toks = []
        for i in ids:
            if i == EOS:
                break
            if i < 0 or i >= len(self.tokens) or i in (PAD, BOS):
                continue
            toks.append(self.tokens[i])
        return detokenize(toks)


def detokenize(tokens):
    out = bytearray()
    no_space_next = True
    for t in tokens:
        closing = len(t) == 1 and t in b".,!?;:)%\n"
        if out and not closing and not no_space_next:
            out += b" "
        out += t
        no_space_next = t in (b"(", b"-", b'"', b"\n")
        if t == b"-":  # "well - known" -> "well-known"
            out.pop()
            if out and out[-1:] == b" ":
                out.pop()
            out += b"-"
    return bytes(out)


# ---- model file ----

def read_safetensors(path):
    """-> (metadata dict, {name: float32 torch tensor})."""
    import torch
    try:
        from safetensors import safe_open
        with safe_open(path, framework="pt") as f:
            return dict(f.metadata() or {}), {k: f.get_tensor(k) for k in f.keys()}
    except ImportError:
        import numpy as np
        raw = open(path, "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        meta = header.pop("__metadata__", {})
        dtypes = {"F32": np.float32, "F64": np.float64, "I64": np.int64}
        tensors = {}
        for k, h in header.items():
            a, b = h["data_offsets"]
            arr = np.frombuffer(raw, dtype=dtypes[h["dtype"]], count=(b - a) // np.dtype(dtypes[h["dtype"]]).itemsize,
                                offset=8 + n + a).reshape(h["shape"])
            tensors[k] = torch.from_numpy(arr.copy())
        return meta, tensors


def build_model(meta, tensors):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    d, heads, ff = int(meta["width"]), int(meta["heads"]), int(meta["ff"])
    layers, max_len = int(meta["layers"]), int(meta["max_len"])
    dk = d // heads

    class MHA(nn.Module):
        def __init__(self):
            super().__init__()
            self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d, d) for _ in range(4))

        def split(self, x):  # [B, L, D] -> [B, h, L, d_k]
            return x.view(x.size(0), x.size(1), heads, dk).transpose(1, 2)

        def forward(self, x_q, x_kv, cache=None, fixed=False, causal=False):
            """cache: a dict {k, v} kept between calls (incremental decoding); fixed: computed once
            from x_kv, then reused (cross-attention)."""
            q = self.split(self.w_q(x_q))
            if cache is not None and fixed and "k" in cache:
                k, v = cache["k"], cache["v"]
            else:
                k, v = self.split(self.w_k(x_kv)), self.split(self.w_v(x_kv))
                if cache is not None:
                    if not fixed and "k" in cache:
                        k = torch.cat([cache["k"], k], 2)
                        v = torch.cat([cache["v"], v], 2)
                    cache["k"], cache["v"] = k, v
            # Causal only matters when several new queries are fed at once (no cache, or a
            # prefill); one query at a time sees every cached key.
            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal and q.size(2) > 1)
            B, T = x_q.size(0), x_q.size(1)
            return self.w_o(o.transpose(1, 2).reshape(B, T, d))

    class FFN(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear1, self.linear2 = nn.Linear(d, ff), nn.Linear(ff, d)

        def forward(self, x):
            return self.linear2(F.relu(self.linear1(x)))

    def ln():
        return nn.LayerNorm(d, eps=1e-5)

    class EncoderLayer(nn.Module):  # post-norm
        def __init__(self):
            super().__init__()
            self.self_attn, self.ffn, self.norm1, self.norm2 = MHA(), FFN(), ln(), ln()

        def forward(self, x):
            y = self.norm1(x + self.self_attn(x, x))
            return self.norm2(y + self.ffn(y))

    class DecoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn, self.cross_attn, self.ffn = MHA(), MHA(), FFN()
            self.norm1, self.norm2, self.norm3 = ln(), ln(), ln()

        def forward(self, x, memory, self_cache=None, cross_cache=None):
            y = self.norm1(x + self.self_attn(x, x, self_cache, causal=True))
            y = self.norm2(y + self.cross_attn(y, memory, cross_cache, fixed=True))
            return self.norm3(y + self.ffn(y))

    class Stack(nn.Module):
        def __init__(self, layer):
            super().__init__()
            self.layers = nn.ModuleList(layer() for _ in range(layers))
            self.norm = ln()

    class Transformer(nn.Module):
        def __init__(self, src_vocab, tgt_vocab, share, tie):
            super().__init__()
            self.src_embed = nn.Embedding(src_vocab, d)
            self.tgt_embed = self.src_embed if share else nn.Embedding(tgt_vocab, d)
            self.encoder, self.decoder = Stack(EncoderLayer), Stack(DecoderLayer)
            self.generator = None if tie else nn.Linear(d, tgt_vocab)
            # As SinusoidalPositionalEncoding::table: float64, then float32 (a buffer not in the file).
            pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
            i = torch.arange(0, d, 2, dtype=torch.float64)
            angle = pos / torch.pow(10000.0, i / d)
            pe = torch.zeros(max_len, d, dtype=torch.float64)
            pe[:, 0::2] = torch.sin(angle)
            pe[:, 1::2] = torch.cos(angle)[:, : d // 2]
            self.register_buffer("pe", pe.float(), persistent=False)
            self.scale = math.sqrt(d)

        def embed(self, e, ids, start=0):
            return e(ids) * self.scale + self.pe[start:start + ids.size(1)]

        def encode(self, src):
            h = self.embed(self.src_embed, src)
            for layer in self.encoder.layers:
                h = layer(h)
            return self.encoder.norm(h)

        def decode_last(self, tgt, memory, cache=None):
            """-> logits of the last position [B, V]; cache: {"length", "self", "cross"}."""
            start = cache["length"] if cache is not None else 0
            assert start + tgt.size(1) <= max_len, "past max_len"
            h = self.embed(self.tgt_embed, tgt, start)
            for i, layer in enumerate(self.decoder.layers):
                h = layer(h, memory, cache["self"][i] if cache else None, cache["cross"][i] if cache else None)
            if cache is not None:
                cache["length"] += tgt.size(1)
            h = self.decoder.norm(h[:, -1])
            return self.generator(h) if self.generator is not None else h @ self.tgt_embed.weight.t()

    share = "tgt_embed.weight" not in tensors
    tie = "generator.weight" not in tensors
    src_v = tensors["src_embed.weight"].shape[0]
    tgt_v = tensors["src_embed.weight" if share else "tgt_embed.weight"].shape[0]
    model = Transformer(src_v, tgt_v, share, tie)
    model.load_state_dict(tensors, strict=True)  # every name and shape, 1:1
    return model.eval(), max_len


def length_norm(n, alpha):
    return ((5.0 + n) / 6.0) ** alpha


def beam_search(model, src, bos, eos, max_len, K, use_cache=True, alpha=0.6):
    """models/generate.cc's beam_search for one sentence src [1, S]; -> the best token list."""
    import torch
    memory1 = model.encode(src)
    alive = [([bos], 0.0)]  # (ys with bos, log-prob)
    finished = []  # (tokens, log_prob, score, finished)
    layers = len(model.decoder.layers)
    cache = {"length": 0, "self": [{} for _ in range(layers)], "cross": [{} for _ in range(layers)]} if use_cache else None
    for _ in range(max_len):
        if not alive:
            break
        nb = len(alive)
        if use_cache:
            inp = torch.tensor([[ys[-1]] for ys, _ in alive])
        else:
            inp = torch.tensor([ys for ys, _ in alive])
        memory = memory1 if nb == 1 else memory1.expand(nb, -1, -1)
        lp = torch.log_softmax(model.decode_last(inp, memory, cache), -1)
        # The K best continuations of each beam, then the K best over all beams.
        top_lp, top_id = lp.topk(min(K, lp.size(1)), -1)
        top_lp, top_id = top_lp.tolist(), top_id.tolist()
        cands = [(alive[b][1] + top_lp[b][j], b, top_id[b][j]) for b in range(nb) for j in range(len(top_lp[b]))]
        cands.sort(key=lambda c: -c[0])
        nxt, parents = [], []
        for c_lp, b, tok in cands:
            if len(nxt) >= K:
                break
            ys = alive[b][0]
            if tok == eos:
                toks = ys[1:]
                finished.append((toks, c_lp, c_lp / length_norm(len(toks) + 1, alpha), True))
                continue
            nxt.append((ys + [tok], c_lp))
            parents.append(b)
        alive = nxt
        if use_cache and alive:
            rows = torch.tensor(parents)
            for c in cache["self"] + cache["cross"]:
                if "k" in c:
                    c["k"] = c["k"].index_select(0, rows)
                    c["v"] = c["v"].index_select(0, rows)
        if len(finished) >= K:
            finished.sort(key=lambda h: -h[2])
            del finished[K:]
            best_alive = alive[0][1] / length_norm(max_len, alpha) if alive else -math.inf
            if best_alive < finished[-1][2]:
                break
    for ys, l in alive:
        toks = ys[1:]
        finished.append((toks, l, l / length_norm(len(toks), alpha), False))
    finished.sort(key=lambda h: (not h[3], -h[2]))  # stable: finished first, then by score
    return finished[0][0] if finished else []


def read_sentences(path, limit):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")  # as std::getline: a final newline does not start another line
    if lines and lines[-1] == b"":
        lines.pop()
    return lines[:limit] if limit else lines


def child(threads, args):
    import torch
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    meta, tensors = read_safetensors(os.path.join(args.load, "model.safetensors"))
    if meta.get("tokenizer", "word") != "word":
        sys.exit(f"torch_decode.py: only the 'word' tokenizer is implemented, the model uses {meta['tokenizer']!r}")
    model, model_max_len = build_model(meta, tensors)
    src_tok = WordTokenizer(os.path.join(args.load, "src.txt"))
    tgt_tok = WordTokenizer(os.path.join(args.load, "tgt.txt"))
    load_s = time.perf_counter() - t0
    sentences = read_sentences(args.src, args.limit)
    max_len = min(args.max_len, model_max_len - 1)
    outs, seconds = [], 0.0
    with torch.inference_mode():
        for line in sentences:
            start = time.perf_counter()
            ids = src_tok.encode(line)
            if not ids:
                out = b""
            else:
                ids = ids[: model_max_len - 2]
                toks = beam_search(model, torch.tensor([ids]), BOS, EOS, max_len, args.beam, not args.no_cache)
                out = tgt_tok.decode(toks)
            seconds += time.perf_counter() - start
            outs.append(out)
    if args.out:
        with open(args.out, "wb") as f:
            f.write(b"".join(o + b"\n" for o in outs))
    r = dict(peer="pytorch", cache=not args.no_cache, threads=threads, beam=args.beam, max_len=max_len,
             sentences=len(sentences), seconds=round(seconds, 4),
             sentences_per_s=round(len(sentences) / seconds, 2) if seconds > 0 else 0.0,
             load_s=round(load_s, 3), wait_policy=os.environ.get("OMP_WAIT_POLICY"), torch=torch.__version__,
             cpu=cpu_model())
    if args.check:
        ref = read_sentences(args.compare, 0)
        n = min(len(ref), len(outs))
        same = sum(ref[i] == outs[i] for i in range(n))
        r.update(compared=n, identical=same)
        for i in range(n):
            if ref[i] != outs[i]:
                print(f"differs, line {i + 1}:\n  tapegrad: {ref[i].decode(errors='replace')}\n"
                      f"  pytorch:  {outs[i].decode(errors='replace')}", file=sys.stderr)
    print(json.dumps(r), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--load", default="runs/translator", help="model folder written by train_translator")
    ap.add_argument("--src", required=True, help="source sentences, one a line (plain or .gz)")
    ap.add_argument("--limit", type=int, default=0, help="first N sentences only (0: all)")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--max_len", type=int, default=80, help="most tokens per translation (as translate)")
    ap.add_argument("--no-cache", action="store_true", help="recompute the whole prefix at every step")
    ap.add_argument("--out", help="write the translations here, one a line (the last thread count's)")
    ap.add_argument("--check", action="store_true", help="compare the translations with --compare")
    ap.add_argument("--compare", help="tapegrad's translations of the same sentences, one a line")
    ap.add_argument("--wait-policy", default="passive", help="OMP_WAIT_POLICY for the children")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.check and not args.compare:
        ap.error("--check needs --compare FILE")
    if args.child is not None:
        child(args.child, args)
        return
    run_per_thread(__file__, args.threads, args.wait_policy, [a for a in sys.argv[1:] if a != "--child"])


if __name__ == "__main__":
    main()
