#!/usr/bin/python3
"""Writes the module/optimizer golden files tests/golden/*.safetensors from PyTorch.

Regenerate with Debian's interpreter, which has python3-torch (PyTorch 1.13) installed:

    /usr/bin/python3 tests/golden/make_module_golden.py

(plain `python3` may be another interpreter without torch). The script needs no `safetensors`
package: it writes the format itself and, after writing, re-reads every file with its own reader
and checks it (offsets, exact round trip, and an independent re-implementation of each module and
optimizer, written against our parameter names, that must reproduce the stored outputs and
gradients).

Format (safetensors): 8-byte little-endian u64 N, then N bytes of JSON header padded with spaces so
that 8 + N is a multiple of 8, then the data section. The header maps each tensor name to
{"dtype": "F64" | "I64" | "BOOL", "shape": [...], "data_offsets": [begin, end]} (offsets relative to
the data section; tensors back to back in header order, no holes), plus "__metadata__" (a
string -> string map with the case's hyper-parameters). F64/I64 are little-endian, BOOL one byte
(0 or 1).

Names in each module file:
    <P>                 every parameter, under our PyTorch-style names (w_q/w_k/w_v/w_o, ffn.linear1, ...)
    input.<name>        forward inputs (masks are BOOL with True = hidden / not attended to)
    input.gout          the upstream gradient (random, shape of the output)
    output              the forward output
    grad.<P>            d/dP of sum(output * gout)
    grad.input.<name>   d/d(input) of sum(output * gout), for float inputs only
Everything is float64, dropout is 0, tensors are batch-first [B, T, D].
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)

OUT_DIR = os.path.dirname(os.path.abspath(__file__))
LN_EPS = 1e-5

# ================================================================================================
# safetensors writer / reader
# ================================================================================================

_DTYPES = {torch.float64: ("F64", "<f8"), torch.int64: ("I64", "<i8"), torch.bool: ("BOOL", "|u1")}
_NP_FROM_TAG = {"F64": "<f8", "I64": "<i8", "BOOL": "|u1"}
WRITTEN = {}  # path -> (list of (name, tensor), metadata), for the round-trip check


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, torch tensor) in the order to write; metadata: dict str -> str."""
    header = {}
    chunks = []
    offset = 0
    seen = set()
    for name, t in tensors:
        assert name not in seen, f"duplicate tensor name {name}"
        seen.add(name)
        t = t.detach().contiguous()
        tag, npdt = _DTYPES[t.dtype]
        arr = t.numpy().astype(np.uint8) if t.dtype == torch.bool else t.numpy()
        raw = np.ascontiguousarray(arr).astype(npdt, copy=False).tobytes()
        header[name] = {"dtype": tag, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    for k, v in metadata.items():
        assert isinstance(k, str) and isinstance(v, str), (k, v)
    header["__metadata__"] = dict(metadata)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    pad = (-(8 + len(hjson))) % 8
    hjson += b" " * pad
    WRITTEN[path] = ([(n, t.detach().clone()) for n, t in tensors], dict(metadata))
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for c in chunks:
            f.write(c)


def read_safetensors(path):
    """Returns (ordered dict name -> torch tensor, metadata). Checks the layout strictly."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    assert (8 + n) % 8 == 0, "header not padded to a multiple of 8"
    hjson = blob[8:8 + n]
    assert hjson.rstrip(b" ") == hjson.rstrip(), "header padding must be spaces"
    header = json.loads(hjson.decode("utf-8"))
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())
    out = {}
    expect = 0
    for name, info in header.items():  # json.loads keeps file order
        begin, end = info["data_offsets"]
        assert begin == expect, f"{path}:{name}: hole/overlap at {begin} (expected {expect})"
        npdt = _NP_FROM_TAG[info["dtype"]]
        numel = int(np.prod(info["shape"])) if info["shape"] else 1
        assert end - begin == numel * np.dtype(npdt).itemsize, f"{path}:{name}: size mismatch"
        arr = np.frombuffer(data[begin:end], dtype=npdt).reshape(info["shape"])
        if info["dtype"] == "BOOL":
            assert set(np.unique(arr).tolist()) <= {0, 1}
            out[name] = torch.from_numpy(arr.astype(bool).copy())
        else:
            out[name] = torch.from_numpy(arr.astype(np.float64 if info["dtype"] == "F64" else np.int64))
        expect = end
    assert expect == len(data), f"{path}: data section has {len(data)} bytes, tensors cover {expect}"
    return out, meta


# ================================================================================================
# helpers
# ================================================================================================


def randomize_extras(module, scale=0.2):
    """torch initialises biases to 0 and LayerNorm weights to 1: make them random so they matter."""
    with torch.no_grad():
        for mod in module.modules():
            if isinstance(mod, nn.LayerNorm):
                mod.weight.copy_(1.0 + scale * torch.randn_like(mod.weight))
                mod.bias.copy_(scale * torch.randn_like(mod.bias))
            elif isinstance(mod, nn.MultiheadAttention):
                mod.in_proj_bias.copy_(scale * torch.randn_like(mod.in_proj_bias))
                mod.out_proj.bias.copy_(scale * torch.randn_like(mod.out_proj.bias))
            elif isinstance(mod, nn.Linear) and mod.bias is not None:
                mod.bias.copy_(scale * torch.randn_like(mod.bias))


def our_names(torch_name, tensor):
    """Maps one torch parameter (name, tensor) onto our names: list of (name, tensor)."""
    parts = torch_name.split(".")
    parts = ["cross_attn" if p == "multihead_attn" else p for p in parts]
    if parts[-1] in ("in_proj_weight", "in_proj_bias"):
        kind = "weight" if parts[-1] == "in_proj_weight" else "bias"
        prefix = ".".join(parts[:-1])
        prefix = prefix + "." if prefix else ""
        q, k, v = tensor.chunk(3, dim=0)
        return [(f"{prefix}w_q.{kind}", q), (f"{prefix}w_k.{kind}", k), (f"{prefix}w_v.{kind}", v)]
    out = []
    for i, p in enumerate(parts):
        if p == "out_proj":
            out.append("w_o")
        elif p in ("linear1", "linear2"):
            out += ["ffn", p]
        else:
            out.append(p)
    return [(".".join(out), tensor)]


def params_and_grads(module, prefix=""):
    params, grads = [], []
    for tname, p in module.named_parameters():
        assert p.grad is not None, tname
        for (n, t), (_, g) in zip(our_names(tname, p.detach()), our_names(tname, p.grad)):
            params.append((prefix + n, t))
            grads.append(("grad." + prefix + n, g))
    return params, grads


def causal_mask(t):
    return torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)  # True above the diagonal = hidden


def common_meta(**kw):
    m = {
        "generator": "tests/golden/make_module_golden.py",
        "torch_version": torch.__version__,
        "dtype": "float64",
        "dropout": "0",
        "batch_first": "true",
        "mask_convention": "bool, True = hidden (not attended to)",
        "loss": "sum(output * input.gout)",
    }
    m.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in kw.items()})
    return m


def finish_case(fname, module, float_inputs, other_inputs, output, meta, param_prefix=""):
    """float_inputs / other_inputs: list of (name, tensor). Backprops sum(output * gout)."""
    gout = torch.randn_like(output)
    (output * gout).sum().backward()
    params, grads = params_and_grads(module, param_prefix)
    tensors = list(params)
    tensors += [("input." + n, t.detach()) for n, t in float_inputs]
    tensors += [("input." + n, t) for n, t in other_inputs]
    tensors += [("input.gout", gout), ("output", output.detach())]
    tensors += grads
    tensors += [("grad.input." + n, t.grad) for n, t in float_inputs]
    path = os.path.join(OUT_DIR, fname)
    write_safetensors(path, tensors, meta)
    return path


def inp(*shape):
    return torch.randn(*shape).requires_grad_(True)


# ================================================================================================
# cases
# ================================================================================================


def make_mha_self():
    torch.manual_seed(101)
    B, T, D, H = 2, 5, 8, 2
    mha = nn.MultiheadAttention(D, H, dropout=0.0, batch_first=True)
    randomize_extras(mha)
    mha.train()
    x = inp(B, T, D)
    mask = causal_mask(T)
    y, _ = mha(x, x, x, attn_mask=mask, need_weights=False)
    meta = common_meta(case="mha_self", d_model=D, heads=H, batch=B, seq_len=T,
                       forward="MHA(x_q=input.x, x_kv=input.x, attn_mask=input.attn_mask); "
                               "grad.input.x is the total gradient through q, k and v",
                       mask_form="input.attn_mask: [T,T] bool causal, True above the diagonal")
    return finish_case("mha_self.safetensors", mha, [("x", x)], [("attn_mask", mask)], y, meta)


def make_mha_cross():
    torch.manual_seed(102)
    B, T, S, D, H = 2, 5, 7, 12, 3
    mha = nn.MultiheadAttention(D, H, dropout=0.0, batch_first=True)
    randomize_extras(mha)
    mha.train()
    xq, xkv = inp(B, T, D), inp(B, S, D)
    kpm = torch.zeros(B, S, dtype=torch.bool)
    kpm[1, 4:] = True  # batch row 1: last 3 keys hidden
    y, _ = mha(xq, xkv, xkv, key_padding_mask=kpm, need_weights=False)
    meta = common_meta(case="mha_cross", d_model=D, heads=H, batch=B, q_len=T, kv_len=S,
                       forward="MHA(x_q=input.x_q, x_kv=input.x_kv, key_padding_mask=input.key_padding_mask)",
                       mask_form="input.key_padding_mask: [B,S] bool, True = padded key")
    return finish_case("mha_cross.safetensors", mha, [("x_q", xq), ("x_kv", xkv)],
                       [("key_padding_mask", kpm)], y, meta)


def make_encoder_layer(fname, seed, norm_first, activation):
    torch.manual_seed(seed)
    B, T, D, H, FF = 2, 5, 12, 3, 16
    layer = nn.TransformerEncoderLayer(D, H, dim_feedforward=FF, dropout=0.0, activation=activation,
                                       batch_first=True, norm_first=norm_first)
    randomize_extras(layer)
    layer.train()
    src = inp(B, T, D)
    kpm = torch.zeros(B, T, dtype=torch.bool)
    kpm[0, 3:] = True  # batch row 0: last 2 positions padded
    y = layer(src, src_key_padding_mask=kpm)
    meta = common_meta(case=fname.split(".")[0], d_model=D, heads=H, d_ff=FF, batch=B, seq_len=T,
                       norm_first=norm_first, activation=activation + (" (exact erf)" if activation == "gelu" else ""),
                       layer_norm_eps=LN_EPS,
                       forward="torch.nn.TransformerEncoderLayer(src=input.src, "
                               "src_key_padding_mask=input.src_key_padding_mask)",
                       mask_form="input.src_key_padding_mask: [B,T] bool, True = padded key; "
                                 "padded query rows are still computed and carry gradient")
    return finish_case(fname, layer, [("src", src)], [("src_key_padding_mask", kpm)], y, meta)


def make_decoder_layer():
    torch.manual_seed(104)
    B, T, S, D, H, FF = 2, 5, 7, 8, 2, 16
    layer = nn.TransformerDecoderLayer(D, H, dim_feedforward=FF, dropout=0.0, activation="relu",
                                       batch_first=True, norm_first=False)
    randomize_extras(layer)
    layer.train()
    tgt, memory = inp(B, T, D), inp(B, S, D)
    tmask = causal_mask(T)
    mkpm = torch.zeros(B, S, dtype=torch.bool)
    mkpm[1, 5:] = True  # batch row 1: last 2 memory positions padded
    y = layer(tgt, memory, tgt_mask=tmask, memory_key_padding_mask=mkpm)
    meta = common_meta(case="decoder_layer", d_model=D, heads=H, d_ff=FF, batch=B, tgt_len=T, mem_len=S,
                       norm_first=False, activation="relu", layer_norm_eps=LN_EPS,
                       forward="torch.nn.TransformerDecoderLayer(tgt=input.tgt, memory=input.memory, "
                               "tgt_mask=input.tgt_mask, memory_key_padding_mask=input.memory_key_padding_mask)",
                       mask_form="input.tgt_mask: [T,T] bool causal (True above diagonal) for self_attn; "
                                 "input.memory_key_padding_mask: [B,S] bool for cross_attn")
    return finish_case("decoder_layer.safetensors", layer, [("tgt", tgt), ("memory", memory)],
                       [("tgt_mask", tmask), ("memory_key_padding_mask", mkpm)], y, meta)


def sinusoidal_pe(max_len, d):
    pe = torch.zeros(max_len, d)
    pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
    two_i = torch.arange(0, d, 2, dtype=torch.float64)
    div = torch.pow(torch.tensor(10000.0), two_i / d)
    pe[:, 0::2] = torch.sin(pos / div)
    pe[:, 1::2] = torch.cos(pos / div)
    return pe


class Seq2Seq(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d, heads, d_ff, n_enc, n_dec):
        super().__init__()
        self.d = d
        self.src_embed = nn.Embedding(src_vocab, d)  # no padding_idx: row 0 gets a gradient too
        self.tgt_embed = nn.Embedding(tgt_vocab, d)
        self.transformer = nn.Transformer(d_model=d, nhead=heads, num_encoder_layers=n_enc,
                                          num_decoder_layers=n_dec, dim_feedforward=d_ff, dropout=0.0,
                                          activation="relu", batch_first=True, norm_first=False)
        self.generator = nn.Linear(d, tgt_vocab)

    def forward(self, src_ids, tgt_ids):
        S, T = src_ids.shape[1], tgt_ids.shape[1]
        pe = sinusoidal_pe(max(S, T), self.d)
        src_x = self.src_embed(src_ids) * math.sqrt(self.d) + pe[:S]
        tgt_x = self.tgt_embed(tgt_ids) * math.sqrt(self.d) + pe[:T]
        src_kpm = src_ids == 0
        out = self.transformer(src_x, tgt_x, tgt_mask=causal_mask(T), src_key_padding_mask=src_kpm,
                               memory_key_padding_mask=src_kpm)
        return self.generator(out)


def make_transformer():
    torch.manual_seed(105)
    SV, TV, D, H, FF, NE, ND = 11, 13, 8, 2, 16, 2, 2
    model = Seq2Seq(SV, TV, D, H, FF, NE, ND)
    randomize_extras(model)
    model.train()
    src_ids = torch.tensor([[3, 7, 1, 9, 4, 10],
                            [5, 2, 8, 6, 0, 0]], dtype=torch.int64)  # row 1 padded at its end
    tgt_ids = torch.tensor([[1, 4, 12, 7, 3],
                            [1, 9, 2, 0, 0]], dtype=torch.int64)   # trailing 0s: NOT masked (causal only)
    logits = model(src_ids, tgt_ids)
    gout = torch.randn_like(logits)
    (logits * gout).sum().backward()
    params, grads = [], []
    for tname, p in model.named_parameters():
        name = tname[len("transformer."):] if tname.startswith("transformer.") else tname
        for (n, t), (_, g) in zip(our_names(name, p.detach()), our_names(name, p.grad)):
            params.append((n, t))
            grads.append(("grad." + n, g))
    tensors = params + [("input.src_ids", src_ids), ("input.tgt_ids", tgt_ids), ("input.gout", gout),
                        ("output", logits.detach())] + grads
    meta = common_meta(case="transformer", d_model=D, heads=H, d_ff=FF, encoder_layers=NE, decoder_layers=ND,
                       src_vocab=SV, tgt_vocab=TV, pad_id=0, norm_first=False, activation="relu",
                       layer_norm_eps=LN_EPS, batch=2, src_len=src_ids.shape[1], tgt_len=tgt_ids.shape[1],
                       embedding_scale="sqrt(d_model)", embedding_padding_idx="none",
                       positional_encoding="PE[pos,2i]=sin(pos/10000^(2i/d)), PE[pos,2i+1]=cos(pos/10000^(2i/d))",
                       forward="src_x=src_embed(src_ids)*sqrt(d)+PE[:S]; tgt_x=tgt_embed(tgt_ids)*sqrt(d)+PE[:T]; "
                               "memory=encoder(src_x, src_key_padding_mask=(src_ids==0)) (layers then encoder.norm); "
                               "out=decoder(tgt_x, memory, tgt_mask=causal, memory_key_padding_mask=(src_ids==0)) "
                               "(layers then decoder.norm); output=generator(out)",
                       mask_form="src padding mask = (input.src_ids == 0), used for encoder self-attn and decoder "
                                 "cross-attn; decoder self-attn uses only the causal mask (tgt pad ids not masked)")
    path = os.path.join(OUT_DIR, "transformer.safetensors")
    write_safetensors(path, tensors, meta)
    return path


OPTIM_CONFIGS = [
    ("sgd", "SGD", dict(lr=0.1)),
    ("sgd_momentum", "SGD", dict(lr=0.05, momentum=0.9, dampening=0.0, weight_decay=0.01)),
    ("sgd_nesterov", "SGD", dict(lr=0.05, momentum=0.9, dampening=0.0, nesterov=True, weight_decay=0.01)),
    ("adam", "Adam", dict(lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)),
    ("adam_wd", "Adam", dict(lr=0.05, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)),
    ("adamw", "AdamW", dict(lr=0.1, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.01)),
]
OPTIM_STEPS = 20


def optim_loss(w, c, d):
    return (torch.sin(w) * c + w * w * d).sum()


def make_optim():
    torch.manual_seed(106)
    w0 = torch.randn(3, 4)
    c = torch.randn(3, 4)
    d = torch.rand(3, 4) * 0.5 + 0.1  # positive: the loss is bounded below
    tensors = [("w0", w0), ("c", c), ("d", d)]
    meta = common_meta(case="optim", steps=OPTIM_STEPS, configs=",".join(n for n, _, _ in OPTIM_CONFIGS),
                       loss="sum(sin(w) * c + w*w * d)",
                       procedure="w = w0.clone(); per step: zero_grad, loss(w).backward(), opt.step(); "
                                 "<config>.step<k> = w after step k (k = 1..steps)")
    for k in ("mask_convention", "dropout", "batch_first"):
        del meta[k]
    for name, cls, kw in OPTIM_CONFIGS:
        w = w0.clone().requires_grad_(True)
        opt = getattr(torch.optim, cls)([w], **kw)
        meta[f"{name}.optimizer"] = cls
        full = dict(opt.defaults)
        for k, v in full.items():
            if k in ("foreach", "differentiable", "capturable", "maximize", "amsgrad", "fused"):
                continue
            if isinstance(v, (tuple, list)):
                for i, vi in enumerate(v):
                    meta[f"{name}.beta{i + 1}" if k == "betas" else f"{name}.{k}.{i}"] = repr(float(vi))
            elif isinstance(v, bool):
                meta[f"{name}.{k}"] = str(v).lower()
            else:
                meta[f"{name}.{k}"] = repr(float(v))
        for k in range(1, OPTIM_STEPS + 1):
            opt.zero_grad()
            optim_loss(w, c, d).backward()
            opt.step()
            tensors.append((f"{name}.step{k}", w.detach().clone()))
    path = os.path.join(OUT_DIR, "optim.safetensors")
    write_safetensors(path, tensors, meta)
    return path


# ================================================================================================
# independent check: re-implement everything from our parameter names and compare
# ================================================================================================


def ref_linear(P, name, x):
    return x @ P[name + ".weight"].T + P[name + ".bias"]


def ref_ln(P, name, x):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + LN_EPS) * P[name + ".weight"] + P[name + ".bias"]


def ref_mha(P, pre, xq, xkv, heads, attn_mask=None, kpm=None):
    B, T, D = xq.shape
    S = xkv.shape[1]
    dh = D // heads
    q = ref_linear(P, pre + "w_q", xq).view(B, T, heads, dh).transpose(1, 2)
    k = ref_linear(P, pre + "w_k", xkv).view(B, S, heads, dh).transpose(1, 2)
    v = ref_linear(P, pre + "w_v", xkv).view(B, S, heads, dh).transpose(1, 2)
    s = q @ k.transpose(-1, -2) / math.sqrt(dh)
    hidden = torch.zeros(B, 1, T, S, dtype=torch.bool)
    if attn_mask is not None:
        hidden = hidden | attn_mask.view(1, 1, T, S)
    if kpm is not None:
        hidden = hidden | kpm.view(B, 1, 1, S)
    s = s.masked_fill(hidden, float("-inf"))
    a = torch.softmax(s, -1)
    o = (a @ v).transpose(1, 2).reshape(B, T, D)
    return ref_linear(P, pre + "w_o", o)


def ref_ffn(P, pre, x, act):
    h = ref_linear(P, pre + "ffn.linear1", x)
    h = torch.relu(h) if act == "relu" else F.gelu(h)
    return ref_linear(P, pre + "ffn.linear2", h)


def ref_enc_layer(P, pre, x, heads, kpm, norm_first, act):
    if norm_first:
        h = ref_ln(P, pre + "norm1", x)
        x = x + ref_mha(P, pre + "self_attn.", h, h, heads, kpm=kpm)
        return x + ref_ffn(P, pre, ref_ln(P, pre + "norm2", x), act)
    x = ref_ln(P, pre + "norm1", x + ref_mha(P, pre + "self_attn.", x, x, heads, kpm=kpm))
    return ref_ln(P, pre + "norm2", x + ref_ffn(P, pre, x, act))


def ref_dec_layer(P, pre, x, mem, heads, tmask, mkpm, act="relu"):
    x = ref_ln(P, pre + "norm1", x + ref_mha(P, pre + "self_attn.", x, x, heads, attn_mask=tmask))
    x = ref_ln(P, pre + "norm2", x + ref_mha(P, pre + "cross_attn.", x, mem, heads, kpm=mkpm))
    return ref_ln(P, pre + "norm3", x + ref_ffn(P, pre, x, act))


def check_grads(path, fn, float_input_names):
    """Loads a module file, recomputes output and all gradients with fn(P, I) and compares."""
    t, meta = read_safetensors(path)
    pnames = [n for n in t if not n.startswith(("input.", "grad.", "output"))]
    P = {n: t[n].clone().requires_grad_(True) for n in pnames}
    I = {n[len("input."):]: t[n].clone() for n in t if n.startswith("input.")}
    for n in float_input_names:
        I[n].requires_grad_(True)
    out = fn(P, I, meta)
    err = (out - t["output"]).abs().max().item()
    assert err < 1e-10, f"{path}: output mismatch {err}"
    (out * I["gout"]).sum().backward()
    worst = 0.0
    for n in pnames:
        g = t["grad." + n]
        worst = max(worst, (P[n].grad - g).abs().max().item())
    for n in float_input_names:
        worst = max(worst, (I[n].grad - t["grad.input." + n]).abs().max().item())
    assert worst < 1e-10, f"{path}: gradient mismatch {worst}"
    expected = set(pnames) | {"grad." + n for n in pnames} | {"input." + n for n in I} | {"output"} | \
        {"grad.input." + n for n in float_input_names}
    assert set(t) == expected, f"{path}: unexpected names {set(t) ^ expected}"
    return err, worst


def ref_optim(name, cls, kw, w0, c, d, steps):
    """Plain re-implementation of torch 1.13's SGD / Adam / AdamW update rules."""
    w = w0.clone()
    lr, wd = kw["lr"], kw.get("weight_decay", 0.0)
    mom, damp, nest = kw.get("momentum", 0.0), kw.get("dampening", 0.0), kw.get("nesterov", False)
    b1, b2 = kw.get("betas", (0.9, 0.999))
    eps = kw.get("eps", 1e-8)
    buf, m, v = None, torch.zeros_like(w), torch.zeros_like(w)
    traj = []
    for k in range(1, steps + 1):
        g = torch.cos(w) * c + 2 * w * d  # analytic gradient of the loss
        if cls == "SGD":
            if wd:
                g = g + wd * w
            if mom:
                buf = g.clone() if buf is None else mom * buf + (1 - damp) * g
                g = g + mom * buf if nest else buf
            w = w - lr * g
        else:
            if cls == "AdamW":
                w = w * (1 - lr * wd)
            elif wd:
                g = g + wd * w
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            bc1, bc2 = 1 - b1 ** k, 1 - b2 ** k
            w = w - (lr / bc1) * m / (v.sqrt() / math.sqrt(bc2) + eps)
        traj.append(w)
    return traj


def verify(paths):
    # 1. layout (checked by the reader) + exact round trip of names, order, dtypes, shapes, values
    for p in paths:
        t, meta = read_safetensors(p)
        written, wmeta = WRITTEN[p]
        assert meta == wmeta, f"{p}: metadata differs"
        assert list(t) == [n for n, _ in written], f"{p}: names/order differ"
        for n, w in written:
            assert t[n].dtype == w.dtype and t[n].shape == w.shape, f"{p}:{n}: dtype/shape differ"
            assert torch.equal(t[n], w), f"{p}:{n}: values differ"
            if w.dtype == torch.float64:
                assert torch.isfinite(w).all(), f"{p}:{n}: non-finite"
        assert os.path.getsize(p) < 150 * 1024, f"{p}: too big"
    # 2. semantics, re-implemented from our names
    def heads(meta):
        return int(meta["heads"])

    res = {}
    res["mha_self"] = check_grads(os.path.join(OUT_DIR, "mha_self.safetensors"),
                                  lambda P, I, m: ref_mha(P, "", I["x"], I["x"], heads(m), attn_mask=I["attn_mask"]),
                                  ["x"])
    res["mha_cross"] = check_grads(os.path.join(OUT_DIR, "mha_cross.safetensors"),
                                   lambda P, I, m: ref_mha(P, "", I["x_q"], I["x_kv"], heads(m),
                                                           kpm=I["key_padding_mask"]),
                                   ["x_q", "x_kv"])
    for f in ("encoder_layer", "encoder_layer_prenorm"):
        res[f] = check_grads(os.path.join(OUT_DIR, f + ".safetensors"),
                             lambda P, I, m: ref_enc_layer(P, "", I["src"], heads(m), I["src_key_padding_mask"],
                                                           m["norm_first"] == "true", m["activation"].split()[0]),
                             ["src"])
    res["decoder_layer"] = check_grads(os.path.join(OUT_DIR, "decoder_layer.safetensors"),
                                       lambda P, I, m: ref_dec_layer(P, "", I["tgt"], I["memory"], heads(m),
                                                                     I["tgt_mask"], I["memory_key_padding_mask"]),
                                       ["tgt", "memory"])

    def transformer(P, I, m):
        d, h = int(m["d_model"]), heads(m)
        src, tgt = I["src_ids"], I["tgt_ids"]
        S, T = src.shape[1], tgt.shape[1]
        pe = torch.zeros(max(S, T), d)
        for pos in range(max(S, T)):
            for i in range(0, d, 2):
                pe[pos, i] = math.sin(pos / 10000 ** (i / d))
                pe[pos, i + 1] = math.cos(pos / 10000 ** (i / d))
        x = P["src_embed.weight"][src] * math.sqrt(d) + pe[:S]
        kpm = src == 0
        for l in range(int(m["encoder_layers"])):
            x = ref_enc_layer(P, f"encoder.layers.{l}.", x, h, kpm, False, "relu")
        mem = ref_ln(P, "encoder.norm", x)
        y = P["tgt_embed.weight"][tgt] * math.sqrt(d) + pe[:T]
        for l in range(int(m["decoder_layers"])):
            y = ref_dec_layer(P, f"decoder.layers.{l}.", y, mem, h, causal_mask(T), kpm)
        y = ref_ln(P, "decoder.norm", y)
        return ref_linear(P, "generator", y)

    res["transformer"] = check_grads(os.path.join(OUT_DIR, "transformer.safetensors"), transformer, [])

    t, meta = read_safetensors(os.path.join(OUT_DIR, "optim.safetensors"))
    worst = 0.0
    for name, cls, kw in OPTIM_CONFIGS:
        traj = ref_optim(name, cls, kw, t["w0"], t["c"], t["d"], OPTIM_STEPS)
        for k, w in enumerate(traj, 1):
            worst = max(worst, (w - t[f"{name}.step{k}"]).abs().max().item())
        moved = (t[f"{name}.step{OPTIM_STEPS}"] - t["w0"]).abs().max().item()
        assert moved > 1e-2, f"{name} barely moved"
    assert worst < 1e-12, f"optim trajectory mismatch {worst}"
    res["optim"] = (worst,)
    return res


def main():
    paths = [
        make_mha_self(),
        make_mha_cross(),
        make_encoder_layer("encoder_layer.safetensors", 103, False, "relu"),
        make_encoder_layer("encoder_layer_prenorm.safetensors", 113, True, "gelu"),
        make_decoder_layer(),
        make_transformer(),
        make_optim(),
    ]
    res = verify(paths)
    for p in paths:
        t, meta = read_safetensors(p)
        print(f"{os.path.relpath(p)}: {os.path.getsize(p)} bytes, {len(t)} tensors")
    for k, v in res.items():
        print(f"  verified {k}: max abs diffs {', '.join('%.1e' % x for x in v)}")


if __name__ == "__main__":
    main()
