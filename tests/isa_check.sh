#!/usr/bin/env bash
# isa_isolation: no instruction beyond the build's baseline outside the functions named for their
# ISA. The library's disassembly is read function by function: AMX (tmm registers, tile
# instructions) and AVX512-BF16 (vdpbf16ps, vcvtne2ps2bf16, vcvtneps2bf16) may appear only in
# functions whose names contain "amx" or "avx512bf16"; in portable and baseline builds zmm
# registers too (a native build on an AVX-512 machine uses them everywhere, and refuses to load
# on a CPU without them). A header template compiled under AVX-512 flags, kept by the linker in
# place of the portable copy, would show up here as an unnamed function holding zmm registers.
# Usage: isa_check.sh LIBRARY TG_ARCH
set -euo pipefail
lib=$1 arch=$2
pattern='%tmm|tileloadd|tilestored|tdpbf16ps|ldtilecfg|tilerelease|tilezero|vdpbf16ps|vcvtne2ps2bf16|vcvtneps2bf16'
[ "$arch" = native ] || pattern="$pattern|%zmm"
objdump -d --no-show-raw-insn -C "$lib" | awk -v pat="$pattern" '
  /^[0-9a-f]+ <.*>:$/ { fn = $0; sub(/^[0-9a-f]+ </, "", fn); sub(/>:$/, "", fn); next }
  $0 ~ pat {
    seen[fn]++
    if (fn !~ /amx|avx512bf16/ && !(fn in bad)) { bad[fn] = $0; nbad++ }
  }
  END {
    for (f in seen) if (f ~ /amx|avx512bf16/) named++
    printf "ISA-specific instructions in %d function(s) named for their ISA\n", named
    for (f in bad) printf "outside an ISA-named function: %s:%s\n", f, bad[f]
    if (named == 0) { print "no ISA-named kernel found: is this the library?"; exit 1 }
    exit nbad > 0
  }'
