// Where tapegrad reads what the CPU can run (CPUID, XGETBV, Linux's AMX grant) and picks the path
// of bfloat16 products, TG_CPU_CAPABILITY included. Compiled with the build's own flags: nothing
// here runs before the load-time check of graph/cpu_check.cc has passed.
#include "ops/cpu_capability.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "graph/error.h"

namespace tg {
namespace {

uint64_t xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return f;  // OSXSAVE: XGETBV is there
  const uint64_t xcr = xcr0();
  const bool os_zmm = (xcr & 0xE6) == 0xE6;                          // SSE, AVX, opmask, ZMM state
  const bool os_tiles = (xcr & (3ull << 17)) == (3ull << 17);        // XTILECFG, XTILEDATA
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  const bool amx_tile = d & (1u << 24), amx_bf16 = d & (1u << 22);
  f.avx512 = os_zmm && (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31));  // F, BW, VL
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  const bool bf16 = __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && (a1 & (1u << 5));
  f.avx512_bf16 = f.avx512 && bf16;
  f.amx_cpu = f.avx512_bf16 && amx_tile && amx_bf16 && os_tiles;  // C is rounded with vcvtne2ps2bf16
  if (f.amx_cpu) {
    // Linux (5.16+) hands out the 8 KB tile state only on request, once per process.
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    f.amx = ::syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }
  return f;
}

std::atomic<int> g_capability{-1};  // -1: not chosen yet

CpuCapability parse_env() {
  const char* v = std::getenv("TG_CPU_CAPABILITY");
  const CpuCapability best = best_cpu_capability();
  if (v == nullptr || *v == '\0') return best;
  for (CpuCapability c : {CpuCapability::kPortable, CpuCapability::kAvx512Bf16, CpuCapability::kAmx}) {
    if (std::strcmp(v, cpu_capability_name(c)) != 0) continue;
    if (static_cast<int>(c) > static_cast<int>(best))
      detail::fail("cpu_capability", "TG_CPU_CAPABILITY={}: this CPU (or its OS) cannot run that path; the best here is {} "
                   "(a lower one may be forced, not a higher one)", v, cpu_capability_name(best));
    return c;
  }
  detail::fail("cpu_capability", "TG_CPU_CAPABILITY={} is not a path (expected amx, avx512_bf16 or portable)", v);
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

const char* cpu_capability_name(CpuCapability c) {
  switch (c) {
    case CpuCapability::kPortable: return "portable";
    case CpuCapability::kAvx512Bf16: return "avx512_bf16";
    case CpuCapability::kAmx: return "amx";
  }
  return "?";
}

CpuCapability best_cpu_capability() {
  const CpuFeatures& f = cpu_features();
  return f.amx ? CpuCapability::kAmx : f.avx512_bf16 ? CpuCapability::kAvx512Bf16 : CpuCapability::kPortable;
}

CpuCapability cpu_capability() {
  int c = g_capability.load(std::memory_order_acquire);
  if (c >= 0) return static_cast<CpuCapability>(c);
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  c = g_capability.load(std::memory_order_relaxed);
  if (c < 0) {
    c = static_cast<int>(parse_env());
    g_capability.store(c, std::memory_order_release);
  }
  return static_cast<CpuCapability>(c);
}

void set_cpu_capability(CpuCapability c) {
  if (static_cast<int>(c) > static_cast<int>(best_cpu_capability()))
    detail::fail("set_cpu_capability", "this CPU cannot run {} (best: {})", cpu_capability_name(c),
                 cpu_capability_name(best_cpu_capability()));
  g_capability.store(static_cast<int>(c), std::memory_order_release);
}

std::string cpu_capability_description() {
  const CpuFeatures& f = cpu_features();
  std::string s = std::string("bf16 matmul: ") + cpu_capability_name(cpu_capability()) + " (CPU: avx512_bf16 " +
                  (f.avx512_bf16 ? "yes" : "no") + ", amx " + (f.amx ? "yes" : f.amx_cpu ? "refused by the OS" : "no");
  if (cpu_capability() != best_cpu_capability())
    s += std::string("; TG_CPU_CAPABILITY lowered it from ") + cpu_capability_name(best_cpu_capability());
  return s + ")";
}

}  // namespace tg
