#!/usr/bin/env bash
# tapegrad's GEMM beside OpenBLAS, same process, same shapes, 1 and 2 threads; medians of
# repetitions. Prints a markdown table (ratio = tapegrad GFLOP/s / OpenBLAS GFLOP/s).
#
#   bench/compare_gemm.sh [path/to/bench_gemm]   (default build/bench_gemm; needs libopenblas-dev)
set -euo pipefail
BENCH=${1:-build/bench_gemm}
REPS=${REPS:-5}
[[ -x $BENCH ]] || { echo "error: '$BENCH' not found (install libopenblas-dev and build bench_gemm)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "# GEMM: tapegrad vs OpenBLAS $(dpkg-query -W -f='${Version}' libopenblas0-pthread 2>/dev/null), float32"
echo
echo "- command: \`bench/compare_gemm.sh $BENCH\` (REPS=$REPS); CPU: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
for t in 1 2; do
  echo "running with $t thread(s) ..." >&2
  TG_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$BENCH" --benchmark_format=json --benchmark_min_time=0.2 \
    --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true >"$TMP/$t.json" 2>/dev/null
done
python3 - "$TMP" <<'PYEOF'
import json, os, sys
tmp = sys.argv[1]
print("| shape (M x N x K, batch) | threads | tapegrad GFLOP/s | OpenBLAS GFLOP/s | ratio |")
print("|---|---:|---:|---:|---:|")
for t in ("1", "2"):
    with open(os.path.join(tmp, t + ".json")) as f:
        data = json.load(f)
    med = {}
    for b in data["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"].replace("/real_time", "")
        med[name] = b["GFLOP/s"]
    for name, g in med.items():
        if not name.startswith("BM_tg_"):
            continue
        peer = med.get(name.replace("BM_tg_", "BM_openblas_"))
        parts = name.split("/")[1:]
        if "batched" in name:
            shape = f"{parts[1]} x {parts[2]} x {parts[3]}, batch {parts[0]}"
        else:
            shape = f"{parts[0]} x {parts[1]} x {parts[2]}" + (" (B transposed)" if parts[3] == "1" else "")
        print(f"| {shape} | {t} | {g:.1f} | {peer:.1f} | {g / peer:.2f} |")
PYEOF
