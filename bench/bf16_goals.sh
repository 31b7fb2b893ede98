#!/usr/bin/env bash
# Every speed goal of the mixed-precision work, measured on this CPU in one run, beside PyTorch 2.x
# at its best (bf16 `a @ b` through oneDNN, and torch.autocast), each goal printed as met or not
# met with its figures. Which goals apply follows the path tapegrad chose (TG_CPU_CAPABILITY may
# lower it):
#   amx          bf16 GEMM >= 1,300 GFLOP/s on one core at n >= 1024, and >= PyTorch's on the same
#                shapes (bf16 tensors against bf16 tensors, autocast against autocast); step C in
#                bf16 <= 0.4x PyTorch's autocast step and <= 0.4x our float32 step
#   avx512_bf16  bf16 GEMM (autocast) >= 1.7x our float32 on step C's shapes; step C in bf16
#                >= 1.4x our float32 and faster than PyTorch's autocast
#   portable     none (bf16 is emulated: no speed goal)
# About 10 minutes on 2 cores; nothing else should run meanwhile. Needs a build (build/bench_bf16,
# build/bench_train, build/bf16_peak) and PyTorch 2.x:
#
#   TORCH2_PYTHON=/path/to/venv/bin/python bench/bf16_goals.sh [build]
#
# Paste its output into bench/RESULTS.md ("The issue's goals, measured or owed").
set -euo pipefail
BUILD=${1:-build}
PY=${TORCH2_PYTHON:-python3}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for b in bench_bf16 bench_train bf16_peak train_lm; do
  [ -x "$BUILD/$b" ] || { echo "bf16_goals.sh: $BUILD/$b is missing: build first (cmake --build $BUILD)" >&2; exit 2; }
