#include "graph/storage.h"

#include "graph/device_memory_internal.h"
#include "graph/pool.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include <sys/mman.h>


namespace tg::detail {
extern const char kCpuCheckLinked;  // graph/cpu_features.cc
}  // namespace tg::detail

namespace tg {
namespace {

// Pulls graph/cpu_features.cc into every static link, so that its load-time CPU check always runs.
[[gnu::used]] const char* const kKeepCpuCheck = &detail::kCpuCheckLinked;

constexpr size_t kAlign = 64;
// Small buffers come straight from malloc (fast for those sizes); large ones are cached.
constexpr size_t kCacheMin = 64 * 1024;
// The cache's automatic limit: the most bytes tensors have held at once in this process (so a
// program that needs 50 MB of tensors keeps at most about 50 MB more in the cache), and never
// less than this floor.
constexpr size_t kAutoLimitFloor = size_t{64} << 20;

// Size classes for cached buffers: four per power of two (64 KiB, 80, 96, 112, 128, 160, ...), so a
// buffer freed by one batch shape serves the next batch's slightly different shapes, and at most
// 25% of a buffer is unused.
size_t size_class(size_t n) {
  size_t p = kCacheMin;
  while (p * 2 <= n) p *= 2;
  const size_t step = p / 4;
  return (n + step - 1) / step * step;
}

// Large buffers are mapped pages of their own (returned to the system when freed past the cache),
// not malloc's: glibc serves them from its heap once its dynamic mmap threshold has grown, and a
// heap fragmented by many sizes does not shrink. The sanitizer builds use malloc so that the
// sanitizers see every buffer.
void* map_bytes(size_t n) {
#ifdef TG_NO_POOL
  return std::aligned_alloc(kAlign, n);
#else
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
#endif
}
void unmap_bytes(void* p, size_t n) {
#ifdef TG_NO_POOL
  (void)n;
  std::free(p);
#else
  ::munmap(p, n);
#endif
}

struct Cache {
  std::mutex mu;
  std::map<size_t, std::vector<void*>> free;  // by size class
  size_t bytes = 0;
  size_t limit = kStorageCacheAuto;
};
Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: storages may die during static teardown
  return *c;
}
std::atomic<size_t> g_live{0};
std::atomic<size_t> g_peak{0};
std::atomic<size_t> g_high_water{0};  // like g_peak, never reset: the automatic cache limit

size_t round_size(size_t n) {
  if (n < kCacheMin) return (n + kAlign - 1) / kAlign * kAlign;
  return size_class(n);
}

size_t limit_locked(const Cache& c) {
  return c.limit != kStorageCacheAuto ? c.limit : std::max(kAutoLimitFloor, g_high_water.load(std::memory_order_relaxed));
}

void raise_max(std::atomic<size_t>& m, size_t v) {
  size_t cur = m.load(std::memory_order_relaxed);
  while (v > cur && !m.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

namespace {
struct SpinLock {
  std::atomic<bool>& f;
  explicit SpinLock(std::atomic<bool>& flag) : f(flag) {
    while (f.exchange(true, std::memory_order_acquire)) {
    }
  }
  ~SpinLock() { f.store(false, std::memory_order_release); }
};
}  // namespace

std::shared_ptr<const void> Storage::derived(int slot, uint64_t key) const {
  SpinLock lock(derived_lock_);
  return derived_key_[slot] == key ? derived_[slot] : nullptr;
}

std::shared_ptr<const void> Storage::derived_any(int slot) const {
  SpinLock lock(derived_lock_);
  return derived_[slot];
}

void Storage::set_derived(int slot, uint64_t key, std::shared_ptr<const void> value) const {
  std::shared_ptr<const void> old;  // released outside the lock
  SpinLock lock(derived_lock_);
  old = std::move(derived_[slot]);
  derived_[slot] = std::move(value);
  derived_key_[slot] = key;
}

[[gnu::always_inline]] inline void Storage::allocate_host(size_t nbytes) {
  nbytes_ = round_size(nbytes == 0 ? 1 : nbytes);
  data_ = nullptr;
  if (nbytes_ <= kInlineBytes) {
    data_ = small_;
    g_live.fetch_add(nbytes_, std::memory_order_relaxed);
    return;
  }
  if (nbytes_ >= kCacheMin) {
    Cache& c = cache();
    {
      std::lock_guard lock(c.mu);
      // The request's class, or else the smallest cached class up to twice its size (the
      // storage then owns the larger buffer): batches of varied lengths find a buffer more often.
      for (auto it = c.free.lower_bound(nbytes_); it != c.free.end() && it->first <= 2 * nbytes_; ++it) {
        if (it->second.empty()) continue;
        data_ = it->second.back();
        it->second.pop_back();
        nbytes_ = it->first;
        c.bytes -= nbytes_;
        break;
      }
    }
    // No madvise(MADV_HUGEPAGE) here: with the kernel's usual defrag=madvise setting the first
    // touch of such a buffer can stall for compaction (hundreds of ms, measured), which costs far
    // more than the TLB misses it saves on memory-bound kernels.
    if (!data_) data_ = map_bytes(nbytes_);
  } else {
    data_ = std::aligned_alloc(kAlign, nbytes_);
  }
  if (!data_) throw std::bad_alloc();
  const size_t live = g_live.fetch_add(nbytes_, std::memory_order_relaxed) + nbytes_;
  raise_max(g_peak, live);
  raise_max(g_high_water, live);
}

Storage::Storage(size_t nbytes) { allocate_host(nbytes); }

Storage::Storage(size_t nbytes, Device device) : data_(nullptr), nbytes_(0), device_(device) {
  if (device.is_cpu()) {
    allocate_host(nbytes);
    return;
  }
  data_ = detail::device_allocate(device.index, nbytes, &nbytes_, "allocate");
}

Storage::~Storage() {
  if (device_.is_cuda()) {
    detail::device_free(device_.index, data_, nbytes_);
    return;
  }
  g_live.fetch_sub(nbytes_, std::memory_order_relaxed);
  if (data_ == small_) return;
  if (nbytes_ < kCacheMin) {
    std::free(data_);
    return;
  }
  Cache& c = cache();
  {
    std::lock_guard lock(c.mu);
    if (c.bytes + nbytes_ <= limit_locked(c)) {
      c.free[nbytes_].push_back(data_);
      c.bytes += nbytes_;
      return;
    }
  }
  unmap_bytes(data_, nbytes_);
}

std::shared_ptr<Storage> make_storage(size_t nbytes) {
  return std::allocate_shared<Storage>(detail::PoolAllocator<Storage>{}, nbytes);
}
std::shared_ptr<Storage> make_storage(size_t nbytes, Device device) {
  if (device.is_cpu()) return make_storage(nbytes);
  return std::allocate_shared<Storage>(detail::PoolAllocator<Storage>{}, nbytes, device);
}

size_t storage_cache_bytes() {
  std::lock_guard lock(cache().mu);
  return cache().bytes;
}
size_t storage_cache_limit() {
  std::lock_guard lock(cache().mu);
  return limit_locked(cache());
}
void set_storage_cache_limit(size_t bytes) {
  {
    std::lock_guard lock(cache().mu);
    cache().limit = bytes;
  }
  if (storage_cache_bytes() > storage_cache_limit()) empty_storage_cache();
}
void empty_storage_cache() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  for (auto& [size, v] : c.free)
    for (void* p : v) unmap_bytes(p, size);
  c.free.clear();
  c.bytes = 0;
}
size_t storage_live_bytes() { return g_live.load(std::memory_order_relaxed); }
size_t storage_peak_bytes() { return g_peak.load(std::memory_order_relaxed); }
void reset_storage_peak() { g_peak.store(g_live.load(std::memory_order_relaxed)); }

}  // namespace tg
