#include "graph/storage.h"

#include "graph/pool.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include <absl/container/flat_hash_map.h>

namespace tg::detail {
extern const char kCpuCheckLinked;  // graph/cpu_check.cc
}  // namespace tg::detail

namespace tg {
namespace {

// Pulls graph/cpu_check.cc into every static link, so that its load-time CPU check always runs.
[[gnu::used]] const char* const kKeepCpuCheck = &detail::kCpuCheckLinked;

constexpr size_t kAlign = 64;
// Small buffers come straight from malloc (fast for those sizes); large ones are cached.
constexpr size_t kCacheMin = 64 * 1024;

struct Cache {
  std::mutex mu;
  absl::flat_hash_map<size_t, std::vector<void*>> free;
  size_t bytes = 0;
  size_t limit = size_t{1} << 30;
};
Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: storages may die during static teardown
  return *c;
}
std::atomic<size_t> g_live{0};
std::atomic<size_t> g_peak{0};

size_t round_size(size_t n) {
  if (n < kCacheMin) return (n + kAlign - 1) / kAlign * kAlign;
  return (n + 4095) / 4096 * 4096;
}

}  // namespace

Storage::Storage(size_t nbytes) : nbytes_(round_size(nbytes == 0 ? 1 : nbytes)) {
  data_ = nullptr;
  if (nbytes_ <= kInlineBytes) {
    data_ = small_;
    g_live.fetch_add(nbytes_, std::memory_order_relaxed);
    return;
  }
  if (nbytes_ >= kCacheMin) {
    Cache& c = cache();
    std::lock_guard lock(c.mu);
    auto it = c.free.find(nbytes_);
    if (it != c.free.end() && !it->second.empty()) {
      data_ = it->second.back();
      it->second.pop_back();
      c.bytes -= nbytes_;
    }
  }
  if (!data_) {
    // No madvise(MADV_HUGEPAGE) here: with the kernel's usual defrag=madvise setting the first
    // touch of such a buffer can stall for compaction (hundreds of ms, measured), which costs far
    // more than the TLB misses it saves on memory-bound kernels.
    data_ = std::aligned_alloc(kAlign, nbytes_);
    if (!data_) throw std::bad_alloc();
  }
  const size_t live = g_live.fetch_add(nbytes_, std::memory_order_relaxed) + nbytes_;
  size_t peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

Storage::~Storage() {
  g_live.fetch_sub(nbytes_, std::memory_order_relaxed);
  if (data_ == small_) return;
  if (nbytes_ >= kCacheMin) {
    Cache& c = cache();
    std::lock_guard lock(c.mu);
    if (c.bytes + nbytes_ <= c.limit) {
      c.free[nbytes_].push_back(data_);
      c.bytes += nbytes_;
      return;
    }
  }
  std::free(data_);
}

std::shared_ptr<Storage> make_storage(size_t nbytes) {
  return std::allocate_shared<Storage>(detail::PoolAllocator<Storage>{}, nbytes);
}

size_t storage_cache_bytes() {
  std::lock_guard lock(cache().mu);
  return cache().bytes;
}
size_t storage_cache_limit() {
  std::lock_guard lock(cache().mu);
  return cache().limit;
}
void set_storage_cache_limit(size_t bytes) {
  {
    std::lock_guard lock(cache().mu);
    cache().limit = bytes;
  }
  if (storage_cache_bytes() > bytes) empty_storage_cache();
}
void empty_storage_cache() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  for (auto& [size, v] : c.free)
    for (void* p : v) std::free(p);
  c.free.clear();
  c.bytes = 0;
}
size_t storage_live_bytes() { return g_live.load(std::memory_order_relaxed); }
size_t storage_peak_bytes() { return g_peak.load(std::memory_order_relaxed); }
void reset_storage_peak() { g_peak.store(g_live.load(std::memory_order_relaxed)); }

}  // namespace tg
