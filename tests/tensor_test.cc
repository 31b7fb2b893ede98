// Tensors: factories, seeding, element access, printing, in-place updates, storage.
#include <fmt/format.h>

#include "test_util.h"

namespace {
using namespace tgt;

TEST(Tensor, Factories) {
  EXPECT_EQ(tg::zeros({2, 3}).to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(tg::ones({2}, tg::kFloat64).to_vector<double>(), std::vector<double>(2, 1.0));
  EXPECT_EQ(tg::full({3}, 2.5).to_vector<float>(), std::vector<float>(3, 2.5f));
  EXPECT_EQ(tg::arange(5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(tg::arange(5).dtype(), tg::kInt64);
  EXPECT_EQ(tg::arange(1.0, 2.0, 0.25).to_vector<float>(), (std::vector<float>{1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(tg::arange(3.0, 0.0, -1.0).to_vector<float>(), (std::vector<float>{3, 2, 1}));
  EXPECT_EQ(tg::eye(3).to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(tg::eye(2, 3).shape(), (Shape{2, 3}));
  Tensor t = tg::tensor({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.dim(), 2);
  EXPECT_EQ(t.size(-1), 3);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(tg::tensor({{{1, 2}}, {{3, 4}}}).shape(), (Shape{2, 1, 2}));
  EXPECT_EQ(tg::from_vector<int64_t>({1, 2, 3, 4}, {2, 2}).dtype(), tg::kInt64);
  // int64 values are kept exactly, not through a double: ids past 2^53, 64-bit keys (dropout keyed
  // by sample uploads its keys so: a rounded key draws another mask on the GPU).
  const std::vector<int64_t> wide = {0x53cb3b3ca8d0ee6fLL, (int64_t{1} << 53) + 1, -(int64_t{1} << 62) - 3};
  EXPECT_EQ(tg::from_vector<int64_t>(wide, {3}).to_vector<int64_t>(), wide);
  EXPECT_EQ(tg::scalar(3.0).shape(), Shape{});
  EXPECT_EQ(tg::scalar(3.0).item(), 3.0);
  EXPECT_EQ(tg::zeros({0, 4}).numel(), 0);
  EXPECT_EQ(tg::zeros_like(t).shape(), t.shape());
  EXPECT_EQ(tg::ones_like(t).to_vector<int>(), std::vector<int>(6, 1));
}

TEST(Tensor, RandomFactoriesAreSeededAndSensible) {
  tg::manual_seed(123);
  std::vector<float> a = tg::randn({1000}).to_vector<float>();
  tg::manual_seed(123);
  std::vector<float> b = tg::randn({1000}).to_vector<float>();
  EXPECT_EQ(a, b);
  tg::manual_seed(124);
  EXPECT_NE(a, tg::randn({1000}).to_vector<float>());
  // Moments of large samples.
  tg::manual_seed(1);
  Tensor n = tg::normal({200000}, 2.0, 3.0, tg::kFloat64);
  EXPECT_NEAR(tg::mean(n).item(), 2.0, 0.05);
  EXPECT_NEAR(std::sqrt(tg::var(n).item()), 3.0, 0.05);
  Tensor u = tg::uniform({200000}, -1.0, 3.0, tg::kFloat64);
  EXPECT_NEAR(tg::mean(u).item(), 1.0, 0.02);
  EXPECT_GE(tg::amin(u).item(), -1.0);
  EXPECT_LT(tg::amax(u).item(), 3.0);
  Tensor r = tg::rand({1000});
  EXPECT_GE(tg::amin(r).item(), 0.0);
  EXPECT_LT(tg::amax(r).item(), 1.0);
  Tensor ri = tg::randint(3, 7, {1000});
  EXPECT_EQ(ri.dtype(), tg::kInt64);
  for (int64_t v : ri.to_vector<int64_t>()) EXPECT_TRUE(v >= 3 && v < 7);
}

TEST(Tensor, RandomNumbersDoNotDependOnThreadCount) {
  tg::set_num_threads(1);
  tg::manual_seed(5);
  std::vector<float> one = tg::randn({100000}).to_vector<float>();
  tg::set_num_threads(2);
  tg::manual_seed(5);
  EXPECT_EQ(one, tg::randn({100000}).to_vector<float>());
}

TEST(Tensor, GeneratorStateRoundTrips) {
  tg::manual_seed(77);
  tg::randn({3});
  auto state = tg::default_generator().state();
  std::vector<float> a = tg::randn({5}).to_vector<float>();
  tg::default_generator().set_state(state);
  EXPECT_EQ(a, tg::randn({5}).to_vector<float>());
}

TEST(Tensor, ItemAndConversions) {
  EXPECT_EQ(tg::tensor({2.5}).item(), 2.5);
  EXPECT_EQ(tg::tensor({2.5}).item<float>(), 2.5f);
  Tensor i = tg::tensor({1.7, -2.2}).to(tg::kInt64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, -2}));
  EXPECT_EQ(tg::tensor({0.0, 3.0}).to(tg::kBool).to_vector<int>(), (std::vector<int>{0, 1}));
  EXPECT_EQ(tg::tensor({1.5}).to(tg::kFloat64).dtype(), tg::kFloat64);
}

TEST(Tensor, PrintsLikePyTorch) {
  EXPECT_EQ(fmt::format("{}", tg::tensor({{1.5, -2.25}, {3.0, 4.0}})),
            "tensor([[ 1.5000, -2.2500],\n        [ 3.0000,  4.0000]])");
  EXPECT_EQ(fmt::format("{}", tg::tensor({1, 2, 3})), "tensor([1., 2., 3.])");
  EXPECT_EQ(fmt::format("{}", tg::scalar(0.5, tg::kFloat64)), "tensor(0.5000, dtype=float64)");
  EXPECT_EQ(fmt::format("{}", tg::arange(3)), "tensor([0, 1, 2])");
  EXPECT_EQ(fmt::format("{}", tg::tensor({1e-6, 1.0})), "tensor([1.0000e-06, 1.0000e+00])");
  Tensor w = tg::ones({2}).requires_grad_();
  EXPECT_EQ(fmt::format("{}", w), "tensor([1., 1.], requires_grad=true)");
  EXPECT_EQ(fmt::format("{}", w * 2.0), "tensor([2., 2.], grad_fn=<mul>)");
  EXPECT_EQ(fmt::format("{}", tg::gt(tg::tensor({1, -1}), 0.0)), "tensor([ true, false], dtype=bool)");
  EXPECT_EQ(fmt::format("{}", tg::zeros({0, 3})), "tensor([], size=[0, 3])");
  // Large tensors are elided: first and last 3 of each dimension.
  std::string big = fmt::format("{}", tg::arange(0, 2000, 1, tg::kFloat32));
  EXPECT_EQ(big, "tensor([   0.,    1.,    2., ..., 1997., 1998., 1999.])");
  std::string mat = fmt::format("{}", tg::zeros({100, 100}));
  EXPECT_NE(mat.find("..."), std::string::npos);
  EXPECT_LT(mat.size(), 400u);
}

TEST(Tensor, InPlaceUpdatesOnLeavesUnderNoGrad) {
  Tensor w = tg::ones({2, 2}).requires_grad_();
  EXPECT_TRUE(throws_with([&] { w.add_(tg::ones({2, 2})); }, {"add_", "NoGradGuard"}));
  {
    tg::NoGradGuard ng;
    w.add_(tg::tensor({1, 2}), -0.5);  // broadcasts over rows
    EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{0.5, 0.0, 0.5, 0.0}));
    w.mul_(4.0);
    EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{2, 0, 2, 0}));
    w.copy_(tg::tensor({{1, 2}, {3, 4}}, tg::kFloat64));
    EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
    w.fill_(7);
    EXPECT_EQ(w.to_vector<float>(), std::vector<float>(4, 7));
  }
  Tensor y = w * 2.0;
  tg::NoGradGuard ng;
  EXPECT_TRUE(throws_with([&] { y.mul_(2.0); }, {"mul_", "'mul'"}));
}

TEST(Tensor, StorageIsFreedWhenNothingHoldsIt) {
  tg::set_storage_cache_limit(0);
  size_t before = tg::storage_live_bytes();
  {
    Tensor a = tg::zeros({1000, 1000});
    Tensor view = a.reshape({-1});
    a = Tensor();
    EXPECT_GE(tg::storage_live_bytes(), before + 4000000);  // the view keeps it alive
  }
  EXPECT_LE(tg::storage_live_bytes(), before);
  tg::set_storage_cache_limit(tg::kStorageCacheAuto);
}

TEST(Tensor, StorageCacheIsBoundedAndReused) {
  tg::empty_storage_cache();
  tg::set_storage_cache_limit(8 << 20);
  void* first;
  {
    Tensor a = tg::zeros({256, 1024});  // 1 MiB
    first = a.raw_data();
  }
  EXPECT_EQ(tg::storage_cache_bytes(), size_t{1} << 20);
  Tensor b = tg::zeros({256, 1024});
  EXPECT_EQ(b.raw_data(), first);  // reused
  for (int i = 0; i < 20; ++i) Tensor big = tg::zeros({1 << 20});  // 4 MiB each, churned
  EXPECT_LE(tg::storage_cache_bytes(), size_t{8} << 20);
  tg::set_storage_cache_limit(tg::kStorageCacheAuto);
}

TEST(Tensor, DataIsAligned) {
  for (int64_t n : {1, 3, 17, 100000}) {
    Tensor t = tg::empty({n});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
  }
}

TEST(Tensor, AnyRank) {
  Tensor t = tg::ones({1, 2, 1, 2, 1, 2, 1, 2});
  EXPECT_EQ(t.dim(), 8);
  EXPECT_EQ(tg::sum(t * t, {1, 3}).shape(), (Shape{1, 1, 1, 2, 1, 2}));
  EXPECT_EQ(tg::permute(t, {7, 6, 5, 4, 3, 2, 1, 0}).shape(), (Shape{2, 1, 2, 1, 2, 1, 2, 1}));
}

TEST(Tensor, ThreadCountCanBeSet) {
  tg::set_num_threads(1);
  EXPECT_EQ(tg::num_threads(), 1);
  tg::set_num_threads(2);
  EXPECT_EQ(tg::num_threads(), 2);
  // Large elementwise work agrees exactly across counts.
  Tensor x = tg::randn({1 << 20});
  tg::set_num_threads(1);
  std::vector<float> a = tg::gelu(x).to_vector<float>();
  float s1 = tg::sum(x).item<float>();
  tg::set_num_threads(2);
  EXPECT_EQ(a, tg::gelu(x).to_vector<float>());
  EXPECT_EQ(s1, tg::sum(x).item<float>());
}

}  // namespace
