#!/usr/bin/env bash
# tapegrad's GEMM beside OpenBLAS on the same shapes, 1 and 2 threads. Each repetition runs
# tapegrad and OpenBLAS in separate, alternating processes: drift on a shared machine hits both
# alike, and neither library's worker threads (OpenBLAS's spin after each call) linger into the
# other's measurement. Prints a markdown table of medians (ratio = tapegrad / OpenBLAS GFLOP/s).
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
echo "- command: \`bench/compare_gemm.sh $BENCH\` (REPS=$REPS: medians of $REPS alternating runs, each library in its own process)"
echo "- CPU: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
for t in 1 2; do
  echo "running with $t thread(s) ..." >&2
  for r in $(seq "$REPS"); do
    for lib in tg openblas; do
      TG_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$BENCH" --benchmark_filter="BM_${lib}_" --benchmark_format=json \
        --benchmark_min_time=0.2 >"$TMP/${t}_${lib}_$r.json" 2>/dev/null
    done
  done
done
python3 - "$TMP" <<'PYEOF'
import glob, json, os, statistics, sys
tmp = sys.argv[1]
runs = {}  # (threads, name) -> [GFLOP/s]
for path in glob.glob(os.path.join(tmp, "*.json")):
    t = os.path.basename(path).split("_")[0]
    for b in json.load(open(path))["benchmarks"]:
        runs.setdefault((t, b["name"].replace("/real_time", "")), []).append(b["GFLOP/s"])
print("| shape (M x N x K, batch) | threads | tapegrad GFLOP/s | OpenBLAS GFLOP/s | ratio |")
print("|---|---:|---:|---:|---:|")
order = ["BM_tg_sgemm/" + s for s in ("256/256/256/0", "512/512/512/0", "1024/1024/1024/0", "2048/2048/2048/0",
                                    "2048/512/128/0", "2048/2048/512/0", "2048/512/2048/0", "2048/512/512/1")]
order += ["BM_tg_sgemm_batched/128/64/64/64", "BM_tg_sgemm_batched/128/128/128/64"]
for t in ("1", "2"):
    for name in order:
        if (t, name) not in runs:
            continue
        g = statistics.median(runs[(t, name)])
        peer = statistics.median(runs[(t, name.replace("BM_tg_", "BM_openblas_"))])
        parts = name.split("/")[1:]
        if "batched" in name:
            shape = f"{parts[1]} x {parts[2]} x {parts[3]}, batch {parts[0]}"
        else:
            shape = f"{parts[0]} x {parts[1]} x {parts[2]}" + (" (B transposed)" if parts[3] == "1" else "")
        print(f"| {shape} | {t} | {g:.1f} | {peer:.1f} | {g / peer:.2f} |")
PYEOF
