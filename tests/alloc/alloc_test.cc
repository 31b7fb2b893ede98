// The common path of an op (a small tensor, with or without grad recording) makes no heap
// allocation: handles, nodes and tiny storages come from the small-object pools, and backward
// closures live inside their nodes. Counted by replacing the global operator new, so this test
// is its own executable (and is not built with the sanitizers, which replace it themselves).
#include <atomic>
#include <cstdlib>
#include <new>

#include <gtest/gtest.h>

#include "tapegrad.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_news{0};
void* counted(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_news.fetch_add(1, std::memory_order_relaxed);
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
void* counted_aligned(std::size_t n, std::align_val_t a) {
  if (g_counting.load(std::memory_order_relaxed)) g_news.fetch_add(1, std::memory_order_relaxed);
  void* p = std::aligned_alloc(static_cast<std::size_t>(a), (n + static_cast<std::size_t>(a) - 1) /
                                                                   static_cast<std::size_t>(a) * static_cast<std::size_t>(a));
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) { return counted(n); }
void* operator new[](std::size_t n) { return counted(n); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_aligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_aligned(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace {
using tg::Tensor;

template <class F>
long news_during(F&& f) {
  f();  // warm the pools
  g_news = 0;
  g_counting = true;
  for (int i = 0; i < 100; ++i) f();
  g_counting = false;
  return g_news.load();
}

TEST(Allocations, SmallOpWithoutGradAllocatesNothing) {
  Tensor a = tg::randn({4}), b = tg::randn({4});
  EXPECT_EQ(news_during([&] { Tensor c = a + b; }), 0);
  EXPECT_EQ(news_during([&] { Tensor c = tg::exp(a) * 2.0; }), 0);
}

TEST(Allocations, SmallOpWithGradRecordingAllocatesNothing) {
  Tensor a = tg::randn({4}).requires_grad_(), b = tg::randn({4}).requires_grad_();
  EXPECT_EQ(news_during([&] { Tensor c = a + b; }), 0);
  EXPECT_EQ(news_during([&] { Tensor c = a * b; }), 0);
  EXPECT_EQ(news_during([&] { Tensor c = tg::tanh(a); }), 0);
}

}  // namespace
