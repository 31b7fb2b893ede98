// The path of bfloat16 products, chosen from what graph/cpu_features.cc (where every read of the
// CPU is) found, TG_CPU_CAPABILITY included.
#include "ops/cpu_capability.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "graph/build_info.h"
#include "graph/error.h"

namespace tg {
namespace {

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
  static const CpuFeatures f = [] {
    const detail::CpuFeatureBits bits = detail::read_cpu_features();
    return CpuFeatures{.avx512 = bits.avx512, .avx512_bf16 = bits.avx512_bf16, .amx_cpu = bits.amx_cpu, .amx = bits.amx};
  }();
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
