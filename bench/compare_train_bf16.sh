#!/usr/bin/env bash
# Training steps A, B, C in float32 and in bfloat16 (tapegrad's autocast: bench/bench_train.cc's
# _bf16 cases) beside PyTorch 2.x in float32 and under torch.autocast("cpu", torch.bfloat16)
# (bench/torch_train_step.py --autocast), 1 and 2 threads, each in its own process. Prints a
# markdown table of ms/step and the ratios the mixed-precision issue sets goals on.
#
#   TORCH2_PYTHON=/path/to/venv/bin/python bench/compare_train_bf16.sh [build/bench_train] [configs] [torch steps]
#
# KEEP_JSON=DIR keeps the raw results there (tg_<config>_<threads>.json, torch.jsonl, torch_ac.jsonl):
# bench/bf16_goals.sh reads them.
set -euo pipefail
BENCH=${1:-build/bench_train}
CONFIGS=${2:-A,B,C}
STEPS=${3:-5}
PY=${TORCH2_PYTHON:-python3}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -n "${KEEP_JSON:-}" ]; then
  TMP=$KEEP_JSON
  mkdir -p "$TMP"
else
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
fi
echo "- command: \`TORCH2_PYTHON=$PY bench/compare_train_bf16.sh $BENCH $CONFIGS $STEPS\`"
echo "- CPU: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores, bf16 flags:$(grep -m1 '^flags' /proc/cpuinfo | grep -o -w -E 'avx512_bf16|amx_bf16|amx_tile' | sort -u | tr '\n' ' ')"
echo "- tapegrad: $("$BENCH" --version 2>/dev/null | head -1 || true)$(TG_NUM_THREADS=1 "$(dirname "$BENCH")/train_lm" --version 2>/dev/null)"
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
for c in ${CONFIGS//,/ }; do
  for t in 1 2; do
    echo "tapegrad $c, $t thread(s) ..." >&2
    TG_NUM_THREADS=$t "$BENCH" --benchmark_filter="BM_train_${c}(_bf16)?/" --benchmark_format=json >"$TMP/tg_${c}_$t.json" 2>/dev/null
  done
done
echo "PyTorch ..." >&2
"$PY" "$HERE/torch_train_step.py" --configs "$CONFIGS" --threads 1,2 --steps "$STEPS" --warmup 2 --json >"$TMP/torch.jsonl"
"$PY" "$HERE/torch_train_step.py" --configs "$CONFIGS" --threads 1,2 --steps "$STEPS" --warmup 2 --json --autocast >"$TMP/torch_ac.jsonl"
python3 - "$TMP" "$CONFIGS" <<'PYEOF'
import json, os, sys
tmp, configs = sys.argv[1], sys.argv[2].split(",")
def load(name):
    out = {}
    for line in open(os.path.join(tmp, name)):
        if line.startswith("{"):
            r = json.loads(line)
            out[(r["config"], r["threads"])] = r
    return out
pt, pa = load("torch.jsonl"), load("torch_ac.jsonl")
tv = next(iter(pt.values()))["torch"]
print()
print(f"| config | threads | tapegrad fp32 ms | tapegrad bf16 ms ({'path'}) | bf16 speed-up | PyTorch {tv} fp32 ms | PyTorch autocast bf16 ms | PyTorch autocast / tapegrad bf16 |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for c in configs:
    for t in (1, 2):
        rows = {b["name"].split("/")[0]: b for b in json.load(open(os.path.join(tmp, f"tg_{c}_{t}.json")))["benchmarks"]}
        f, b = rows[f"BM_train_{c}"], rows[f"BM_train_{c}_bf16"]
        path = b.get("label", "").replace("bf16 ", "")
        print(f"| {c} | {t} | {f['real_time']:.1f} | {b['real_time']:.1f} ({path}) | {f['real_time'] / b['real_time']:.2f}x | "
              f"{pt[(c, t)]['median_ms']:.1f} | {pa[(c, t)]['median_ms']:.1f} | {pa[(c, t)]['median_ms'] / b['real_time']:.2f}x |")
PYEOF
