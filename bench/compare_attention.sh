#!/usr/bin/env bash
# Causal attention forward + backward (B 16, 8 heads, head size 64, T = 128, 512, 1024):
# tapegrad fused and unfused, PyTorch 1.13 (Debian) matmul-softmax-matmul, PyTorch 2.x fused
# scaled_dot_product_attention (from PyPI, in a venv given by TORCH2_PYTHON), 1 and 2 threads.
#
#   TORCH2_PYTHON=/path/to/venv/bin/python bench/compare_attention.sh [build/bench_attention]
set -euo pipefail
BENCH=${1:-build/bench_attention}
TORCH2_PYTHON=${TORCH2_PYTHON:-}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "# Causal attention, forward + backward: B 16, 8 heads, d 64, float32"
echo
echo "- command: \`TORCH2_PYTHON=$TORCH2_PYTHON bench/compare_attention.sh $BENCH\`"
echo "- CPU: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores; date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- memory: tapegrad, peak bytes held by tensors beyond q, k, v; PyTorch, peak RSS growth of a fresh process (both include the gradients)"
echo
for t in 1 2; do
  echo "tapegrad, $t thread(s) ..." >&2
  TG_NUM_THREADS=$t "$BENCH" --benchmark_format=json --benchmark_min_time=0.5 >"$TMP/tg_$t.json" 2>/dev/null
done
echo "PyTorch 1.13 ..." >&2
OMP_WAIT_POLICY=passive /usr/bin/python3 "$HERE/torch_attention.py" --threads 1 2 --impl manual >"$TMP/torch113.tsv" 2>/dev/null
if [[ -n $TORCH2_PYTHON ]]; then
  echo "PyTorch 2.x ..." >&2
  OMP_WAIT_POLICY=passive "$TORCH2_PYTHON" "$HERE/torch_attention.py" --threads 1 2 --impl sdpa manual >"$TMP/torch2.tsv" 2>/dev/null
  v2=$("$TORCH2_PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null)
fi
python3 - "$TMP" "${v2:-}" <<'PYEOF'
import json, os, sys
tmp, v2 = sys.argv[1], sys.argv[2]
res = {}  # (impl, T, threads) -> (seconds, MB)
for t in ("1", "2"):
    for b in json.load(open(os.path.join(tmp, f"tg_{t}.json")))["benchmarks"]:
        name = b["name"].replace("/real_time", "")
        impl, T = name.split("/")
        res[(impl.replace("BM_attention_", "tapegrad "), int(T), int(t))] = (b["real_time"] / 1e3, b["peak_MB"])
for f, label in (("torch113.tsv", "PyTorch 1.13 "), ("torch2.tsv", f"PyTorch {v2} ")):
    p = os.path.join(tmp, f)
    if not os.path.exists(p):
        continue
    for line in open(p):
        parts = line.strip().split("\t")
        if len(parts) == 5:
            res[(label + parts[0], int(parts[1]), int(parts[2]))] = (float(parts[3]), float(parts[4]))
impls = sorted({k[0] for k in res}, key=lambda s: (not s.startswith("tapegrad"), s))
print("| implementation | threads | T=128 s | T=512 s | T=1024 s | peak MB T=128 / 512 / 1024 |")
print("|---|---:|---:|---:|---:|---|")
for impl in impls:
    for t in (1, 2):
        row = [res.get((impl, T, t)) for T in (128, 512, 1024)]
        if not any(row):
            continue
        times = " | ".join(f"{r[0]:.3f}" if r else "-" for r in row)
        mem = " / ".join(f"{r[1]:.0f}" if r else "-" for r in row)
        print(f"| {impl} | {t} | {times} | {mem} |")
fused = {(T, t): res[("tapegrad fused", T, t)][0] for T in (128, 512, 1024) for t in (1, 2) if ("tapegrad fused", T, t) in res}
print()
print("Speed-up of tapegrad fused (time of the other / time of tapegrad fused):")
print()
print("| against | threads | T=128 | T=512 | T=1024 |")
print("|---|---:|---:|---:|---:|")
for impl in impls:
    if impl == "tapegrad fused":
        continue
    for t in (1, 2):
        cells = []
        for T in (128, 512, 1024):
            r = res.get((impl, T, t))
            cells.append(f"{r[0] / fused[(T, t)]:.2f}" if r and (T, t) in fused else "-")
        if any(c != "-" for c in cells):
            print(f"| {impl} | {t} | " + " | ".join(cells) + " |")
PYEOF
