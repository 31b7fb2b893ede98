#include "graph/pool.h"

#include <cstdlib>
#include <mutex>
#include <vector>

namespace tg::detail {
namespace {

constexpr size_t kClass = 64;                         // size-class granularity and alignment
constexpr size_t kClasses = kPoolMaxBytes / kClass;   // 64, 128, ..., 512
[[maybe_unused]] constexpr size_t kSlabBytes = 64 * 1024;
[[maybe_unused]] constexpr size_t kMaxPerThread = 8192;  // blocks a thread keeps per class

struct FreeBlock {
  FreeBlock* next;
};

// Blocks no thread is holding, and slab accounting.
struct Shared {
  std::mutex mu;
  FreeBlock* lists[kClasses] = {};
  size_t slab_bytes = 0;
};
Shared& shared() {
  static Shared* s = new Shared();  // never destroyed: blocks may be freed during static teardown
  return *s;
}

#ifndef TG_NO_POOL
// Set once this thread's lists are gone (thread exit, or static teardown on the main thread):
// later frees go to the shared list. A plain bool, so it is usable after the lists' destructor.
thread_local bool t_lists_gone = false;

struct ThreadLists {
  FreeBlock* head[kClasses] = {};
  size_t count[kClasses] = {};
  ~ThreadLists() {  // a finishing thread hands its blocks over
    t_lists_gone = true;
    Shared& s = shared();
    std::lock_guard lock(s.mu);
    for (size_t c = 0; c < kClasses; ++c) {
      while (FreeBlock* b = head[c]) {
        head[c] = b->next;
        b->next = s.lists[c];
        s.lists[c] = b;
      }
    }
  }
};
thread_local ThreadLists t_lists;

size_t class_of(size_t bytes) { return bytes == 0 ? 0 : (bytes - 1) / kClass; }

void refill(size_t c) {
  ThreadLists& t = t_lists;
  Shared& s = shared();
  std::lock_guard lock(s.mu);
  // Take up to half a thread's bound from the shared list first.
  for (size_t n = 0; n < kMaxPerThread / 2 && s.lists[c]; ++n) {
    FreeBlock* b = s.lists[c];
    s.lists[c] = b->next;
    b->next = t.head[c];
    t.head[c] = b;
    ++t.count[c];
  }
  if (t.head[c]) return;
  char* slab = static_cast<char*>(std::aligned_alloc(kClass, kSlabBytes));
  if (!slab) throw std::bad_alloc();
  s.slab_bytes += kSlabBytes;
  const size_t size = (c + 1) * kClass;
  for (size_t off = 0; off + size <= kSlabBytes; off += size) {
    auto* b = reinterpret_cast<FreeBlock*>(slab + off);
    b->next = t.head[c];
    t.head[c] = b;
    ++t.count[c];
  }
}

#endif  // TG_NO_POOL

}  // namespace

#ifdef TG_NO_POOL
void* pool_alloc(size_t bytes) { return ::operator new(bytes, std::align_val_t(kClass)); }
void pool_free(void* p, size_t) { ::operator delete(p, std::align_val_t(kClass)); }
#else
void* pool_alloc(size_t bytes) {
  const size_t c = class_of(bytes);
  if (t_lists_gone) return ::operator new((c + 1) * kClass, std::align_val_t(kClass));  // freed into a list later
  ThreadLists& t = t_lists;
  if (!t.head[c]) refill(c);
  FreeBlock* b = t.head[c];
  t.head[c] = b->next;
  --t.count[c];
  return b;
}

void pool_free(void* p, size_t bytes) {
  const size_t c = class_of(bytes);
  auto* b = static_cast<FreeBlock*>(p);
  if (t_lists_gone || t_lists.count[c] >= kMaxPerThread) {
    Shared& s = shared();
    std::lock_guard lock(s.mu);
    b->next = s.lists[c];
    s.lists[c] = b;
    return;
  }
  ThreadLists& t = t_lists;
  b->next = t.head[c];
  t.head[c] = b;
  ++t.count[c];
}

#endif

size_t pool_slab_bytes() {
  std::lock_guard lock(shared().mu);
  return shared().slab_bytes;
}

}  // namespace tg::detail
