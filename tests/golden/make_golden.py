#!/usr/bin/env python3
"""Writes tests/golden/ops_golden.txt: forward values and gradients of a sample of ops, from PyTorch.

Run with PyTorch 2.4 or newer (F.rms_norm, enable_gqa; PyPI's):  python3 tests/golden/make_golden.py
(the file in the repository was written by torch 2.15 from PyPI)

Format (one record per line, fields separated by single spaces):
    case NAME
    tensor ROLE DTYPE RANK d0 ... d{RANK-1} v0 v1 ... v{numel-1}
    ...
    end
ROLE is in0, in1, ... (the op's tensor inputs, in order), w (the weight of the scalar loss),
out (the op's output) or gradK (the gradient of (out * w).sum() with respect to inK; present
exactly for the float inputs). DTYPE is float64 or int64. Values are written with %.17g (floats)
or %d (ints), so float64 values round-trip exactly. Lines starting with '#' are comments.

Every case's C++ counterpart lives in tests/golden_test.cc (a table keyed by NAME); the op's
non-tensor arguments (axes, eps, ...) are written in both places by hand.
"""
import os

import torch
import torch.nn.functional as F

torch.manual_seed(1234)
torch.set_default_dtype(torch.float64)

CASES = []  # (name, [inputs], fn)


def case(name, inputs, fn):
    CASES.append((name, inputs, fn))


def randn(*shape):
    return torch.randn(*shape, dtype=torch.float64)


def away_from_zero(*shape, margin=0.1):
    """randn values pushed at least `margin` away from 0 (for relu/abs kinks, divisors)."""
    x = randn(*shape)
    return x + torch.sign(x) * margin + (x == 0).to(torch.float64) * margin


def positive(*shape, low=0.5):
    return torch.rand(*shape, dtype=torch.float64) * 2.0 + low


def ints(values, shape=None):
    t = torch.tensor(values, dtype=torch.int64)
    return t.reshape(shape) if shape is not None else t


# ---- Elementwise binary, with broadcasting ----------------------------------------------------
case("add_bcast", [randn(3, 1, 4), randn(2, 4)], lambda a, b: a + b)
case("sub_bcast", [randn(3, 1, 4), randn(2, 4)], lambda a, b: a - b)
case("mul_bcast", [randn(3, 1, 4), randn(2, 4)], lambda a, b: a * b)
case("div_bcast", [randn(3, 1, 4), away_from_zero(2, 4, margin=0.5)], lambda a, b: a / b)
case("pow_bcast", [positive(3, 1, 4), randn(2, 4)], lambda a, b: torch.pow(a, b))
case("maximum_bcast", [randn(3, 1, 4), randn(2, 4)], lambda a, b: torch.maximum(a, b))
case("minimum_bcast", [randn(3, 1, 4), randn(2, 4)], lambda a, b: torch.minimum(a, b))

# ---- Elementwise unary ------------------------------------------------------------------------
case("exp", [randn(2, 3, 4)], torch.exp)
case("log", [positive(2, 3, 4, low=0.1)], torch.log)
case("sqrt", [positive(2, 3, 4, low=0.1)], torch.sqrt)
case("rsqrt", [positive(2, 3, 4, low=0.1)], torch.rsqrt)
case("tanh", [randn(2, 3, 4) * 1.5], torch.tanh)
case("sigmoid", [randn(2, 3, 4) * 2.0], torch.sigmoid)
case("relu", [away_from_zero(2, 3, 4)], torch.relu)
case("gelu", [randn(2, 3, 4) * 2.0], lambda x: F.gelu(x))
case("gelu_tanh", [randn(2, 3, 4) * 2.0], lambda x: F.gelu(x, approximate="tanh"))
case("silu", [randn(2, 3, 4) * 2.0], F.silu)
case("abs", [away_from_zero(2, 3, 4)], torch.abs)

# ---- Reductions -------------------------------------------------------------------------------
case("sum_axes02", [randn(2, 3, 4)], lambda x: x.sum(dim=(0, 2), keepdim=False))
case("mean_axis1_keepdim", [randn(2, 3, 4)], lambda x: x.mean(dim=1, keepdim=True))
case("var_last", [randn(2, 3, 5)], lambda x: x.var(dim=-1, unbiased=True))
case("logsumexp_axis1", [randn(2, 3, 4) * 3.0], lambda x: torch.logsumexp(x, dim=1))
case("amax_axis0", [randn(3, 4, 2)], lambda x: torch.amax(x, dim=0))
case("max_dim1_values", [randn(3, 5, 2)], lambda x: torch.max(x, dim=1).values)

# ---- Softmax family ---------------------------------------------------------------------------
case("softmax_last", [randn(3, 4, 5) * 2.0], lambda x: torch.softmax(x, dim=-1))
case("softmax_dim0", [randn(3, 4, 5) * 2.0], lambda x: torch.softmax(x, dim=0))
case("log_softmax_last", [randn(3, 4, 5) * 2.0], lambda x: torch.log_softmax(x, dim=-1))
case("log_softmax_dim0", [randn(3, 4, 5) * 2.0], lambda x: torch.log_softmax(x, dim=0))

# ---- Matmul -----------------------------------------------------------------------------------
case("matmul_2d", [randn(3, 4), randn(4, 5)], torch.matmul)
case("matmul_batched_bcast", [randn(2, 1, 3, 4), randn(3, 4, 2)], torch.matmul)
case("matmul_transpose_b", [randn(2, 3, 4), randn(5, 4)], lambda a, b: torch.matmul(a, b.transpose(-1, -2)))

