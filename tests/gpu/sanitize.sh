#!/usr/bin/env bash
# On the GPU machine: compute-sanitizer TOOL over the GPU tests matching FILTER, at most SECONDS,
# its log in $OUT/TOOL.log; one goal line. The tests run with TG_REQUIRE_GPU=1 (a skip fails, so
# the tool cannot pass by skipping) and TG_GPU_TEST_SMALL=1; the tool's own errors exit 86, so a
# failing test and a memory error read differently. memcheck runs with TG_CUDA_NO_CACHING=1: each
# tensor its exact bytes from cudaMalloc, so an access past its end is past an allocation's end.
#   bash tests/gpu/sanitize.sh memcheck 'GpuParity.*:Gpu.Copies*' [SECONDS]
set -uo pipefail
tool=$1 filter=$2 limit=${3:-110}
log="$OUT/$tool.log"
no_caching=0
[ "$tool" = memcheck ] && no_caching=1
TG_CUDA_NO_CACHING=$no_caching TG_REQUIRE_GPU=1 TG_GPU_TEST_SMALL=1 timeout "$limit" compute-sanitizer --tool "$tool" --print-limit 20 \
  --error-exitcode 86 build-device/tg_gpu_tests --gtest_filter="$filter" > "$log" 2>&1
rc=$?
tail -6 "$log"
summary=$(grep -m1 "ERROR SUMMARY" "$log")
if [ $rc -eq 124 ]; then echo "goal compute-sanitizer $tool: owed (past $limit s; $summary)"
elif [ $rc -eq 86 ] || ! grep -q "ERROR SUMMARY: 0 errors" "$log"; then echo "goal compute-sanitizer $tool: NOT met (${summary:-no summary: the tool did not run, see $tool.log})"
elif [ $rc -ne 0 ]; then echo "goal compute-sanitizer $tool: met (0 errors), but the tests failed under it (exit $rc)"
else echo "goal compute-sanitizer $tool: met ($summary)"
fi
