#!/usr/bin/env python3
"""tests/golden/autocast_mlp.safetensors: a two-layer MLP (Linear, exact GELU, Linear, a weighted
sum as loss) forward and backward in PyTorch under tapegrad's autocast policy: every matrix product
(forward, dX, dW) takes bfloat16-rounded operands and sums in float32; bias, GELU, the loss and
every tensor between ops stay float32. tests/autocast_test.cc runs the same under
tg::AutocastGuard and compares to 1e-5 relative. (torch.autocast itself also returns bfloat16
activations from linear, which tapegrad does not: its products output float32.)
Run from the repository root with PyTorch 2.x: python3 tools/make_autocast_golden.py"""
import torch
from safetensors.torch import save_file


def r(t):
    return t.to(torch.bfloat16).to(torch.float32)


class Product(torch.autograd.Function):  # x @ w.T with the policy's rounding, backward included
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return r(x) @ r(w).T

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return r(g) @ r(w), r(g).T @ r(x)


torch.manual_seed(7)
x = torch.randn(24, 40, requires_grad=True)
w1 = (torch.randn(96, 40) * 0.2).requires_grad_()
b1 = (torch.randn(96) * 0.1).requires_grad_()
w2 = (torch.randn(24, 96) * 0.2).requires_grad_()
b2 = (torch.randn(24) * 0.1).requires_grad_()
weight = torch.randn(24, 24)
y = Product.apply(torch.nn.functional.gelu(Product.apply(x, w1) + b1), w2) + b2
(y * weight).sum().backward()
t = {"x": x, "w1": w1, "b1": b1, "w2": w2, "b2": b2, "loss_weight": weight, "y": y}
t.update({"grad_" + k: v.grad for k, v in [("x", x), ("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2)]})
save_file({k: v.detach().contiguous() for k, v in t.items()}, "tests/golden/autocast_mlp.safetensors",
          metadata={"torch": torch.__version__})
