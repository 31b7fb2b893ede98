#!/usr/bin/env bash
# A CUDA-enabled build, checked without a GPU: every .cu file is compiled for the architectures the
# build asks for (CI has nvcc and ptxas but no cuobjdump, so the compile commands are read), and the
# programs do not depend on CUDA's shared libraries (cudart is static and opens the driver only at
# the first GPU call), so they load and run on machines without a GPU, driver or toolkit.
#   tests/cuda_build_test.sh BUILD_DIR "ARCHITECTURES" PROGRAM
set -euo pipefail
build=${1:?usage: cuda_build_test.sh BUILD_DIR ARCHITECTURES PROGRAM}
archs=${2:?}
program=${3:?}
cc="$build/compile_commands.json"
[ -f "$cc" ] || { echo "FAIL: no $cc"; exit 1; }
n=$(grep -c '"file": ".*\.cu"' "$cc" || true)
[ "$n" -gt 0 ] || { echo "FAIL: no .cu file in $cc"; exit 1; }
IFS=';' read -ra list <<< "$archs"
while IFS= read -r line; do
  for a in "${list[@]}"; do
    num=${a%%-*}
    case "$a" in
      *-virtual) want="code=\[compute_$num\]" ;;
      *) want="code=\[sm_$num\]" ;;
    esac
    grep -qE -- "$want" <<< "$line" || { echo "FAIL: a .cu file is not compiled for $a: ${line:0:300}"; exit 1; }
  done
done < <(grep '"command": ".*nvcc' "$cc")
echo "ok: $n .cu files, each compiled for $archs"
deps=$(ldd "$program" | grep -E 'libcuda\.so|libcudart\.so|libcublas' || true)
[ -z "$deps" ] || { echo "FAIL: $program loads CUDA's shared libraries: $deps"; exit 1; }
echo "ok: $(basename "$program") loads no CUDA library (cudart is static)"
