#!/usr/bin/python3
"""PyTorch peer of bench/bench_ops.cc: the same cases, names and shapes, float32, CPU.

Prints one line per case: name<TAB>seconds_per_iter (the median over timed blocks of
torch.utils.benchmark.Timer.blocked_autorange). Meant for Debian's /usr/bin/python3 (torch 1.13):

    OMP_WAIT_POLICY=passive /usr/bin/python3 bench/torch_ops.py --threads 1

Forward-only cases use inputs that do not require grad; *_fwd_bwd cases call backward with a
fixed upstream gradient and set the leaves' .grad to None every iteration, as the C++ cases do.
Note: the per-op overhead cases include the Python interpreter's cost per statement, which the
C++ side does not pay.
"""
import argparse
import re
import sys

import torch
import torch.nn.functional as F
from torch.utils.benchmark import Timer

ELEMENTWISE_SIZES = [4096, 262144, 4194304]


def cases():
    """Yields (name, stmt, globals) for every case, built lazily so memory stays small."""
    for n in ELEMENTWISE_SIZES:
        a, b = torch.randn(n), torch.randn(n)
        yield f"BM_add/{n}", "torch.add(a, b)", dict(a=a, b=b)
    for n in ELEMENTWISE_SIZES:
        a, b = torch.randn(n // 1024, 1024), torch.randn(1024)
        yield f"BM_add_bcast/{n}", "torch.add(a, b)", dict(a=a, b=b)
    for n in ELEMENTWISE_SIZES:
        a, b = torch.randn(n), torch.randn(n)
        yield f"BM_mul/{n}", "torch.mul(a, b)", dict(a=a, b=b)
    for n in ELEMENTWISE_SIZES:
        yield f"BM_exp/{n}", "torch.exp(a)", dict(a=torch.randn(n))
    for n in ELEMENTWISE_SIZES:
        yield f"BM_gelu_tanh/{n}", "F.gelu(a, approximate='tanh')", dict(a=torch.randn(n))
    for n in ELEMENTWISE_SIZES:
        yield f"BM_gelu_erf/{n}", "F.gelu(a)", dict(a=torch.randn(n))

    for n in ELEMENTWISE_SIZES:
        yield f"BM_sum_all/{n}", "a.sum()", dict(a=torch.randn(n))
    yield "BM_sum_lastdim/4096/1024", "a.sum(-1)", dict(a=torch.randn(4096, 1024))
    yield "BM_mean_dim0/1024/1024", "a.mean(0)", dict(a=torch.randn(1024, 1024))

    softmax_shapes = [(4096, 1024), (64 * 8 * 128, 128)]
    for r, c in softmax_shapes:
        yield f"BM_softmax/{r}/{c}", "torch.softmax(x, -1)", dict(x=torch.randn(r, c))
    for r, c in softmax_shapes:
        x = torch.randn(r, c).requires_grad_()
        yield (f"BM_softmax_fwd_bwd/{r}/{c}",
               "y = torch.softmax(x, -1); y.backward(g); x.grad = None",
               dict(x=x, g=torch.randn(r, c)))

    r, c = 8192, 512
    yield (f"BM_layer_norm/{r}/{c}", "F.layer_norm(x, (c,), w, b, 1e-5)",
           dict(x=torch.randn(r, c), w=torch.randn(c), b=torch.randn(c), c=c))
    x, w, b = (torch.randn(r, c).requires_grad_(), torch.randn(c).requires_grad_(),
               torch.randn(c).requires_grad_())
    yield (f"BM_layer_norm_fwd_bwd/{r}/{c}",
           "y = F.layer_norm(x, (c,), w, b, 1e-5); y.backward(g); "
           "x.grad = None; w.grad = None; b.grad = None",
           dict(x=x, w=w, b=b, c=c, g=torch.randn(r, c)))

    x = torch.randn(1 << 20).requires_grad_()
    yield ("BM_gelu_fwd_bwd/1048576", "y = F.gelu(x); y.backward(g); x.grad = None",
           dict(x=x, F=F, g=torch.randn(1 << 20)))
    x, b = torch.randn(2048, 2048).requires_grad_(), torch.randn(2048).requires_grad_()
    yield ("BM_bias_gelu_fwd_bwd/2048/2048", "y = F.gelu(x + b); y.backward(g); x.grad = None; b.grad = None",
           dict(x=x, b=b, F=F, g=torch.randn(2048, 2048)))
    r, c = 4096, 8000
    x = torch.randn(r, c).requires_grad_()
    t = torch.randint(0, c, (r,))
    yield (f"BM_cross_entropy_fwd_bwd/{r}/{c}",
           "l = F.cross_entropy(x, t, label_smoothing=0.1); l.backward(); x.grad = None",
           dict(x=x, t=t, F=F))

    yield "BM_overhead_add_nograd", "a + b", dict(a=torch.randn(1), b=torch.randn(1))
    a, b = torch.randn(1).requires_grad_(), torch.randn(1).requires_grad_()
    yield "BM_overhead_add_grad", "a + b", dict(a=a, b=b)
    a, b = torch.randn(1).requires_grad_(), torch.randn(1).requires_grad_()
    yield ("BM_overhead_add_grad_backward", "(a + b).backward(); a.grad = None; b.grad = None",
           dict(a=a, b=b))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--min-time", type=float, default=0.2,
                   help="seconds of timed runs per case (blocked_autorange min_run_time)")
    p.add_argument("--filter", default="", help="regex: run only the cases whose name matches")
    args = p.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    pattern = re.compile(args.filter) if args.filter else None
    print(f"# torch {torch.__version__} threads={torch.get_num_threads()}", file=sys.stderr)
    for name, stmt, env in cases():
        if pattern and not pattern.search(name):
            continue
        env = dict(env, torch=torch, F=F)
        timer = Timer(stmt=stmt, globals=env, num_threads=args.threads)
        timer.timeit(3)  # warm-up (allocator, thread pool, lazy init)
        m = timer.blocked_autorange(min_run_time=args.min_time)
        print(f"{name}\t{m.median:.9g}", flush=True)


if __name__ == "__main__":
    main()
