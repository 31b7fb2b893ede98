#pragma once
// Fixed-size block pools for the small objects every op allocates: tensor handles, graph nodes
// and the storages of tiny tensors. Blocks come from per-thread free lists (one per 64-byte size
// class up to kPoolMaxBytes), refilled from 64 KB slabs, so an op's common path makes no call to
// malloc. A block freed on another thread joins that thread's list; lists longer than a bound
// spill into a shared list, so nothing grows without limit.
#include <cstddef>
#include <new>
#include <type_traits>

namespace tg::detail {

inline constexpr size_t kPoolMaxBytes = 512;

void* pool_alloc(size_t bytes);           // bytes <= kPoolMaxBytes; 64-byte aligned
void pool_free(void* p, size_t bytes);    // the same bytes as allocated
size_t pool_slab_bytes();                 // memory held by the pools (for tests)

// An allocator for std::allocate_shared: small requests from the pools, others from new.
template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() noexcept = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes <= kPoolMaxBytes && alignof(T) <= 64) return static_cast<T*>(pool_alloc(bytes));
    return static_cast<T*>(::operator new(bytes, std::align_val_t(alignof(T) < 64 ? 64 : alignof(T))));
  }
  void deallocate(T* p, size_t n) noexcept {
    const size_t bytes = n * sizeof(T);
    if (bytes <= kPoolMaxBytes && alignof(T) <= 64) pool_free(p, bytes);
    else ::operator delete(p, std::align_val_t(alignof(T) < 64 ? 64 : alignof(T)));
  }
  template <class U>
  bool operator==(const PoolAllocator<U>&) const noexcept { return true; }
};

}  // namespace tg::detail
