#!/usr/bin/env bash
# On the GPU machine: .device/gpu-check.sh with these commands (the build, then each command).
# The GPU checks (tests/gpu/check.sh, bench/gpu_train_check.sh, bench/gpu_translator_check.sh) share
# one configuration and one set of targets: the first builds them all, and on the same machine while
# it is warm the others rebuild nothing. If the build fails on warnings made errors (a warning of the
# device's g++ 13 or nvcc that our own machines never showed), it says so with the first of them
# (the "warning-free build" goal is then not met), leaves a mark so that later checks on this
# machine go straight to the build without -Werror, and builds that way so that the run is not lost.
# Any other failure (no .device, a failed configure, a real compile error) is reported as it is.
set -uo pipefail
OUT=${OUT:-/tmp/device-out}
export OUT
export TG_CMAKE_ARGS=${TG_CMAKE_ARGS:-"-DTG_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a-real -DTG_BUILD_BENCH=ON"}
export TG_BUILD_TARGETS=${TG_BUILD_TARGETS:-"tg_gpu_tests gpu_ops gpu_train train_lm train_translator"}
mark=build-device/.werror-failed
if [ -f "$mark" ]; then
  printf 'goal warning-free build (-Werror): NOT met (an earlier check on this machine); its first errors:\n%s\n' "$(cat "$mark")"
  TG_CMAKE_ARGS="$TG_CMAKE_ARGS -DTG_WERROR=OFF" exec bash .device/gpu-check.sh "$@"
fi
rm -f "$OUT/build.log"
bash .device/gpu-check.sh "$@"
rc=$?
if ! grep -q "configured and built in" "$OUT/gpu-check.log" 2>/dev/null &&
   grep -q -E 'Werror|warnings being treated as errors|treated as an? error|#[0-9]+-D|ptxas' "$OUT/build.log" 2>/dev/null; then
  errs=$(grep -h -m20 -E 'error' "$OUT/build.log")
  mkdir -p build-device && printf '%s\n' "$errs" > "$mark"  # (first: a time limit may stop the rebuild)
  printf 'goal warning-free build (-Werror): NOT met; its first errors:\n%s\n' "$errs"
  echo "NOTE: building again without -Werror"
  TG_CMAKE_ARGS="$TG_CMAKE_ARGS -DTG_WERROR=OFF" bash .device/gpu-check.sh "$@"
  rc=$?
fi
exit $rc
