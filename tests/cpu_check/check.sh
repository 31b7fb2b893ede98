#!/usr/bin/env bash
# cpu_check_refuses: a program "built" for instructions this CPU may lack (tests/cpu_check/
# tg_build_config.h) must refuse to start with one line that names exactly the ones it lacks
# (exit 1, before main), or run when it has them all. Which ones it lacks comes from CPUID
# through EXPECT (tests/cpu_check/expect.cc), so the test holds on any CPU: one with AVX512-FP16
# but not VP2INTERSECT (Sapphire Rapids), with VP2INTERSECT but not FP16 (Zen 5), or neither.
# Usage: check.sh PROGRAM EXPECT
set -u
out=$("$1" 2>&1); rc=$?
lacks=$("$2")
echo "$out"
echo "(exit $rc; this CPU lacks: ${lacks:-nothing listed})"
if [ -z "$lacks" ]; then
  [ $rc -eq 0 ] && [ "$out" = "reached main on a CPU that has them all" ]
  exit
fi
[ $rc -eq 1 ] || { echo "expected exit 1"; exit 1; }
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || { echo "expected one line"; exit 1; }
case "$out" in
  "tapegrad: this CPU lacks $lacks, which the library was compiled for"*"TG_ARCH=portable"*) exit 0 ;;
  *) echo "expected the line to name exactly: $lacks"; exit 1 ;;
esac
