#!/usr/bin/env bash
# cpu_paths: the bfloat16 tests and the op sweep once per path this CPU has, forced through the
# environment as a user would (TG_CPU_CAPABILITY); a path the CPU lacks must be refused with one
# line naming the variable. Usage: cpu_paths_test.sh TG_TESTS
set -uo pipefail
tests=$1
filter='BFloat16*:OpSweep*:Autocast*'
ran=0
for p in portable avx512_bf16 amx; do
  out=$(TG_CPU_CAPABILITY=$p "$tests" --gtest_filter="$filter" --gtest_brief=1 2>&1); rc=$?
  if grep -q "TG_CPU_CAPABILITY=$p: this CPU (or its OS) cannot run that path" <<<"$out"; then
    echo "$p: not on this CPU (refused with one line, as expected)"
    continue
  fi
  if [ $rc -ne 0 ]; then echo "$out" | tail -30; echo "$p: FAILED"; exit 1; fi
  echo "$p: $(grep -o '[0-9]* tests\? from [0-9]* test suites\? ran' <<<"$out" | head -1), passed"
  ran=$((ran + 1))
done
out=$(TG_CPU_CAPABILITY=avx1024 "$tests" --gtest_filter='BFloat16Gemm.EnvironmentChoosesThePath' 2>&1)
grep -q "TG_CPU_CAPABILITY=avx1024 is not a path (expected amx, avx512_bf16 or portable)" <<<"$out" || { echo "$out" | tail; echo "an unknown value was not refused"; exit 1; }
echo "unknown value: refused"
[ $ran -ge 1 ]
