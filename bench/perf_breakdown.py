#!/usr/bin/env python3
"""Where a profiled run's time goes, by kind of work: reads `perf report --no-children --stdio
--sort sym` text (self time per symbol) and sums it into groups (GEMM, attention, layer norm,
softmax and cross-entropy, dropout, other element-wise work, AdamW, copies and allocation, the
thread pool's waiting, the rest).

    TG_NUM_THREADS=2 perf record -g -o perf.data build/bench_train --benchmark_filter=BM_train_C_fusedattn
    perf report -i perf.data --no-children --stdio --sort sym | python3 bench/perf_breakdown.py
"""
import re
import sys

GROUPS = [  # first match wins
    ("GEMM (micro-kernels, packing, matrix-vector; bf16 tiles and conversions)", r"micro_tile|micro_kernel|pack_a|pack_b|gemm|gemv|tile_avx512bf16|tile_amx|bf16|round_to_bf16"),
    ("attention (fused kernel)", r"attn_|attention_|exp_shift_sum|fold_run"),
    ("layer norm", r"layer_norm"),
    ("softmax, log-softmax, cross-entropy", r"softmax|cross_entropy|nll|logsumexp"),
    ("dropout", r"dropout"),
    ("AdamW and gradient clipping", r"adam|optim|clip|sum_squares|norm_sq"),
    ("bias + activation", r"bias_act|Gelu|Relu"),
    ("other element-wise and reductions", r"binary_run|unary_run|unary_loop|binary|reduce|sum_|Add|Mul|elementwise|copy_strided|strided"),
    ("copies, zeroing, allocation, page faults", r"memmove|memcpy|memset|clear_page|page_fault|malloc|free|alloc|Storage|mmap|munmap|_int_|do_anonymous|folio|zap_|\[k\] .*(mm|mem|page|mas_|charge|lru|pte|pmd|vma)"),
    ("thread pool (waiting, waking)", r"Pool|parallel_run|futex|sched|schedule|pause|spin|do_syscall|syscall|pthread"),
]


def main():
    totals = {name: 0.0 for name, _ in GROUPS}
    rest = 0.0
    top_rest = []
    for line in sys.stdin:
        m = re.match(r"\s+([0-9.]+)%\s+(.*)$", line)
        if not m:
            continue
        pct, sym = float(m.group(1)), m.group(2)
        for name, pat in GROUPS:
            if re.search(pat, sym):
                totals[name] += pct
                break
        else:
            rest += pct
            top_rest.append((pct, sym.strip()[:90]))
    for name, _ in GROUPS:
        print(f"| {name} | {totals[name]:.1f}% |")
    print(f"| the rest | {rest:.1f}% |")
    top_rest.sort(reverse=True)
    for pct, sym in top_rest[:8]:
        print(f"#   rest: {pct:.2f}% {sym}", file=sys.stderr)


if __name__ == "__main__":
    main()
