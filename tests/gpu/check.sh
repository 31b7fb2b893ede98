#!/usr/bin/env bash
# Issue 47's GPU check, run ON the GPU machine from the project root (../shared/device/README.md):
# one architecture (sm_90a) and only the targets it needs, then the GPU suite with TG_REQUIRE_GPU=1
# (a skipped GPU test fails), compute-sanitizer's memcheck over the op parity, copies and the
# tensor-core attention and its racecheck over reductions and attention (both kernels; the
# tensor-core test at one head size, TG_GPU_TEST_SMALL=1), and the op benchmarks beside PyTorch on the same card;
# one line per goal at the end. Logs and JSON lines land in $OUT (at most 8 files come back).
#   here:        bash ../shared/device/prepare.sh && git rev-parse --short HEAD > .device/commit
#   the device:  bash tests/gpu/check.sh          (run tool: carry [".device"], timeout_s <= 480)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/device-out}
export OUT
export TG_CMAKE_ARGS="-DTG_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a-real -DTG_BUILD_BENCH=ON"
export TG_BUILD_TARGETS="tg_gpu_tests gpu_ops"
export TG_CMD_TIMEOUT=${TG_CMD_TIMEOUT:-200}
exec bash .device/gpu-check.sh \
  'echo "commit $(cat .device/commit 2>/dev/null || echo unknown), $(nvidia-smi --query-gpu=name --format=csv,noheader)"' \
  'TG_REQUIRE_GPU=1 ctest --test-dir build-device -L gpu --no-tests=error --output-on-failure -j4 > "$OUT/gpu-suite.log" 2>&1; rc=$?; tail -25 "$OUT/gpu-suite.log"; echo "goal GPU suite with TG_REQUIRE_GPU=1: $([ $rc -eq 0 ] && echo met || echo NOT met)"; exit $rc' \
  'TG_GPU_TEST_SMALL=1 compute-sanitizer --tool memcheck --error-exitcode 1 build-device/tg_gpu_tests --gtest_filter="GpuParity.*:Gpu.Copies*:Gpu.Factories*:Gpu.BFloat16Attention*" > "$OUT/memcheck.log" 2>&1; rc=$?; tail -8 "$OUT/memcheck.log"; echo "goal compute-sanitizer memcheck: $([ $rc -eq 0 ] && echo met || echo "NOT met (exit $rc)")"' \
  'TG_GPU_TEST_SMALL=1 compute-sanitizer --tool racecheck --error-exitcode 1 build-device/tg_gpu_tests --gtest_filter="Gpu.Reductions*:Gpu.Attention*:Gpu.BFloat16Attention*" > "$OUT/racecheck.log" 2>&1; rc=$?; tail -8 "$OUT/racecheck.log"; echo "goal compute-sanitizer racecheck: $([ $rc -eq 0 ] && echo met || echo "NOT met (exit $rc)")"' \
  'build-device/gpu_ops > "$OUT/tg_ops.jsonl" && python3 bench/torch_gpu_ops.py > "$OUT/torch_ops.jsonl" && python3 bench/gpu_compare.py "$OUT/tg_ops.jsonl" "$OUT/torch_ops.jsonl"'
