#!/usr/bin/env bash
# On the GPU machine: .device/gpu-check.sh with these commands (the build, then each command). If
# the build fails with warnings as errors (a warning of the device's g++ 13 or nvcc that our own
# machines never showed), it builds again without -Werror so that the one run is not lost, and says
# so with the first errors (the "warning-free build" goal is then not met).
set -uo pipefail
OUT=${OUT:-/tmp/device-out}
export OUT
bash .device/gpu-check.sh "$@"
rc=$?
if ! grep -q "configured and built in" "$OUT/gpu-check.log" 2>/dev/null; then
  errs=$(grep -h -m20 -E 'error' "$OUT/configure.log" "$OUT/build.log" 2>/dev/null)
  echo "NOTE: the build with warnings as errors failed; building again without -Werror"
  TG_CMAKE_ARGS="${TG_CMAKE_ARGS:-} -DTG_WERROR=OFF" bash .device/gpu-check.sh "$@"
  rc=$?
  printf 'goal warning-free build (-Werror): NOT met; its first errors:\n%s\n' "$errs"
fi
exit $rc
