// What data parallelism rests on, in one process: dropout keyed by sample (the same mask for a
// sample wherever it sits and however its batch is padded; gradient checked), the split of a
// batch over processes, and the gradient buckets with a communicator of one.
#include "test_util.h"

namespace tgt {
namespace {

// Row r of a [B, T, D] tensor of ones through keyed dropout: the kept pattern of sample `id`.
std::vector<double> mask_of(const Tensor& y, int64_t row, int64_t T_keep) {
  std::vector<double> v = y.to_vector<double>();
  const int64_t T = y.size(1), D = y.size(2);
  return std::vector<double>(v.begin() + row * T * D, v.begin() + row * T * D + T_keep * D);
}

TEST(KeyedDropout, SameMaskForASampleWhateverItsRowAndPadding) {
  Tensor a, b;
  {
    tg::SampleKeyScope keys(42, {5, 9, 13});
    a = tg::dropout(tg::ones({3, 4, 8}), 0.5);
  }
  {
    tg::SampleKeyScope keys(42, {13, 5});  // other rows, longer padding
    b = tg::dropout(tg::ones({2, 6, 8}), 0.5);
  }
  EXPECT_EQ(mask_of(a, 0, 4), mask_of(b, 1, 4));  // sample 5
  EXPECT_EQ(mask_of(a, 2, 4), mask_of(b, 0, 4));  // sample 13
  EXPECT_NE(mask_of(a, 0, 4), mask_of(a, 1, 4));  // samples differ
  // Attention-shaped [B, H, T, S]: padding in both T and S leaves a sample's mask in place.
  Tensor c, d;
  {
    tg::SampleKeyScope keys(7, {1, 2});
    c = tg::dropout(tg::ones({2, 2, 3, 3}), 0.3);
  }
  {
    tg::SampleKeyScope keys(7, {2});
    d = tg::dropout(tg::ones({1, 2, 5, 4}), 0.3);
  }
  std::vector<double> cv = c.to_vector<double>(), dv = d.to_vector<double>();
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t s = 0; s < 3; ++s)
        EXPECT_EQ(cv[static_cast<size_t>(((1 * 2 + h) * 3 + t) * 3 + s)], dv[static_cast<size_t>((h * 5 + t) * 4 + s)]);
}

TEST(KeyedDropout, CallsAndKeysGiveNewMasksAndTheRateHolds) {
  tg::SampleKeyScope keys(1, {0, 1, 2, 3});
  Tensor x = tg::ones({4, 64, 64});
  Tensor a = tg::dropout(x, 0.25), b = tg::dropout(x, 0.25);
  EXPECT_EQ(keys.calls, 2u);
  EXPECT_FALSE(a.to_vector<float>() == b.to_vector<float>());  // the second call has its own masks
  const double kept = tg::sum(tg::to(tg::ne(a, 0.0), tg::kFloat32)).item() / static_cast<double>(a.numel());
  EXPECT_NEAR(kept, 0.75, 0.01);
  EXPECT_NEAR(tg::mean(a).item(), 1.0, 0.02);  // scaled by 1 / (1 - p)
}

TEST(KeyedDropout, OtherShapesTakeOneKeyFromTheScopeAndItsSamples) {
  Tensor a, b, c;
  {
    tg::SampleKeyScope keys(1, {0, 1});
    a = tg::dropout(tg::ones({3, 8}), 0.5);  // 3 rows but 2 samples: one key for the whole mask
    EXPECT_EQ(keys.calls, 1u);             // counted, so later keyed calls keep their numbers
  }
  {
    tg::SampleKeyScope keys(1, {0, 1});
    b = tg::dropout(tg::ones({3, 8}), 0.5);
  }
  {
    tg::SampleKeyScope keys(1, {2, 3});  // another process's samples: another mask
    c = tg::dropout(tg::ones({3, 8}), 0.5);
  }
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  EXPECT_NE(a.to_vector<float>(), c.to_vector<float>());
  tg::manual_seed(3);  // outside a scope: the global generator, as always
  Tensor d = tg::dropout(tg::ones({3, 8}), 0.5);
  tg::manual_seed(3);
  EXPECT_EQ(d.to_vector<float>(), tg::dropout(tg::ones({3, 8}), 0.5).to_vector<float>());
}

TEST(KeyedDropout, Gradcheck) {
  Tensor x = leaf({2, 3, 4});
  EXPECT_TRUE(gradcheck_ok(
      [](const std::vector<Tensor>& in) {
        tg::SampleKeyScope keys(9, {4, 2});
        return tg::dropout(in[0], 0.3);
      },
      {x}));
  EXPECT_TRUE(gradgradcheck_ok(
      [](const std::vector<Tensor>& in) {
        tg::SampleKeyScope keys(9, {4, 2});
        return tg::mul(tg::dropout(in[0], 0.3), in[0]);
      },
      {x}));
}

// float32's backward (one pass applying the mask to the gradient, vectorized, with a scalar tail:
// rows of 40) gives the forward's mask: with x all ones, x's gradient of sum(y) is y itself.
TEST(KeyedDropout, Float32BackwardAppliesTheForwardsMask) {
  for (bool keyed : {true, false}) {
    Tensor x = tg::ones({3, 5, 40});
    x.set_requires_grad(true);
    Tensor y;
    if (keyed) {
      tg::SampleKeyScope keys(11, {7, 8, 9});
      y = tg::dropout(x, 0.3);
      tg::sum(y).backward();
    } else {
      tg::manual_seed(5);
      y = tg::dropout(x, 0.3);
      tg::sum(y).backward();
    }
    EXPECT_EQ(x.grad().to_vector<float>(), y.to_vector<float>()) << (keyed ? "keyed" : "one key");
    const double kept = tg::sum(tg::to(tg::ne(y, 0.0), tg::kFloat32)).item() / static_cast<double>(y.numel());
    EXPECT_NEAR(kept, 0.7, 0.05);
  }
}

TEST(DataParallel, ShardsSplitABatchInOrder) {
  const std::vector<int64_t> b = {10, 11, 12, 13, 14, 15, 16};
  EXPECT_EQ(tg::dist::shard(b, 0, 2), (std::vector<int64_t>{10, 11, 12, 13}));
  EXPECT_EQ(tg::dist::shard(b, 1, 2), (std::vector<int64_t>{14, 15, 16}));
  EXPECT_EQ(tg::dist::shard(b, 2, 3), (std::vector<int64_t>{15, 16}));  // 3 + 2 + 2
  EXPECT_EQ(tg::dist::shard({7}, 1, 2), std::vector<int64_t>{});
  EXPECT_EQ(tg::dist::shard({7}, 0, 2), std::vector<int64_t>{7});
  std::vector<int64_t> joined;
  for (int r = 0; r < 4; ++r) {
    auto s = tg::dist::shard(b, r, 4);
    joined.insert(joined.end(), s.begin(), s.end());
  }
  EXPECT_EQ(joined, b);
  EXPECT_THROW(tg::dist::shard(b, 2, 2), tg::Error);
}

TEST(DataParallel, DistributedSamplerGivesEachProcessItsShareOfTheSameBatches) {
  tg::train::ShuffledSampler global(11, 4);  // batches of 4, 4, 3
  tg::train::DistributedSampler p0(global, 0, 2), p1(global, 1, 2);
  for (int64_t epoch : {0, 1}) {
    const auto g = global.batches(5, epoch), a = p0.batches(5, epoch), b = p1.batches(5, epoch);
    ASSERT_EQ(a.size(), g.size());
    ASSERT_EQ(b.size(), g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      std::vector<int64_t> joined = a[i];
      joined.insert(joined.end(), b[i].begin(), b[i].end());
      EXPECT_EQ(joined, g[i]);
    }
    EXPECT_EQ(a.back().size(), 2u);  // the uneven last batch: 2 + 1
    EXPECT_EQ(b.back().size(), 1u);
  }
  EXPECT_NE(global.batches(5, 0), global.batches(5, 1));  // reshuffled each epoch, the same on every process
}

TEST(DataParallel, OneProcessIsTheWorldOutsideALauncher) {
  EXPECT_FALSE(tg::dist::launched_as_several());
  EXPECT_EQ(tg::dist::world().size(), 1);
  EXPECT_TRUE(tg::dist::is_main());
  double v = 3;
  tg::dist::single().all_reduce_sum(&v, 1);
  EXPECT_EQ(v, 3);
  std::string s = "x";
  tg::dist::single().broadcast(s);
  EXPECT_EQ(s, "x");
}

TEST(DataParallel, GradientSyncOfOneProcessKeepsTheGradients) {
  Tensor a = leaf({3}), b = leaf({2}), c = leaf({4});
  tg::dist::GradientSync sync(tg::dist::single(), {{"a", a}, {"b", b}, {"c", c}}, {.bucket_bytes = 48});
  EXPECT_EQ(sync.num_buckets(), 2u);  // reverse order: c + b (48 bytes), then a
  tg::sum(tg::add(tg::mul(a, 2.0), tg::sum(b))).backward();
  sync.finish();
  EXPECT_TRUE(close(a.grad(), {2, 2, 2}));
  EXPECT_TRUE(close(b.grad(), {3, 3}));  // sum(b) reaches each of the 3 elements
  EXPECT_FALSE(c.grad().defined());
  EXPECT_EQ(sync.last_stats().bytes, 9 * 8);
  EXPECT_THROW(tg::dist::GradientSync(tg::dist::single(), {{"i", tg::zeros({2}, tg::kInt64)}}), tg::Error);
}

}  // namespace
}  // namespace tgt
