// Steady memory in training loops: the storage counters (live and cached bytes), size-class reuse
// of freed buffers, and the cache's automatic limit. Run in this process, so numbers are relative
// to what the process held before each test.
#include <algorithm>
#include <fstream>
#include <string>

#include <unistd.h>

#include "test_util.h"

namespace {
using tg::Tensor;

// AddressSanitizer keeps freed memory in quarantine (and the sanitizer build gives large buffers
// to malloc), so resident-memory bounds hold only in the other builds.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif
// Under AddressSanitizer or in a Debug build (-Og, no NDEBUG; baseline x86-64 in the consumer's
// build) a training step is 15-60x slower: the long loops run fewer steps there (the same code
// paths; the release builds run them in full).
#if defined(NDEBUG)
constexpr bool kSlowBuild = kAsan;
#else
constexpr bool kSlowBuild = true;
#endif
using tgt::throws_with;

size_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

tg::TransformerConfig small_translator() {
  tg::TransformerConfig c;
  c.src_vocab = c.tgt_vocab = 50;
  c.layer = {.d_model = 64, .heads = 4, .d_ff = 128, .dropout = 0.1};
  c.encoder_layers = c.decoder_layers = 1;
  c.max_len = 64;
  return c;
}

// One training step on a random batch [B, S] -> [B, T].
double step(tg::Transformer& model, tg::Optimizer& opt, int64_t B, int64_t S, int64_t T) {
  Tensor src = tg::randint(1, 50, {B, S}), tgt = tg::randint(1, 50, {B, T}), out = tg::randint(1, 50, {B, T});
  Tensor logits = model.forward(src, tgt);
  Tensor loss = tg::cross_entropy(logits.reshape({B * T, 50}), out.reshape({B * T}));
  loss.backward();
  opt.step();
  opt.zero_grad();
  return loss.item();
}

// 1,000 steps later (100 in the slow builds).
TEST(Memory, FixedShapesHoldTheSameLiveBytesAtStep1010AsAtStep10) {
  tg::manual_seed(3);
  tg::Transformer model(small_translator());
  tg::AdamW opt(model.named_parameters(), {.lr = 1e-3});
  size_t at10 = 0, cached10 = 0;
  const int last = kSlowBuild ? 110 : 1010;
  for (int s = 1; s <= last; ++s) {
    step(model, opt, 8, 12, 11);
    if (s == 10) {
      at10 = tg::storage_live_bytes();
      cached10 = tg::storage_cache_bytes();
    }
  }
  EXPECT_EQ(tg::storage_live_bytes(), at10);
  EXPECT_EQ(tg::storage_cache_bytes(), cached10) << "the same shapes reuse the same buffers";
}

// Batches as a translator makes them: every step another (batch, source, target) shape.
TEST(Memory, VariedShapesStayWithinTheCacheLimit) {
  tg::manual_seed(4);
  tg::Transformer model(small_translator());
  tg::AdamW opt(model.named_parameters(), {.lr = 1e-3});
  tg::Generator shapes(7);
  auto shape_step = [&] {
    const int64_t T = 4 + static_cast<int64_t>(shapes.next_u64() % 40);
    const int64_t B = std::max<int64_t>(1, 1200 / T);  // about 1,200 target tokens a batch
    step(model, opt, B, std::max<int64_t>(2, T - 3 + static_cast<int64_t>(shapes.next_u64() % 7)), T);
  };
  for (int s = 0; s < 50; ++s) shape_step();
  const size_t live50 = tg::storage_live_bytes(), rss50 = rss_bytes();
  size_t most_live = 0, most_cached = 0;
  const int shapes_after = kSlowBuild ? 60 : 400;
  for (int s = 0; s < shapes_after; ++s) {
    shape_step();
    most_live = std::max(most_live, tg::storage_live_bytes());
    most_cached = std::max(most_cached, tg::storage_cache_bytes());
  }
  // Between steps only the weights, gradients and moments stay: what step 50 held.
  EXPECT_EQ(tg::storage_live_bytes(), live50);
  EXPECT_LE(most_cached, tg::storage_cache_limit());
  EXPECT_LE(tg::storage_cache_limit(), std::max<size_t>(size_t{64} << 20, tg::storage_peak_bytes() + (size_t{1} << 20)) + 0)
      << "the automatic limit follows the most bytes held at once";
  // The bound stated in graph/storage.h: resident memory grows by at most the cache's limit (plus
  // malloc's own slack) after the first 50 shapes, however many more shapes come.
  const size_t rss450 = rss_bytes();
  if (!kAsan) {
    EXPECT_LE(rss450, rss50 + tg::storage_cache_limit() + (size_t{16} << 20))
      << "RSS " << rss50 / 1048576 << " MB at step 50, " << rss450 / 1048576 << " MB at step 450";
  }
}

TEST(Memory, SizeClassesServeNearbySizes) {
  tg::empty_storage_cache();
  void* first;
  {
    Tensor a = tg::empty({100000});  // 400,000 bytes: the 448 KiB class
    first = a.raw_data();
  }
  Tensor b = tg::empty({105000});  // 420,000 bytes: the same class, the same buffer
  EXPECT_EQ(b.raw_data(), first);
  Tensor c = tg::empty({120000});  // 480,000 bytes: the next class
  EXPECT_NE(c.raw_data(), first);
}

TEST(Memory, ZeroLimitKeepsNothingAndAutoFollowsTheWork) {
  tg::set_storage_cache_limit(0);
  { Tensor a = tg::empty({1 << 20}); }
  EXPECT_EQ(tg::storage_cache_bytes(), 0u);
  tg::set_storage_cache_limit(tg::kStorageCacheAuto);
  EXPECT_GE(tg::storage_cache_limit(), size_t{64} << 20);
  { Tensor big = tg::empty({int64_t{40} << 20}); }  // 160 MB at once raises the automatic limit
  EXPECT_GE(tg::storage_cache_limit(), size_t{160} << 20);
}

}  // namespace
