#!/usr/bin/env bash
# Issue 48's GPU check, run ON the GPU machine from the project root (../shared/device/README.md),
# ≤ 7 minutes with the build (one architecture, sm_90a, and the targets every GPU check shares:
# tests/gpu/device_run.sh; none rebuilt after tests/gpu/check.sh on the same warm machine): training
# steps A, B, C (C also at batch 256) in float32, TF32 and bf16 beside PyTorch eager on the same
# card (torch.compile for C at batch 256 in bf16), and the batch-16 steps again as CUDA graphs; 20
# steps of A in float32 against the CPU; the character LM (tiny-shakespeare, 4 layers, 2,000 steps)
# in float32 and bf16 against this commit's CPU figures (below, from bench/RESULTS.md); the GPU
# training tests (the CUDA graph's among them) with TG_REQUIRE_GPU=1. One line per goal, and where
# step C's GPU time goes at batch 256 in bf16 (tg::cuda::KernelProfile); logs and JSON lines in
# $OUT.
#   here:        bash ../shared/device/prepare.sh && git rev-parse --short HEAD > .device/commit
#   the device:  bash bench/gpu_train_check.sh     (run tool: carry [".device"], timeout_s <= 480)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device-out}
export OUT
# The character LM's validation loss on the CPU at this commit (2 threads; bench/RESULTS.md says
# when and how): the GPU run must come within 0.02 (float32) and 0.03 (bf16).
export CPU_LM_FP32=${CPU_LM_FP32:-1.8099} CPU_LM_BF16=${CPU_LM_BF16:-1.8081}
# TG_TRAIN_TESTS=0 skips the GPU training tests: tests/gpu/check.sh's suite on the same build ran them.
export TG_TRAIN_TESTS=${TG_TRAIN_TESTS:-1}
export TG_CMD_TIMEOUT=${TG_CMD_TIMEOUT:-240}
# Files in $OUT (8 at most come back): gpu-check.log, configure.log, build.log, ops.jsonl,
# tg_train.jsonl, torch_train.jsonl, lm.log, train-tests.log. torch.compile runs last, on its own
# time limit: a slow or failing compile loses only its own rows.
exec bash tests/gpu/device_run.sh \
  'echo "commit $(cat .device/commit 2>/dev/null || echo unknown), $(nvidia-smi --query-gpu=name --format=csv,noheader)"' \
  'build-device/gpu_ops --cases matmul --repeats 10 > "$OUT/ops.jsonl"; peak=$(python3 -c "import json,sys; print(max(json.loads(l)[\"tflops\"] for l in open(sys.argv[1]) if \"bfloat16\" in l))" "$OUT/ops.jsonl" 2>/dev/null); peak=${peak:-0}; echo "measured bf16 product rate: $peak TFLOP/s"; build-device/gpu_train --bf16_tflops "$peak" > "$OUT/tg_train.jsonl"; build-device/gpu_train --configs A,B,C --c_batches 16 --graph --bf16_tflops "$peak" >> "$OUT/tg_train.jsonl"; echo "CUDA graph rows: $(grep "\"case\": \"train\"," "$OUT/tg_train.jsonl" | grep -c "\"graph\": true") of 9"; cat "$OUT/tg_train.jsonl"; build-device/gpu_train --configs C --c_batches 256 --precisions bf16 --steps 3 --warmup 2 --profile | grep "\"profile\"" >> "$OUT/tg_train.jsonl"; python3 bench/torch_gpu_train.py --compile "" > "$OUT/torch_train.jsonl"; cat "$OUT/torch_train.jsonl"; python3 bench/gpu_train_compare.py "$OUT/tg_train.jsonl" "$OUT/torch_train.jsonl"' \
  'build-device/gpu_train --compare_cpu' \
  'for P in fp32 bf16; do rm -rf /tmp/lm_$P; build-device/train_lm --text "$TG_DATA/tinyshakespeare.txt" --out /tmp/lm_$P --precision $P --device cuda --sample 0 > /tmp/lm_$P.log 2>&1; { echo "== $P"; cat /tmp/lm_$P.log; } >> "$OUT/lm.log"; v=$(grep -o "validation loss [0-9.]*" /tmp/lm_$P.log | grep -o "[0-9.]*$"); cpu=$([ $P = fp32 ] && echo $CPU_LM_FP32 || echo $CPU_LM_BF16); tol=$([ $P = fp32 ] && echo 0.02 || echo 0.03); head -1 /tmp/lm_$P.log; python3 -c "import sys; g,c,t=map(float,sys.argv[1:]); r=\"met\" if abs(g-c)<=t else \"NOT met\"; print(\"goal char LM $P within %g of the CPU: GPU %.4f, CPU %.4f (%+.4f): %s\" % (t,g,c,g-c,r))" "${v:-nan}" "$cpu" "$tol"; done' \
  '[ "$TG_TRAIN_TESTS" = 1 ] || { echo "GPU training tests: skipped (TG_TRAIN_TESTS=0: tests/gpu/check.sh ran them on this build)"; exit 0; }; TG_REQUIRE_GPU=1 ctest --test-dir build-device -L gpu -R "GpuTrain\.|EveryOpBackward|Gpu\.(Optimizers|ANonFinite|Gradcheck|HostWaits)" --no-tests=error --output-on-failure -j4 > "$OUT/train-tests.log" 2>&1; rc=$?; tail -15 "$OUT/train-tests.log"; echo "goal GPU training tests with TG_REQUIRE_GPU=1: $([ $rc -eq 0 ] && echo met || echo NOT met)"' \
  'timeout 150 python3 bench/torch_gpu_train.py --configs C --c_batches 256 --precisions bf16 --compile C256bf16 | grep -v "\"torch eager\"" >> "$OUT/torch_train.jsonl"; python3 bench/gpu_train_compare.py "$OUT/tg_train.jsonl" "$OUT/torch_train.jsonl" | grep -i "compile\|C batch 256"'
