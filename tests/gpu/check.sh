#!/usr/bin/env bash
# Issue 47's GPU check, run ON the GPU machine from the project root (../shared/device/README.md):
# one architecture (sm_90a) and the targets of every GPU check (tests/gpu/device_run.sh), then the
# GPU suite with TG_REQUIRE_GPU=1 (a skipped GPU test fails), the op benchmarks beside PyTorch on
# the same card, compute-sanitizer's memcheck over the op parity, copies and the tensor-core
# attention and its racecheck over reductions and attention (our kernels only; the tensor-core test
# at one head size, TG_GPU_TEST_SMALL=1); one line per goal. A -Werror build failure rebuilds
# without it (device_run.sh). Logs and JSON lines land in $OUT (at most 8 files come back).
#   here:        bash ../shared/device/prepare.sh && git rev-parse --short HEAD > .device/commit
#   the device:  bash tests/gpu/check.sh          (run tool: carry [".device"], timeout_s <= 480)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/device-out}
export OUT
export TG_CMD_TIMEOUT=${TG_CMD_TIMEOUT:-200}
# TG_GPU_SANITIZE=0 skips the two sanitizer runs (about 4 minutes): with 15 minutes of device time,
# a session that also runs bench/gpu_train_check.sh on the warm machine needs them.
export TG_GPU_SANITIZE=${TG_GPU_SANITIZE:-1}
# Order: what must not be lost first (the suite, then the speed comparison), the sanitizers last,
# each capped (an overrun reads "owed"). Files in $OUT: gpu-check.log, configure.log, build.log,
# gpu-suite.log, tg_ops.jsonl, torch_ops.jsonl, memcheck.log, racecheck.log (8: the most that come back).
exec bash tests/gpu/device_run.sh \
  'echo "commit $(cat .device/commit 2>/dev/null || echo unknown), $(nvidia-smi --query-gpu=name --format=csv,noheader)"; ldconfig -p | grep -m1 libcublasLt.so.13 || echo "libcublasLt.so.13 not on the loader path (the build'"'"'s toolkit folder is tried)"' \
  'TG_REQUIRE_GPU=1 ctest --test-dir build-device -L gpu --no-tests=error --output-on-failure -j4 > "$OUT/gpu-suite.log" 2>&1; rc=$?; tail -25 "$OUT/gpu-suite.log"; echo "goal GPU suite with TG_REQUIRE_GPU=1: $([ $rc -eq 0 ] && echo met || echo NOT met)"; exit $rc' \
  'build-device/gpu_ops > "$OUT/tg_ops.jsonl"; python3 bench/torch_gpu_ops.py > "$OUT/torch_ops.jsonl"; python3 bench/gpu_compare.py "$OUT/tg_ops.jsonl" "$OUT/torch_ops.jsonl"' \
  '[ "$TG_GPU_SANITIZE" = 1 ] || { echo "compute-sanitizer memcheck: skipped (TG_GPU_SANITIZE=0): owed"; exit 0; }; bash tests/gpu/sanitize.sh memcheck "GpuParity.*:Gpu.Copies*:Gpu.Factories*:Gpu.BFloat16Attention*:Gpu.AutocastTrainsAttention*:Gpu.TokensFirst*" 110' \
  '[ "$TG_GPU_SANITIZE" = 1 ] || { echo "compute-sanitizer racecheck: skipped (TG_GPU_SANITIZE=0): owed"; exit 0; }; bash tests/gpu/sanitize.sh racecheck "Gpu.Reductions*:Gpu.AttentionMatches*:Gpu.BFloat16Attention*:Gpu.TokensFirst*" 110'
