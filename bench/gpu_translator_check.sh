#!/usr/bin/env bash
# Issue 48's second GPU check, run ON the GPU machine from the project root: the Multi30k translator
# trained 10 epochs with its defaults on the GPU, BLEU with beam 4 on all 1,014 validation
# sentences against the CPU's BLEU of the same command (CPU_BLEU, measured on the CPU and written in
# bench/RESULTS.md); and the quick start's training (the
# command ./tg.sh run runs, on the Debian dictionary staged by prepare.sh) for one minute on the
# GPU, its steps per minute against a 2-core machine's at this commit (CPU_QUICK_STEPS).
#   here:        TG_DEVICE_EXTRA_DEBS="trans-de-en" bash ../shared/device/prepare.sh
#                git rev-parse --short HEAD > .device/commit
#   the device:  CPU_BLEU=... CPU_QUICK_STEPS=... bash bench/gpu_translator_check.sh   (timeout_s <= 480)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device-out}
# CPU_QUICK_STEPS: 394 steps in the 1-minute run on 2 cores (AMD EPYC VM, AVX512-BF16, 2026-11-28 at e815e6b,
# bench/RESULTS.md; 375 at 2026-11-27).
# CPU_BLEU: 38.67 with beam 4 after the same 10 epochs on the CPU (2 threads, at 9e9bae7;
# bench/RESULTS.md). Since then the CPU's sums changed in rounding only (gradients added in the
# product, 2026-11-28): for the within-1.0 goal at one commit, rerun the CPU command and pass CPU_BLEU.
export OUT CPU_BLEU=${CPU_BLEU:-38.67} CPU_QUICK_STEPS=${CPU_QUICK_STEPS:-394}
export TG_CMD_TIMEOUT=${TG_CMD_TIMEOUT:-330}
exec bash tests/gpu/device_run.sh \
  'echo "commit $(cat .device/commit 2>/dev/null || echo unknown), $(nvidia-smi --query-gpu=name --format=csv,noheader)"' \
  '[ -e /tmp/deps/usr/share/trans/de-en ] || { echo "goal quick start >= 20x: owed (trans-de-en not staged: TG_DEVICE_EXTRA_DEBS=trans-de-en for prepare.sh)"; exit 0; }; rm -rf /tmp/quick; build-device/train_translator --device cuda --ding /tmp/deps/usr/share/trans/de-en --minutes 1 --final_bleu false --samples 0 --save /tmp/quick > "$OUT/quick.log" 2>&1; head -1 "$OUT/quick.log"; s=$(grep -o "after [0-9]* steps" "$OUT/quick.log" | grep -o "[0-9]*"); echo "quick start on the GPU: ${s:-?} steps in 1 minute"; if [ -n "$CPU_QUICK_STEPS" ]; then python3 -c "import sys; g,c=map(float,sys.argv[1:]); r=\"met\" if g>=20*c else \"NOT met\"; print(\"goal quick start >= 20x the 2-core steps a minute: %.0f vs %.0f (%.1fx): %s\" % (g,c,g/c,r))" "${s:-0}" "$CPU_QUICK_STEPS"; else echo "goal quick start >= 20x: CPU_QUICK_STEPS not given: owed"; fi' \
  'rm -rf /tmp/m30k; build-device/train_translator --device cuda --src "$TG_DATA/multi30k/train.de.gz" --tgt "$TG_DATA/multi30k/train.en.gz" --valid_src "$TG_DATA/multi30k/val.de.gz" --valid_tgt "$TG_DATA/multi30k/val.en.gz" --epochs 10 --minutes 1000 --beam_bleu --samples 0 --save /tmp/m30k > "$OUT/multi30k.log" 2>&1; head -1 "$OUT/multi30k.log"; b=$(grep -o "[0-9.]* with beam 4" "$OUT/multi30k.log" | grep -o "^[0-9.]*"); echo "Multi30k on the GPU: beam-4 BLEU ${b:-?}"; if [ -n "$CPU_BLEU" ]; then python3 -c "import sys; g,c=map(float,sys.argv[1:]); r=\"met\" if abs(g-c)<=1.0 else \"NOT met\"; print(\"goal Multi30k BLEU within 1.0 of the CPU: %.2f vs %.2f: %s\" % (g,c,r))" "${b:-nan}" "$CPU_BLEU"; else echo "goal Multi30k BLEU within 1.0: CPU_BLEU not given: owed"; fi'