# ---- Shape and movement -----------------------------------------------------------------------
case("permute", [randn(2, 3, 4)], lambda x: x.permute(2, 0, 1))
case("transpose", [randn(2, 3, 4)], lambda x: x.transpose(0, 2))
case("expand", [randn(3, 1)], lambda x: x.expand(2, 3, 4))
case("slice_step2", [randn(4, 7)], lambda x: x[:, 1:6:2])
case("slice_neg_start", [randn(6, 3)], lambda x: x[-5:6:2])
case("concat_dim1", [randn(2, 1, 3), randn(2, 3, 3), randn(2, 2, 3)], lambda a, b, c: torch.cat([a, b, c], dim=1))
case("index_select_dim0", [randn(4, 3), ints([2, 0, 2, 3, 2])], lambda x, i: torch.index_select(x, 0, i))
case("gather_dim1", [randn(3, 4), ints([[0, 3, 3, 1, 0], [2, 2, 2, 2, 1], [3, 0, 1, 2, 3]])],
     lambda x, i: torch.gather(x, 1, i))
case("embedding", [randn(10, 4), ints([[1, 7, 1], [9, 0, 7]])], lambda w, ids: F.embedding(ids, w))

# ---- Losses and normalisation -----------------------------------------------------------------
case("cross_entropy_ignore_smooth", [randn(6, 5) * 2.0, ints([3, 0, -100, 4, 1, 3])],
     lambda x, t: F.cross_entropy(x, t, ignore_index=-100, label_smoothing=0.1))
case("nll_loss", [torch.log_softmax(randn(6, 5), dim=-1), ints([1, -100, 4, 0, 2, 2])],
     lambda x, t: F.nll_loss(x, t, ignore_index=-100))
case("bce_with_logits", [randn(3, 4) * 2.0, torch.rand(3, 4, dtype=torch.float64)],
     lambda x, y: F.binary_cross_entropy_with_logits(x, y))
case("layer_norm_affine", [randn(2, 3, 5) * 2.0 + 0.5, randn(5), randn(5)],
     lambda x, w, b: F.layer_norm(x, (5,), w, b, eps=1e-5))

# ---- Selection --------------------------------------------------------------------------------
case("where_bcast", [ints([1, 0, 1], (3, 1)), randn(3, 4), randn(4)],
     lambda c, a, b: torch.where(c.to(torch.bool), a, b))
case("masked_fill_bcast", [randn(3, 4), ints([0, 1, 1, 0])],
     lambda x, m: x.masked_fill(m.to(torch.bool), -1.5))


# ---- Modern decoders (Llama family): RMS norm, rotary positions, grouped-query attention --------
case("rms_norm_affine", [randn(2, 3, 6) * 2.0, randn(6)], lambda x, w: F.rms_norm(x, (6,), w, eps=1e-6))


def rotary(x, pos):
    """Hugging Face Llama's apply_rotary_pos_emb (rotate_half), theta 10000, in float64."""
    d = x.shape[-1]
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = pos.to(torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat([ang, ang], dim=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * emb.cos() + torch.cat([-x2, x1], dim=-1) * emb.sin()


case("rotary_embedding", [randn(1, 2, 5, 8), ints([3, 4, 5, 6, 7])], rotary)
case("sdpa_gqa_causal", [randn(2, 4, 5, 3), randn(2, 2, 5, 3), randn(2, 2, 5, 3)],
     lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True))


def fmt_tensor(role, t):
    t = t.detach().contiguous()
    if t.dtype == torch.float64:
        dtype, vals = "float64", ["%.17g" % v for v in t.reshape(-1).tolist()]
    elif t.dtype == torch.int64:
        dtype, vals = "int64", ["%d" % v for v in t.reshape(-1).tolist()]
    else:
        raise TypeError(f"{role}: unsupported dtype {t.dtype}")
    fields = ["tensor", role, dtype, str(t.dim())] + [str(d) for d in t.shape] + vals
    return " ".join(fields)


def main():
    out_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops_golden.txt")
    names = set()
    lines = [
        "# Generated by tests/golden/make_golden.py with torch " + torch.__version__ + "; do not edit.",
        "# gradK = d((out * w).sum()) / d(inK) for the float inputs.",
    ]
    wgen = torch.Generator().manual_seed(99)
    for name, inputs, fn in CASES:
        assert name not in names, name
        names.add(name)
        leaves = [x.clone().requires_grad_(x.dtype == torch.float64) for x in inputs]
        out = fn(*leaves)
        assert out.dtype == torch.float64, name
        w = torch.randn(out.shape, dtype=torch.float64, generator=wgen)
        (out * w).sum().backward()
        lines.append("case " + name)
        for i, x in enumerate(leaves):
            lines.append(fmt_tensor(f"in{i}", x))
        lines.append(fmt_tensor("w", w))
        lines.append(fmt_tensor("out", out))
        for i, x in enumerate(leaves):
            if x.requires_grad:
                assert x.grad is not None, f"{name}: in{i} got no gradient"
                lines.append(fmt_tensor(f"grad{i}", x.grad))
        lines.append("end")
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(CASES)} cases to {out_path}")


if __name__ == "__main__":
    main()
