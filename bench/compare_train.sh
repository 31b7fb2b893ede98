#!/usr/bin/env bash
# One full training step (forward, backward, clipping, AdamW) for configurations A, B, C:
# tapegrad (bench/bench_train.cc) beside PyTorch (bench/torch_train_step.py, Debian's
# python3-torch), 1 and 2 threads, each configuration in its own process (so peak RSS is its own),
# OMP_WAIT_POLICY=passive and OPENBLAS_NUM_THREADS set for PyTorch.
#
#   bench/compare_train.sh [build/bench_train] [configs, default A,B,C] [torch steps, default 10]
set -euo pipefail
BENCH=${1:-build/bench_train}
CONFIGS=${2:-A,B,C}
STEPS=${3:-10}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TMP=${KEEP_DIR:-$(mktemp -d)}
[[ -z ${KEEP_DIR:-} ]] && trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP"
echo "- command: \`bench/compare_train.sh $BENCH $CONFIGS $STEPS\`"
echo "- CPU: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores; date: $(date -u '+%Y-%m-%d %H:%M UTC')"
for c in ${CONFIGS//,/ }; do
  for t in 1 2; do
    echo "tapegrad $c, $t thread(s) ..." >&2
    TG_NUM_THREADS=$t "$BENCH" --benchmark_filter="BM_train_${c}(_fusedattn)?/" --benchmark_format=json >"$TMP/tg_${c}_$t.json" 2>/dev/null
  done
done
echo "PyTorch ..." >&2
/usr/bin/python3 "$HERE/torch_train_step.py" --configs "$CONFIGS" --threads 1,2 --steps "$STEPS" --warmup 2 --json >"$TMP/torch.jsonl"
python3 - "$TMP" "$CONFIGS" <<'PYEOF'
import glob, json, os, sys
tmp, configs = sys.argv[1], sys.argv[2].split(",")
torch = {}
for line in open(os.path.join(tmp, "torch.jsonl")):
    line = line.strip()
    if line.startswith("{"):
        r = json.loads(line)
        torch[(r["config"], r["threads"])] = r
tv = next(iter(torch.values()))["torch"] if torch else "?"
print()
print(f"| config | threads | tapegrad ms/step | tokens/s | tapegrad, no attention dropout ms | PyTorch {tv} ms/step | tokens/s | time ratio (PyTorch / tapegrad) | tapegrad peak tensors / RSS MB | PyTorch peak RSS MB |")
print("|---|---|---|---|---|---|---|---|---|---|")
best = {}
for c in configs:
    for t in (1, 2):
        rows = {b["name"].split("/")[0]: b for b in json.load(open(os.path.join(tmp, f"tg_{c}_{t}.json")))["benchmarks"]}
        same, fused = rows[f"BM_train_{c}"], rows.get(f"BM_train_{c}_fusedattn")
        p = torch[(c, t)]
        print(f"| {c} | {t} | {same['real_time']:.1f} | {same['tokens/s']:.0f} | {fused['real_time']:.1f} | {p['median_ms']:.1f} | {p['tokens_per_s']:.0f} | "
              f"{p['median_ms'] / same['real_time']:.2f}x | {same['peak_MB']:.0f} / {same['rss_MB']:.0f} | {p['peak_rss_mb']:.0f} |")
        b = best.setdefault(c, [1e18, 1e18])
        b[0] = min(b[0], same["real_time"]); b[1] = min(b[1], p["median_ms"])
print()
for c, (tg_ms, pt_ms) in best.items():
    print(f"- {c}: best of 1 and 2 threads, tapegrad {tg_ms:.1f} ms, PyTorch {pt_ms:.1f} ms: PyTorch takes {pt_ms / tg_ms:.2f}x tapegrad's time")
PYEOF
