#pragma once
// What this CPU can run (read in one place, graph/cpu_features.cc: CPUID, XGETBV and Linux's grant
// of the AMX tile state), and which instructions run bfloat16 matrix products, chosen once, at the
// first product (as PyTorch's ATEN_CPU_CAPABILITY and oneDNN's ONEDNN_MAX_CPU_ISA):
//   kAmx         Intel AMX-BF16 tiles (Sapphire Rapids and later; Linux grants the tile state)
//   kAvx512Bf16  AVX512-BF16 vdpbf16ps (Zen 4, Zen 5, Cooper Lake and later Xeons)
//   kPortable    any x86-64: bfloat16-rounded inputs through the float32 kernels
// TG_CPU_CAPABILITY=amx|avx512_bf16|portable in the environment forces a lower one (to compare
// paths); a higher one than the CPU has, or another word, is an error naming the variable.
// (The check that the CPU has the instructions the library was compiled for runs earlier, when the
// library loads, in the same file.)
// Graph-free: the kernels (ops/kernels/) include it too.
#include <string>

namespace tg {

enum class CpuCapability {
  kPortable = 0,
  kAvx512Bf16 = 1,
  kAmx = 2,
  Portable [[deprecated("use kPortable")]] = kPortable,  // the names before 0.2, kept for one release
  Avx512Bf16 [[deprecated("use kAvx512Bf16")]] = kAvx512Bf16,
  Amx [[deprecated("use kAmx")]] = kAmx,
};

// What CPUID and the OS say, read once.
struct CpuFeatures {
  bool avx512 = false;       // AVX-512 F, BW and VL, with the OS saving the zmm state
  bool avx512_bf16 = false;  // and AVX512_BF16
  bool amx_cpu = false;      // AMX-TILE and AMX-BF16 (and AVX512-BF16), with the OS saving tile state
  bool amx = false;          // and Linux granted this process the tile data
};
const CpuFeatures& cpu_features();

CpuCapability cpu_capability();       // in use (throws tg::Error for a bad TG_CPU_CAPABILITY)
CpuCapability best_cpu_capability();  // the best this machine allows
const char* cpu_capability_name(CpuCapability c);  // "portable", "avx512_bf16", "amx"
// Runs later products on c: for tests and benchmarks comparing paths (tg::Error if c is above the best).
void set_cpu_capability(CpuCapability c);
// One line for --version and the programs' first line, e.g.
// "bf16 matmul: avx512_bf16 (CPU: avx512_bf16 yes, amx no)".
std::string cpu_capability_description();

}  // namespace tg
