#pragma once
// How this copy of the library was compiled: which instruction set it may use. A build for one
// CPU (TG_ARCH=native) refuses to load on a CPU that lacks those instructions, with one line that
// names them, instead of dying of SIGILL.
#include <cstddef>

namespace tg {

const char* build_arch();          // "native", "portable" (x86-64-v3) or "baseline" (x86-64)
const char* build_march();         // the -march it resolved to when built, e.g. "znver3"
const char* build_cpu_features();  // space-separated, e.g. "avx2 fma avx512f ..." ("" for baseline)

namespace detail {
// What CPUID and the OS say about the instructions of the bfloat16 paths (graph/cpu_features.cc,
// where every read of the CPU is). ops/cpu_capability.h's tg::cpu_features() keeps one copy.
struct CpuFeatureBits {
  bool avx512 = false;       // AVX-512 F, BW and VL, with the OS saving the zmm state
  bool avx512_bf16 = false;  // and AVX512_BF16
  bool amx_cpu = false;      // AMX-TILE and AMX-BF16 (and AVX512-BF16), with the OS saving tile state
  bool amx = false;          // and Linux granted this process the tile data
};
CpuFeatureBits read_cpu_features();

// Writes the required features that `has` says are missing into `out` (", "-separated) and
// returns how many there are. Plain C calls only: it runs before static initialization.
int missing_cpu_features(char* out, size_t capacity, bool (*has)(const char*));
}  // namespace detail

}  // namespace tg
