#pragma once
// Which instructions run bfloat16 matrix products, chosen once, at the first product, from what the
// CPU and the OS allow (as PyTorch's ATEN_CPU_CAPABILITY and oneDNN's ONEDNN_MAX_CPU_ISA):
//   Amx         Intel AMX-BF16 tiles (Sapphire Rapids and later; Linux grants the tile state)
//   Avx512Bf16  AVX512-BF16 vdpbf16ps (Zen 4, Zen 5, Cooper Lake and later Xeons)
//   Portable    any x86-64: bfloat16-rounded inputs through the float32 kernels
// TG_CPU_CAPABILITY=amx|avx512_bf16|portable in the environment forces a lower one (to compare
// paths); a higher one than the CPU has, or another word, is an error naming the variable.
#include <string>

namespace tg {

enum class CpuCapability { Portable = 0, Avx512Bf16 = 1, Amx = 2 };

CpuCapability cpu_capability();       // in use (throws tg::Error for a bad TG_CPU_CAPABILITY)
CpuCapability best_cpu_capability();  // the best this machine allows
const char* cpu_capability_name(CpuCapability c);  // "portable", "avx512_bf16", "amx"
// Runs later products on c: for tests and benchmarks comparing paths (tg::Error if c is above the best).
void set_cpu_capability(CpuCapability c);
// One line for --version and the programs' first line, e.g.
// "bf16 matmul: avx512_bf16 (CPU: avx512_bf16 yes, amx no)".
std::string cpu_capability_description();

}  // namespace tg