done
"$PY" -c 'import torch' 2>/dev/null || { echo "bf16_goals.sh: $PY has no torch: set TORCH2_PYTHON to a Python with PyTorch 2.x" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "- command: \`TORCH2_PYTHON=$PY bench/bf16_goals.sh $BUILD\` ($(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u '+%Y-%m-%d %H:%M UTC'))"
echo "- CPU: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores, bf16 flags: $(grep -m1 '^flags' /proc/cpuinfo | grep -o -w -E 'avx512_bf16|amx_bf16|amx_tile' | sort -u | tr '\n' ' ')"
echo "- tapegrad: $(TG_NUM_THREADS=1 "$BUILD/train_lm" --version 2>&1 | head -1)"
echo "- PyTorch: $("$PY" -c 'import torch; print(torch.__version__, "capability", torch.backends.cpu.get_cpu_capability())')"

echo "peaks ..." >&2
"$BUILD/bf16_peak" --threads 1,2 >"$TMP/peak.jsonl" 2>/dev/null
for t in 1 2; do
  echo "tapegrad GEMMs, $t thread(s) ..." >&2
  TG_NUM_THREADS=$t "$BUILD/bench_bf16" --benchmark_min_time=0.5 --benchmark_format=json >"$TMP/gemm_$t.json" 2>/dev/null
done
echo "PyTorch GEMMs ..." >&2
"$PY" "$HERE/torch_bf16_gemm.py" --threads 1,2 >"$TMP/torch_gemm.jsonl"
KEEP_JSON="$TMP/steps" TORCH2_PYTHON="$PY" bash "$HERE/compare_train_bf16.sh" "$BUILD/bench_train" C 5 >"$TMP/steps.md"

python3 - "$TMP" <<'PYEOF'
import json, os, sys
tmp = sys.argv[1]

def lines(name):
    return [json.loads(l) for l in open(os.path.join(tmp, name)) if l.startswith("{")]

peaks = {(p["path"], p["threads"]): p["gflops"] for p in lines("peak.jsonl") if p.get("available")}
ours, path = {}, None  # (kind, M, N, K, tb or "ta", threads) -> GFLOP/s
for t in (1, 2):
    for b in json.load(open(os.path.join(tmp, f"gemm_{t}.json")))["benchmarks"]:
        name, *args = b["name"].split("/")
        if name.endswith("_batched"):  # attention's batched products: no goal of their own
            continue
        kind, ta = name[3:].replace("_ta", ""), name.endswith("_ta")
        M, N, K = (int(x) for x in args[:3])
        ours[(kind, M, N, K, "ta" if ta else int(args[3]), t)] = b["GFLOP/s"]
        path = b.get("label", path)
torch_g = {(r["kind"], r["M"], r["N"], r["K"], r["tb"], r["threads"]): r["gflops"] for r in lines("torch_gemm.jsonl")}
steps = {}
for t in (1, 2):
    for b in json.load(open(os.path.join(tmp, "steps", f"tg_C_{t}.json")))["benchmarks"]:
        steps[(b["name"].split("/")[0], t)] = b["real_time"]
pt = {r["threads"]: r["median_ms"] for r in lines("steps/torch.jsonl") if r["config"] == "C"}
pa = {r["threads"]: r["median_ms"] for r in lines("steps/torch_ac.jsonl") if r["config"] == "C"}

print(f"- path: {path}; peaks (bf16_peak, GFLOP/s, 1 / 2 threads): " +
      ", ".join(f"{p} {peaks.get((p, 1), 0):.0f} / {peaks.get((p, 2), 0):.0f}" for p in ("avx512_bf16", "amx") if (p, 1) in peaks))
print()
print("| goal | CPU path | threads | figure | state |")
print("|---|---|---:|---|---|")
def row(goal, t, figure, ok):
    print(f"| {goal} | {path} | {t} | {figure} | {'met' if ok else '**not met**'} |")

squares = [(n, n, n, 0) for n in (1024, 2048)]
step_shapes = [k[1:5] for k in ours if k[0] == "autocast" and k[5] == 1 and (k[1:5] not in [(n, n, n, 0) for n in (512, 1024, 2048)])]
fmt_ms = lambda x: f"{x:,.1f} ms"
for t in (1, 2):
    f, b = steps[("BM_train_C", t)], steps[("BM_train_C_bf16", t)]
    if path == "amx":
        if t == 1:
            for kind, peer in (("bf16", "bf16"), ("autocast", "autocast")):
                figs = [(s, ours[(kind, *s, 1)], torch_g.get((peer, *s, 1), float("nan"))) for s in squares]
                row(f"bf16 GEMM ({kind}) >= 1,300 GFLOP/s on one core at n >= 1024", 1,
                    ", ".join(f"n={s[0]}: {g:,.0f}" for s, g, _ in figs), all(g >= 1300 for _, g, _ in figs))
                row(f"bf16 GEMM ({kind}) >= PyTorch's {peer} on the same shapes", 1,
                    ", ".join(f"n={s[0]}: {g:,.0f} vs {p:,.0f}" for s, g, p in figs), all(g >= p for _, g, p in figs))
        row("step C in bf16 <= 0.4x PyTorch's autocast step", t, f"{fmt_ms(b)} vs {fmt_ms(pa[t])}: {b / pa[t]:.2f}x", b <= 0.4 * pa[t])
        row("step C in bf16 <= 0.4x our float32 step", t, f"{fmt_ms(b)} vs {fmt_ms(f)}: {b / f:.2f}x", b <= 0.4 * f)
    elif path == "avx512_bf16":
        ratios = [(s, ours[("autocast", *s, t)] / ours[("f32", *s, t)]) for s in step_shapes]
        lo = min(ratios, key=lambda r: r[1])
        row("bf16 GEMM (autocast) >= 1.7x our float32 on step C's shapes", t,
            f"{min(r for _, r in ratios):.2f}-{max(r for _, r in ratios):.2f}x over {len(ratios)} shapes "
            f"(lowest {'x'.join(map(str, lo[0][:3]))}{' ta' if lo[0][3] == 'ta' else ''})", lo[1] >= 1.7)
        row("step C in bf16 >= 1.4x our float32", t, f"{fmt_ms(f)} / {fmt_ms(b)} = {f / b:.2f}x", f / b >= 1.4)
        row("step C in bf16 faster than PyTorch's autocast", t, f"{fmt_ms(pa[t])} / {fmt_ms(b)} = {pa[t] / b:.2f}x", pa[t] > b)
    else:
        print(f"| (no goal: bf16 is emulated on the {path} path) | {path} | {t} | step C fp32 {fmt_ms(f)}, bf16 {fmt_ms(b)} | - |")
print()
print(f"PyTorch step C: float32 {fmt_ms(pt[1])} / {fmt_ms(pt[2])}, autocast {fmt_ms(pa[1])} / {fmt_ms(pa[2])} (1 / 2 threads).")
print()
print("GEMMs, GFLOP/s (every call pays its packing and conversions):")
print()
print("| M x N x K | op | threads | fp32 | bf16 tensors | autocast | autocast / fp32 | PyTorch bf16 tensors | PyTorch autocast |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for t in (1, 2):
    for k in sorted({k[1:5] for k in ours if k[5] == t}, key=lambda s: (s[3] == "ta", s)):
        M, N, K, tb = k
        g = lambda kind: ours.get((kind, M, N, K, tb, t))
        p = lambda kind: torch_g.get((kind, M, N, K, tb, t)) if tb != "ta" else None
        cell = lambda x: f"{x:,.0f}" if x else ""
        op = {0: "A B", 1: "A Bᵀ", "ta": "Aᵀ B"}[tb]
        print(f"| {M} x {N} x {K} | {op} | {t} | {cell(g('f32'))} | {cell(g('bf16'))} | {cell(g('autocast'))} | "
              f"{g('autocast') / g('f32'):.2f}x | {cell(p('bf16'))} | {cell(p('autocast'))} |")
PYEOF
echo
echo "Steps (bench/compare_train_bf16.sh):"
cat "$TMP/steps.md"
