// Tensors on a GPU: copies there and back keep every bit, factories fill on the device, the host
// refuses to read device memory, the caching allocator reuses and frees, and each failure is one
// line. Needs a GPU (tests/gpu/gpu_test_util.h: skipped without one, failed with TG_REQUIRE_GPU=1).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_test_util.h"
#include "ops/autocast_internal.h"
#include "ops/dropout_internal.h"

namespace {

using tg::Device;
using tg::Tensor;
using tg::testing::kGpu;

std::vector<unsigned char> bytes_of(const Tensor& t) {
  std::vector<unsigned char> b(static_cast<size_t>(t.numel()) * tg::dtype_size(t.dtype()));
  if (!b.empty()) std::memcpy(b.data(), t.raw_data(), b.size());
  return b;
}

TEST(Gpu, CopiesThereAndBackKeepEveryBit) {
  TG_NEED_GPU();
  tg::manual_seed(7);
  for (tg::DType d : {tg::kFloat32, tg::kFloat64, tg::kBFloat16, tg::kInt64, tg::kBool}) {
    Tensor x = d == tg::kInt64 ? tg::randint(-1000, 1000, {3, 517})
               : d == tg::kBool ? tg::gt(tg::randn({3, 517}), 0.0)
                                : tg::randn({3, 517}).to(d);
    const uint64_t before = tg::cuda::kernel_launches();
    Tensor g = x.to(kGpu);
    EXPECT_TRUE(g.is_cuda());
    EXPECT_EQ(g.device(), kGpu);
    EXPECT_EQ(g.shape(), x.shape());
    EXPECT_EQ(g.dtype(), d);
    EXPECT_GT(tg::cuda::kernel_launches(), before);
    Tensor back = g.clone().to(tg::kCPU);  // and a copy on the device between
    EXPECT_FALSE(back.is_cuda());
    EXPECT_EQ(bytes_of(back), bytes_of(x)) << tg::dtype_name(d);
  }
}

TEST(Gpu, FactoriesFillOnTheDevice) {
  TG_NEED_GPU();
  for (tg::DType d : {tg::kFloat32, tg::kFloat64, tg::kBFloat16, tg::kInt64, tg::kBool}) {
    Tensor z = tg::zeros({1000, 3}, d, kGpu), o = tg::ones({7}, d, kGpu), f = tg::full({2, 2}, 3.0, d, kGpu);
    EXPECT_TRUE(z.is_cuda() && o.is_cuda() && f.is_cuda());
    EXPECT_EQ(bytes_of(z.to(tg::kCPU)), bytes_of(tg::zeros({1000, 3}, d))) << tg::dtype_name(d);
    EXPECT_EQ(bytes_of(o.to(tg::kCPU)), bytes_of(tg::ones({7}, d))) << tg::dtype_name(d);
    EXPECT_EQ(bytes_of(f.to(tg::kCPU)), bytes_of(tg::full({2, 2}, 3.0, d))) << tg::dtype_name(d);
    EXPECT_EQ(tg::zeros_like(f).device(), kGpu);
  }
  EXPECT_EQ(tg::full({}, -2.5, tg::kFloat32, kGpu).item(), -2.5);
  // Causal masks are made on the device (a kernel, no copy from the host): the CPU's bits.
  for (auto [T, S, offset] : {std::tuple<int64_t, int64_t, int64_t>{5, 5, 0}, {3, 7, 4}, {64, 80, 2}, {1, 9, 8}, {0, 4, 0}}) {
    const uint64_t k0 = tg::cuda::kernel_launches();
    Tensor m = tg::causal_mask(T, S, offset, kGpu);
    EXPECT_TRUE(m.is_cuda());
    if (T > 0) {
      EXPECT_EQ(tg::cuda::kernel_launches() - k0, 1u);
    }
    EXPECT_EQ(bytes_of(m.to(tg::kCPU)), bytes_of(tg::causal_mask(T, S, offset))) << T << " " << S << " " << offset;
  }
}

TEST(Gpu, TheHostReadsDeviceMemoryOnlyThroughCopies) {
  TG_NEED_GPU();
  Tensor g = tg::tensor({1.5, -2.0, 3.25}).to(kGpu);
  try {
    (void)g.data<float>();
    FAIL() << "no error";
  } catch (const tg::Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("TestBody (gpu/device_gpu_test.cc:", 0), 0u) << m;
    EXPECT_NE(m.find("reads the host memory of a tensor on cuda:0"), std::string::npos) << m;
  }
  EXPECT_NE(g.cuda_data<float>(), nullptr);
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_EQ(g.narrow(0, 1, 1).item(), -2.0);  // a view on the device
  EXPECT_EQ(fmt::format("{}", g), "tensor([ 1.5000, -2.0000,  3.2500], device='cuda:0')");
  EXPECT_NE(tg::cuda::stream(0), nullptr);
}

TEST(Gpu, GradientsFlowBackAcrossDevices) {
  TG_NEED_GPU();
  Tensor x = tg::randn({4, 3}).set_requires_grad();
  Tensor y = x.to(kGpu).to(tg::kCPU);
  tg::mul(y, 3.0).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), tg::kCPU);
  EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>(12, 3.0f));
}

TEST(Gpu, MemoryIsReusedAndFreed) {
  TG_NEED_GPU();
  tg::cuda::synchronize();
  const auto start = tg::cuda::memory_stats();
  size_t mallocs_after_first = 0;
  for (int step = 0; step < 50; ++step) {
    Tensor a = tg::zeros({256, 1024}, tg::kFloat32, kGpu);
    Tensor b = tg::ones({300 + step % 5}, tg::kFloat32, kGpu);
    Tensor c = a.clone();
    if (step == 0) mallocs_after_first = tg::cuda::memory_stats().device_mallocs;
  }
  const auto end = tg::cuda::memory_stats();
  const char* no_caching = std::getenv("TG_CUDA_NO_CACHING");
  if (no_caching != nullptr && no_caching[0] == '1') {  // each buffer from the driver, given back when freed
    EXPECT_GE(end.device_mallocs, mallocs_after_first + 49 * 3);
    EXPECT_EQ(end.reserved, end.allocated);
  } else {
    EXPECT_EQ(end.device_mallocs, mallocs_after_first);  // a steady loop calls cudaMalloc no more
  }
  EXPECT_EQ(end.allocated, start.allocated);  // everything freed went back
  EXPECT_GE(end.peak_allocated, start.allocated + 2 * 256 * 1024 * 4);
  tg::cuda::empty_cache();
  EXPECT_EQ(tg::cuda::memory_stats().reserved, tg::cuda::memory_stats().allocated);
}

TEST(Gpu, OutOfMemoryAndMissingDevicesAreOneLine) {
  TG_NEED_GPU();
  tg::cuda::set_memory_limit(size_t{64} << 20);
  try {
    Tensor big = tg::empty({int64_t{32} << 20}, tg::kFloat32, kGpu);  // 128 MiB
    FAIL() << "no error";
  } catch (const tg::Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("allocate: cuda:0: out of memory: 128.0 MiB asked for, past the limit of 64.0 MiB", 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos);
  }
  tg::cuda::set_memory_limit(0);
  try {
    Tensor t = tg::randn({2}).to(Device::cuda(63));
    FAIL() << "no error";
  } catch (const tg::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cuda:63 asked for, but this machine has"), std::string::npos) << m;
  }
  EXPECT_FALSE(tg::cuda::describe(0).empty());
}

TEST(Gpu, OpsRefuseTensorsOnTwoDevicesNamingBoth) {
  TG_NEED_GPU();
  Tensor a = tg::ones({3}), b = tg::ones({3}).to(kGpu);
  try {
    (void)tg::add(a, b);
    FAIL() << "no error";
  } catch (const tg::Error& e) {
    EXPECT_EQ(std::string(e.what()), "add: the first input is on cpu and the second input on cuda:0; an op takes "
                                     "tensors on one device (move one with .to(device))");
  }
}

}  // namespace

namespace {

TEST(Gpu, AnIndexOutOfRangeIsReportedAtTheNextSynchronization) {
  TG_NEED_GPU();
  tg::Tensor table = tg::randn({4, 3}).to(kGpu);
  tg::Tensor ids = tg::tensor({1.0, 7.0, 2.0}, tg::kInt64).to(kGpu);
  tg::Tensor rows = tg::embedding(table, ids);  // queued; the kernel writes zeros for id 7
  try {
    tg::cuda::synchronize();
    FAIL() << "no error";
  } catch (const tg::Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("embedding: index 7 is out of range for a dimension of size 4", 0), 0u) << m;
  }
  tg::cuda::synchronize();  // the flag is cleared: the device goes on
  EXPECT_EQ(tg::embedding(table, tg::tensor({3.0}, tg::kInt64).to(kGpu)).to_vector<float>(),
            table.narrow(0, 3, 1).to_vector<float>());
}

TEST(Gpu, ModulesMoveInPlaceAndLoadOntoTheirDevice) {
  TG_NEED_GPU();
  tg::manual_seed(1);
  auto lin = std::make_shared<tg::Linear>(3, 2);
  tg::Tensor w = lin->parameters()[0];
  const std::vector<float> before = w.to_vector<float>();
  lin->to(kGpu);
  EXPECT_TRUE(w.is_cuda());  // the same handle, moved
  EXPECT_EQ(lin->device(), kGpu);
  EXPECT_EQ(w.to_vector<float>(), before);
  tg::StateDict sd;
  for (auto& [name, p] : lin->named_parameters()) sd.insert(name, tg::zeros_like(p).to(tg::kCPU));
  lin->load_state_dict(sd);  // from the CPU onto the GPU: the load is the copy
  EXPECT_TRUE(w.is_cuda());
  EXPECT_EQ(w.to_vector<float>(), std::vector<float>(6, 0.0f));
}

TEST(Gpu, ReductionsGiveTheSameBitsEveryRun) {
  TG_NEED_GPU();
  tg::Tensor x = tg::randn({3, 1 << 18}).to(kGpu);
  const std::vector<float> a = tg::sum(x, {1}).to_vector<float>(), b = tg::sum(x, {1}).to_vector<float>();
  EXPECT_EQ(a, b);
  const std::vector<float> c = tg::softmax(x, 1).sum({1}).to_vector<float>();
  for (float v : c) EXPECT_NEAR(v, 1.0f, 1e-4f);
}

// Few outputs over a long R take two passes (cuda_ops::reduce_plan): a linear layer's bias gradient
// (the column sums of [rows, out]), whole-tensor sums and maxima, rows cut into pieces; against the
// CPU (float64: to rounding; float32: 1e-5 of the sum of magnitudes) and the same bits twice.
TEST(Gpu, ReductionsOfFewOutputsMatchTheCpu) {
  TG_NEED_GPU();
  tg::manual_seed(14);
  struct Case {
    tg::Shape shape;
    tg::Axes axes;
  };
  for (tg::DType dt : {tg::kFloat32, tg::kFloat64}) {
    for (const Case& c : {Case{{16384, 96}, {0}}, Case{{5, 3000, 7}, {1}}, Case{{100003}, {0}}, Case{{3, 40000}, {1}},
                          Case{{2, 20000, 3}, {0, 1}}}) {
      const Tensor x = tg::randn(c.shape, dt), xg = x.to(kGpu);
      const Tensor want = tg::sum(x, c.axes), got = tg::sum(xg, c.axes);
      const Tensor scale = tg::sum(tg::abs(x), c.axes);
      const std::vector<double> w = want.to_vector<double>(), g = got.to_vector<double>(), m = scale.to_vector<double>();
      ASSERT_EQ(w.size(), g.size());
      for (size_t i = 0; i < w.size(); ++i)
        EXPECT_LE(std::fabs(g[i] - w[i]), (dt == tg::kFloat64 ? 1e-12 : 1e-5) * (1 + m[i])) << c.shape.str() << " output " << i;
      EXPECT_EQ(got.to_vector<double>(), tg::sum(xg, c.axes).to_vector<double>()) << c.shape.str() << ": run to run";
      EXPECT_EQ(tg::amax(xg, c.axes).to_vector<double>(), tg::amax(x, c.axes).to_vector<double>()) << c.shape.str();
    }
  }
}

}  // namespace

namespace {

double max_rel_error(const tg::Tensor& got, const tg::Tensor& want) {
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  double e = 0;
  for (size_t i = 0; i < w.size(); ++i) e = std::max(e, std::fabs(g[i] - w[i]) / (1 + std::fabs(w[i])));
  return e;
}

TEST(Gpu, ProductsMatchTheCpuInEveryPrecision) {
  TG_NEED_GPU();
  tg::manual_seed(4);
  struct Case {
    tg::Shape a, b;
    bool ta, tb;
  };
  const std::vector<Case> cases = {{{64, 48}, {48, 80}, false, false}, {{48, 64}, {80, 48}, true, true},
                                   {{2, 3, 5, 4}, {4, 6}, false, false},  // one B for the whole batch
                                   {{2, 1, 5, 4}, {3, 4, 6}, false, false},  // broadcast: one call a product
                                   {{7}, {7, 3}, false, false}, {{0, 4}, {4, 2}, false, false}, {{3, 0}, {0, 2}, false, false}};
  for (const Case& c : cases) {
    for (tg::DType d : {tg::kFloat32, tg::kFloat64, tg::kBFloat16}) {
      tg::Tensor a = tg::randn(c.a).to(d), b = tg::randn(c.b).to(d);
      const tg::Tensor want = tg::matmul(a, b, c.ta, c.tb);
      const tg::Tensor got = tg::matmul(a.to(kGpu), b.to(kGpu), c.ta, c.tb);
      EXPECT_TRUE(got.is_cuda());
      ASSERT_EQ(got.shape(), want.shape());
      EXPECT_LE(max_rel_error(got.to(tg::kCPU), want), d == tg::kFloat64 ? 1e-12 : d == tg::kBFloat16 ? 1e-2 : 1e-4)
          << c.a.str() << " x " << c.b.str() << " " << tg::dtype_name(d);
    }
  }
  // Autocast: bfloat16 products with float32 sums and output (against the product of the rounded
  // inputs: products of two bfloat16 values are exact in float32, only the order of the sums differs);
  // TF32 (10-bit mantissas: ~5e-3 relative at K = 65, up to ~9e-3) only when asked.
  tg::Tensor a = tg::randn({33, 65}), b = tg::randn({65, 17});
  const tg::Tensor want = tg::matmul(a, b);
  {
    const tg::Tensor want_bf16 = tg::matmul(a.to(tg::kBFloat16).to(tg::kFloat32), b.to(tg::kBFloat16).to(tg::kFloat32));
    tg::AutocastGuard ac;
    const tg::Tensor got = tg::matmul(a.to(kGpu), b.to(kGpu));
    EXPECT_EQ(got.dtype(), tg::kFloat32);
    EXPECT_LE(max_rel_error(got.to(tg::kCPU), want_bf16), 1e-5);
  }
  tg::cuda::set_allow_tf32(true);
  EXPECT_LE(max_rel_error(tg::matmul(a.to(kGpu), b.to(kGpu)).to(tg::kCPU), want), 2e-2);
  tg::cuda::set_allow_tf32(false);
  const tg::Tensor exact = tg::matmul(a.to(kGpu), b.to(kGpu));
  EXPECT_EQ(exact.to_vector<float>(), tg::matmul(a.to(kGpu), b.to(kGpu)).to_vector<float>());  // the same bits again
  EXPECT_LE(max_rel_error(exact.to(tg::kCPU), want), 1e-5);
}

TEST(Gpu, LinearLayersRunOnTheGpu) {
  TG_NEED_GPU();
  tg::manual_seed(6);
  tg::Tensor x = tg::randn({4, 7, 16}), w = tg::randn({8, 16}), bias = tg::randn({8});
  for (tg::Activation act : {tg::Activation::kIdentity, tg::Activation::kRelu, tg::Activation::kGelu}) {
    const tg::Tensor want = tg::linear(x, w, bias, act);
    const tg::Tensor got = tg::linear(x.to(kGpu), w.to(kGpu), bias.to(kGpu), act);
    EXPECT_LE(max_rel_error(got.to(tg::kCPU), want), 1e-4);
  }
}

}  // namespace

namespace {

TEST(Gpu, AttentionMatchesTheCpuWithEveryMask) {
  TG_NEED_GPU();
  tg::manual_seed(8);
  for (int64_t d : {32, 64, 100, 128, 256}) {
    for (int variant = 0; variant < 4; ++variant) {
      const int64_t B = 2, H = 4, Hkv = variant == 2 ? 2 : 4, T = 37, S = variant == 3 ? 300 : 37;
      tg::Tensor q = tg::randn({B, H, T, d}), k = tg::randn({B, Hkv, S, d}), v = tg::randn({B, Hkv, S, d});
      tg::AttentionOptions o;
      o.causal = variant == 0 || variant == 2;
      if (variant == 1) o.mask = tg::gt(tg::randn({B, 1, 1, S}), 1.0);  // key padding
      if (variant == 3) {
        o.kv_length = 290;  // a preallocated cache, partly filled
        o.causal = true;
        o.causal_offset = 253;
      }
      const tg::Tensor want = tg::flash_attention(q, k, v, o);
      tg::AttentionOptions og = o;
      if (o.mask.defined()) og.mask = o.mask.to(kGpu);
      const tg::Tensor got = tg::flash_attention(q.to(kGpu), k.to(kGpu), v.to(kGpu), og);
      EXPECT_LE(max_rel_error(got.to(tg::kCPU), want), 1e-4) << "d " << d << " variant " << variant;
    }
  }
}

// bfloat16 attention with head size 32, 64 or 128 runs on the tensor-core kernel (one launch, no
// casts) and matches the CPU, which computes it in float32 from the same bfloat16 inputs, within
// bfloat16's tolerance (the kernel rounds the weights to bfloat16 before they meet v): every mask,
// grouped heads, a partly filled cache, one query row (decoding) and rows spanning several blocks.
// The same inputs give the same bits again; so does the gradient, which matches the CPU's too.
// TG_GPU_TEST_SMALL=1 (the compute-sanitizer runs of tests/gpu/check.sh): head size 64 and three
// variants only.
TEST(Gpu, BFloat16AttentionRunsOnTensorCores) {
  TG_NEED_GPU();
  tg::manual_seed(9);
  const char* small_env = std::getenv("TG_GPU_TEST_SMALL");
  const bool small = small_env != nullptr && std::string(small_env) == "1";
  for (int64_t d : {32, 64, 128}) {
    if (small && d != 64) continue;
    for (int variant = 0; variant < 6; ++variant) {
      if (small && variant != 1 && variant != 3 && variant != 5) continue;
      const int64_t B = 2, H = 4, Hkv = variant == 2 ? 2 : 4;
      const int64_t T = variant == 4 ? 1 : variant == 5 ? 300 : 37, S = variant >= 3 ? 300 : 37;
      Tensor q = tg::randn({B, H, T, d}).to(tg::kBFloat16), k = tg::randn({B, Hkv, S, d}).to(tg::kBFloat16),
             v = tg::randn({B, Hkv, S, d}).to(tg::kBFloat16);
      tg::AttentionOptions o;
      o.causal = variant == 0 || variant == 2 || variant == 5;
      if (variant == 1) o.mask = tg::gt(tg::randn({B, 1, 1, S}), 1.0);  // key padding
      if (variant == 3 || variant == 4) {
        o.kv_length = variant == 3 ? 290 : 200;  // a preallocated cache, partly filled
        o.causal = true;
        o.causal_offset = variant == 3 ? 253 : 199;
      }
      const std::string what = fmt::format("d {} variant {}", d, variant);
      const Tensor want = tg::flash_attention(q, k, v, o);
      tg::AttentionOptions og = o;
      if (o.mask.defined()) og.mask = o.mask.to(kGpu);
      const Tensor qg = q.to(kGpu), kg = k.to(kGpu), vg = v.to(kGpu);
      const uint64_t before = tg::cuda::kernel_launches();
      const Tensor got = tg::flash_attention(qg, kg, vg, og);
      EXPECT_EQ(tg::cuda::kernel_launches() - before, 1u) << what << ": the tensor-core kernel alone";
      EXPECT_EQ(got.dtype(), tg::kBFloat16) << what;
      EXPECT_LE(max_rel_error(got.to(tg::kCPU), want), 2e-2) << what;
      EXPECT_EQ(got.to_vector<float>(), tg::flash_attention(qg, kg, vg, og).to_vector<float>()) << what << ": run to run";
      {  // the gradient: the tensor-core backward (three launches) from the forward's log-sum-exp
        const Tensor w = tg::randn(want.shape()).to(tg::kBFloat16);
        std::vector<Tensor> cpu = {q.clone().requires_grad_(), k.clone().requires_grad_(), v.clone().requires_grad_()};
        std::vector<Tensor> gpu = {qg.clone().requires_grad_(), kg.clone().requires_grad_(), vg.clone().requires_grad_()};
        // (sums in float32: sum takes float32 and float64)
        tg::sum(tg::mul(tg::flash_attention(cpu[0], cpu[1], cpu[2], o), w).to(tg::kFloat32)).backward();
        const Tensor loss = tg::sum(tg::mul(tg::flash_attention(gpu[0], gpu[1], gpu[2], og), w.to(kGpu)).to(tg::kFloat32));
        loss.backward();
        std::vector<std::vector<float>> first;
        for (const Tensor& t : gpu) first.push_back(t.grad().to_vector<float>());
        for (Tensor& t : gpu) t.zero_grad();
        tg::sum(tg::mul(tg::flash_attention(gpu[0], gpu[1], gpu[2], og), w.to(kGpu)).to(tg::kFloat32)).backward();
        for (int i = 0; i < 3; ++i) EXPECT_EQ(gpu[i].grad().to_vector<float>(), first[i]) << what << ": gradient " << i << " run to run";
        for (int i = 0; i < 3; ++i) {
          EXPECT_LE(max_rel_error(gpu[i].grad().to(tg::kCPU), cpu[i].grad()), 5e-2) << what << " gradient " << i;
        }
      }
    }
  }
}

// AttentionLayout::kTokensFirst on tensor cores reads q, k, v [B, T, H, d] and writes [B, T, H, d]
// in place (one launch, no permute copies) and gives the heads-first kernel's bits, permuted:
// output and the three gradients, with grouped heads, a padding mask, dropout and rows past T.
TEST(Gpu, TokensFirstAttentionIsReadInPlaceOnTensorCores) {
  TG_NEED_GPU();
  tg::manual_seed(12);
  const tg::Shape swap{0, 2, 1, 3};
  for (int64_t d : {32, 64, 128}) {
    const int64_t B = 2, H = 4, Hkv = 2, T = 77, S = 77;
    const Tensor q = tg::randn({B, H, T, d}).to(tg::kBFloat16).to(kGpu), k = tg::randn({B, Hkv, S, d}).to(tg::kBFloat16).to(kGpu),
                 v = tg::randn({B, Hkv, S, d}).to(tg::kBFloat16).to(kGpu), w = tg::randn({B, H, T, d}).to(tg::kBFloat16).to(kGpu);
    tg::AttentionOptions o;
    o.causal = d != 64;
    o.mask = d == 64 ? tg::gt(tg::randn({B, 1, 1, S}), 1.0).to(kGpu) : Tensor();
    o.dropout = d == 128 ? 0.1 : 0.0;
    auto run = [&](bool tokens_first, std::vector<std::vector<float>>* grads) {
      tg::AttentionOptions oo = o;
      if (tokens_first) oo.layout = tg::AttentionLayout::kTokensFirst;
      auto in = [&](const Tensor& x) {
        Tensor t = (tokens_first ? tg::permute(x, swap) : x).clone();
        t.requires_grad_();
        return t;
      };
      std::vector<Tensor> ins = {in(q), in(k), in(v)};
      tg::manual_seed(13);
      const uint64_t before = tg::cuda::kernel_launches();
      Tensor out = tg::flash_attention(ins[0], ins[1], ins[2], oo);
      EXPECT_EQ(tg::cuda::kernel_launches() - before, 1u) << "d " << d << (tokens_first ? " tokens first" : "");
      if (tokens_first) out = tg::permute(out, swap);
      tg::sum(tg::mul(out, w).to(tg::kFloat32)).backward();
      for (const Tensor& t : ins) grads->push_back((tokens_first ? tg::permute(t.grad(), swap) : t.grad()).to_vector<float>());
      return out.to_vector<float>();
    };
    std::vector<std::vector<float>> g_tokens, g_heads;
    EXPECT_EQ(run(true, &g_tokens), run(false, &g_heads)) << "d " << d << ": the output";
    for (int i = 0; i < 3; ++i) EXPECT_EQ(g_tokens[i], g_heads[i]) << "d " << d << ": gradient " << i;
  }
}

// Under autocast, attention being trained runs on tensor cores in bfloat16 (as PyTorch's CUDA
// autocast runs scaled_dot_product_attention): exactly the explicit graph of casts around the
// bfloat16 kernel, forward and gradients, bit for bit, with dropout on the weights. Without a
// gradient (inference) autocast leaves attention in float32: one launch of the plain kernel.
TEST(Gpu, AutocastTrainsAttentionOnTensorCores) {
  TG_NEED_GPU();
  tg::manual_seed(10);
  const int64_t B = 2, H = 4, T = 70, d = 64;
  const Tensor q = tg::randn({B, H, T, d}).to(kGpu), k = tg::randn({B, H, T, d}).to(kGpu),
               v = tg::randn({B, H, T, d}).to(kGpu), w = tg::randn({B, H, T, d}).to(kGpu);
  tg::AttentionOptions o;
  o.causal = true;
  o.dropout = 0.1;
  auto run = [&](bool autocast, std::vector<std::vector<float>>* grads) {
    std::vector<Tensor> in = {q.clone().requires_grad_(), k.clone().requires_grad_(), v.clone().requires_grad_()};
    tg::manual_seed(11);  // the same dropout key
    Tensor out;
    if (autocast) {
      tg::AutocastGuard guard(tg::kBFloat16);
      out = tg::flash_attention(in[0], in[1], in[2], o);
    } else {
      out = tg::to(tg::flash_attention(tg::to(in[0], tg::kBFloat16), tg::to(in[1], tg::kBFloat16),
                                       tg::to(in[2], tg::kBFloat16), o), tg::kFloat32);
    }
    EXPECT_EQ(out.dtype(), tg::kFloat32);
    tg::sum(tg::mul(out, w)).backward();
    for (const Tensor& t : in) grads->push_back(t.grad().to_vector<float>());
    return out.to_vector<float>();
  };
  std::vector<std::vector<float>> g_auto, g_explicit;
  EXPECT_EQ(run(true, &g_auto), run(false, &g_explicit)) << "the output";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(g_auto[i], g_explicit[i]) << "gradient " << i;
  tg::AttentionOptions plain;
  plain.causal = true;
  const Tensor want = tg::flash_attention(q, k, v, plain);
  tg::AutocastGuard guard(tg::kBFloat16);
  const uint64_t before = tg::cuda::kernel_launches();
  const Tensor got = tg::flash_attention(q, k, v, plain);  // no gradient: float32, the plain kernel
  EXPECT_EQ(tg::cuda::kernel_launches() - before, 1u);
  EXPECT_EQ(got.to_vector<float>(), want.to_vector<float>());
}

}  // namespace

namespace {

TEST(Gpu, Word2VecsLossStaysOnTheCpuAndSaysSo) {
  TG_NEED_GPU();
  const tg::Tensor in = tg::randn({2, 4}).to(kGpu), out = tg::randn({2, 3, 4}).to(kGpu);
  try {
    (void)tg::negative_sampling_loss(in, out);
    FAIL() << "no error";
  } catch (const tg::Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("negative_sampling_loss: runs on the CPU only", 0), 0u) << e.what();
  }
}

}  // namespace

namespace {

// Dropout on the GPU draws the CPU's mask bit for bit, forward and backward: from the global
// generator's key, and keyed by sample (one key a row, uploaded once a call).
TEST(Gpu, DropoutMasksAreTheCpusBitForBit) {
  TG_NEED_GPU();
  for (tg::DType dtype : {tg::kFloat32, tg::kFloat64}) {
    tg::manual_seed(5);
    Tensor x = tg::randn({6, 7, 300}, dtype);
    Tensor w = tg::randn({6, 7, 300}, dtype);
    for (bool by_sample : {false, true}) {
      auto run = [&](const Device& dev) {
        Tensor xd = x.to(dev).detach().requires_grad_(), wd = w.to(dev);  // (on the CPU to() is x itself)
        tg::manual_seed(77);
        std::unique_ptr<tg::SampleKeyScope> scope;
        if (by_sample) scope = std::make_unique<tg::SampleKeyScope>(99, std::vector<int64_t>{3, 1, 4, 1, 5, 9});
        Tensor y = tg::dropout(xd, 0.3, true);
        tg::sum(tg::mul(y, wd)).backward();
        return std::make_pair(y.to(tg::kCPU), xd.grad().to(tg::kCPU));
      };
      const auto [y_cpu, g_cpu] = run(tg::kCPU);
      const auto [y_gpu, g_gpu] = run(kGpu);
      EXPECT_EQ(bytes_of(y_gpu), bytes_of(y_cpu)) << tg::dtype_name(dtype) << (by_sample ? " by sample" : "");
      EXPECT_EQ(bytes_of(g_gpu), bytes_of(g_cpu)) << tg::dtype_name(dtype) << (by_sample ? " by sample" : "");
    }
  }
}

// Cross-entropy and NLL on the GPU against the CPU: ignored targets, label smoothing, class
// weights, every reduction, and the gradient of the logits; a target out of range is reported
// naming the op at the next synchronization, never read.
TEST(Gpu, ClassificationLossesMatchTheCpu) {
  TG_NEED_GPU();
  tg::manual_seed(8);
  const Tensor logits = tg::randn({3, 5, 11}, tg::kFloat64);
  Tensor target = tg::randint(0, 11, {3, 5});
  target = tg::masked_fill(target.to(tg::kFloat64), tg::lt(tg::rand({3, 5}), 0.2), -100.0).to(tg::kInt64);  // ignored
  const Tensor weight = tg::rand({11}, tg::kFloat64);
  for (tg::Reduction r : {tg::Reduction::kMean, tg::Reduction::kSum, tg::Reduction::kNone})
    for (double eps : {0.0, 0.1})
      for (bool weighted : {false, true}) {
        tg::CrossEntropyOptions o;
        o.reduction = r;
        o.label_smoothing = eps;
        auto run = [&](const Device& dev) {
          Tensor x = logits.to(dev).detach().requires_grad_();
          tg::CrossEntropyOptions od = o;
          if (weighted) od.weight = weight.to(dev);
          Tensor loss = tg::cross_entropy(x, target.to(dev), od);
          tg::sum(loss).backward();
          Tensor nll = tg::nll_loss(tg::log_softmax(x.detach(), -1), target.to(dev), -100, r, od.weight);
          return std::vector<Tensor>{loss.to(tg::kCPU), x.grad().to(tg::kCPU), nll.to(tg::kCPU)};
        };
        const auto want = run(tg::kCPU), got = run(kGpu);
        for (size_t i = 0; i < want.size(); ++i) {
          const auto a = want[i].to_vector<double>(), b = got[i].to_vector<double>();
          ASSERT_EQ(a.size(), b.size());
          for (size_t j = 0; j < a.size(); ++j)
            EXPECT_NEAR(a[j], b[j], 1e-12 * (1 + std::fabs(a[j]))) << "output " << i << " element " << j << " eps " << eps
                                                                   << " weighted " << weighted;
        }
      }
  Tensor bad = tg::tensor({1.0, 11.0, 2.0}, tg::kInt64).to(kGpu);
  Tensor loss = tg::cross_entropy(tg::randn({3, 11}).to(kGpu), bad);
  try {
    tg::cuda::synchronize();
    FAIL() << "no error";
  } catch (const tg::Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("cross_entropy: index 11 is out of range for a dimension of size 11", 0), 0u) << m;
  }
  tg::cuda::synchronize();
}

}  // namespace

namespace {

// gradcheck takes inputs on the GPU: the analytical Jacobian from the GPU's backward, the
// numerical one from perturbing the device tensors, for the ops whose backward has its own GPU
// code (softmax, the losses, index_add/scatter_add, attention) and a composed one (layer norm).
TEST(Gpu, GradcheckRunsOnDeviceInputs) {
  TG_NEED_GPU();
  tg::manual_seed(21);
  auto leaf = [](const tg::Shape& s) { return tg::randn(s, tg::kFloat64).to(kGpu).requires_grad_(); };
  const Tensor ids = tg::tensor({2.0, 0.0, 2.0, 1.0}, tg::kInt64).to(kGpu);
  const Tensor target = tg::tensor({1.0, -100.0, 3.0}, tg::kInt64).to(kGpu);
  const Tensor gather_ids = tg::tensor({{0.0, 2.0, 2.0}, {1.0, 1.0, 0.0}}, tg::kInt64).to(kGpu);
  struct Check {
    const char* name;
    tg::GradcheckFn fn;
    std::vector<Tensor> in;
  };
  const std::vector<Check> checks = {
      {"log_softmax", [](const auto& x) { return tg::log_softmax(x[0], -1); }, {leaf({3, 5})}},
      {"softmax (inner axis)", [](const auto& x) { return tg::softmax(x[0], 0); }, {leaf({3, 4})}},
      {"cross_entropy", [&](const auto& x) { return tg::cross_entropy(x[0], target, {.label_smoothing = 0.1}); }, {leaf({3, 4})}},
      {"layer_norm", [](const auto& x) { return tg::layer_norm(x[0], 1, x[1], x[2]); }, {leaf({3, 4}), leaf({4}), leaf({4})}},
      {"rms_norm", [](const auto& x) { return tg::rms_norm(x[0], x[1]); }, {leaf({3, 4}), leaf({4})}},
      {"embedding", [&](const auto& x) { return tg::embedding(x[0], ids); }, {leaf({3, 2})}},
      {"gather", [&](const auto& x) { return tg::gather(x[0], 1, gather_ids); }, {leaf({2, 3})}},
      {"bias_act", [](const auto& x) { return tg::bias_act(x[0], x[1], tg::Activation::kGelu); }, {leaf({3, 4}), leaf({4})}},
      {"flash_attention", [](const auto& x) { return tg::flash_attention(x[0], x[1], x[2], {.causal = true}); },
       {leaf({2, 4, 3, 4}), leaf({2, 2, 5, 4}), leaf({2, 2, 5, 3})}},
  };
  for (const Check& c : checks) {
    const tg::GradcheckResult r = tg::gradcheck(c.fn, c.in);
    EXPECT_TRUE(r.ok) << c.name << ": " << r.report;
  }
}

}  // namespace

namespace {

// SGD, Adam and AdamW on the GPU follow the CPU's trajectory (float64 1e-12, float32 1e-5 over
// 5 steps), with 300 parameters (three launch tables), state buffers on the device; one launch
// per table; the gradient norm and clipping agree too, without a host read.
TEST(Gpu, OptimizersFollowTheCpusTrajectory) {
  TG_NEED_GPU();
  for (tg::DType dtype : {tg::kFloat64, tg::kFloat32}) {
    for (int kind = 0; kind < 4; ++kind) {
      auto run = [&](const Device& dev) {
        tg::manual_seed(31);
        tg::NamedTensors params;
        for (int i = 0; i < 300; ++i)
          params.push_back({"p" + std::to_string(i), tg::randn({i % 7 + 1, 3}, dtype).to(dev).requires_grad_()});
        std::unique_ptr<tg::Optimizer> opt;
        if (kind == 0) opt = std::make_unique<tg::SGD>(params, tg::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
        if (kind == 1) opt = std::make_unique<tg::SGD>(params, tg::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
        if (kind == 2) opt = std::make_unique<tg::Adam>(params, tg::AdamOptions{.lr = 0.01, .weight_decay = 0.1});
        if (kind == 3) opt = std::make_unique<tg::AdamW>(params, tg::AdamOptions{.lr = 0.01, .weight_decay = 0.1});
        std::vector<Tensor> ps;
        for (auto& [n, p] : params) ps.push_back(p);
        double norm = 0;
        for (int step = 0; step < 5; ++step) {
          opt->zero_grad();
          Tensor loss = tg::zeros({}, dtype, dev);
          for (const Tensor& p : ps) loss = tg::add(loss, tg::sum(tg::mul(tg::sin(p), p)));
          loss.backward();
          norm = tg::clip_grad_norm_(ps, 2.0).to(tg::kCPU).item();
          const uint64_t before = dev.is_cuda() ? tg::cuda::kernel_launches() : 0;
          opt->step();
          if (dev.is_cuda() && step > 0) {  // (step 0 also fills the new state buffers)
            EXPECT_EQ(tg::cuda::kernel_launches() - before, 3u) << "one launch per table of 128";
          }
        }
        std::vector<double> out{norm};
        for (const Tensor& p : ps)
          for (double v : p.to(tg::kCPU).to_vector<double>()) out.push_back(v);
        return out;
      };
      const std::vector<double> want = run(tg::kCPU), got = run(kGpu);
      ASSERT_EQ(want.size(), got.size());
      const double tol = dtype == tg::kFloat64 ? 1e-12 : 1e-5;
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "optimizer " << kind << " value " << i << " "
                                                                     << tg::dtype_name(dtype);
    }
  }
}

// The NaN stop without a per-step sync: a non-finite gradient norm raises the device flag for its
// step, the optimizer's launch then skips its update, and the flag is read afterwards.
// Clipping rewrites the gradients in place on the device: copies derived from them (autocast's
// bfloat16 copy of a gradient, kept by its storage's version) must see them change.
TEST(Gpu, ClippingMarksTheGradientsItRewrites) {
  TG_NEED_GPU();
  Tensor w = tg::randn({4, 8}).to(kGpu).requires_grad_();
  tg::sum(tg::mul(w, w)).backward();
  const uint64_t before = w.grad().impl().storage->version();
  const std::vector<float> g0 = w.grad().to(tg::kCPU).to_vector<float>();
  (void)tg::clip_grad_norm_({w}, 1e-3);
  const std::vector<float> g1 = w.grad().to(tg::kCPU).to_vector<float>();
  EXPECT_NE(g0, g1);  // (rewritten: the norm was far above 1e-3)
  EXPECT_GT(w.grad().impl().storage->version(), before);
}

TEST(Gpu, ANonFiniteNormStopsUpdatesWithoutAHostRead) {
  TG_NEED_GPU();
  Tensor w = tg::ones({4}).to(kGpu).requires_grad_();
  tg::AdamW opt({{"w", w}});
  tg::NonFiniteFlag flag(kGpu);
  opt.set_skip_flag(&flag);
  for (int step = 1; step <= 4; ++step) {
    opt.zero_grad();
    Tensor loss = tg::sum(tg::mul(w, step == 3 ? std::nan("") : 1.0));
    flag.check(loss, step);
    loss.backward();
    tg::clip_grad_norm_({w}, 1.0, &flag, step);
    opt.step();
  }
  EXPECT_TRUE(flag.raised());
  EXPECT_EQ(flag.first_step(), 3);
  // Two updates happened (steps 1 and 2), then none.
  tg::Tensor cpu_w = tg::ones({4}).requires_grad_();
  tg::AdamW ref({{"w", cpu_w}});
  for (int step = 1; step <= 2; ++step) {
    ref.zero_grad();
    tg::sum(cpu_w).backward();
    tg::clip_grad_norm({cpu_w}, 1.0);
    ref.step();
  }
  const auto a = w.to(tg::kCPU).to_vector<float>(), b = cpu_w.to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6);
}

}  // namespace

namespace {

// host_waits() counts the host's waits for a GPU; inside ForbidHostWaits a wait throws one line
// naming the op that asked for it, and queued work is not waited for.
TEST(Gpu, HostWaitsAreCountedAndCanBeForbidden) {
  TG_NEED_GPU();
  Tensor x = tg::randn({16}).to(kGpu);
  const uint64_t before = tg::cuda::host_waits();
  Tensor y = tg::sum(tg::mul(x, x));  // queued: no wait
  EXPECT_EQ(tg::cuda::host_waits(), before);
  (void)y.item();
  EXPECT_EQ(tg::cuda::host_waits(), before + 1);
  {
    tg::cuda::ForbidHostWaits forbid;
    Tensor z = tg::add(y, 1.0);  // still fine: nothing waits
    try {
      (void)z.item();
      FAIL() << "no error";
    } catch (const tg::Error& e) {
      EXPECT_NE(std::string(e.what()).find("host waits are forbidden"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW((void)y.item());
}

}  // namespace

namespace {

// index_add over many positions sorts them by row on the GPU (a stable radix sort) and adds each
// row's run in position order: the CPU's sums, bit for bit — an embedding's gradient with repeated
// ids and padding, and index_add along an inner axis.
TEST(Gpu, SortedIndexAddGivesTheCpusBits) {
  TG_NEED_GPU();
  tg::manual_seed(17);
  for (tg::DType dtype : {tg::kFloat32, tg::kFloat64}) {
    const Tensor ids = tg::randint(0, 50, {8, 125});  // 1,000 tokens into 50 rows: long runs
    const Tensor g = tg::randn({8, 125, 24}, dtype);
    auto embed_grad = [&](const Device& dev) {
      Tensor table = tg::randn({50, 24}, dtype).to(dev).requires_grad_();
      tg::embedding(table, ids.to(dev), /*padding_idx=*/3).backward(g.to(dev));
      return table.grad().to(tg::kCPU);
    };
    EXPECT_EQ(bytes_of(embed_grad(kGpu)), bytes_of(embed_grad(tg::kCPU))) << tg::dtype_name(dtype);
    const Tensor flat = tg::randint(0, 7, {300});
    const Tensor src = tg::randn({3, 300, 5}, dtype);
    const Tensor want = tg::index_add({3, 7, 5}, 1, flat, src);
    const Tensor got = tg::index_add({3, 7, 5}, 1, flat.to(kGpu), src.to(kGpu)).to(tg::kCPU);
    EXPECT_EQ(bytes_of(got), bytes_of(want)) << tg::dtype_name(dtype);
  }
}

}  // namespace

namespace {

// Under autocast a linear layer on the GPU keeps its input only as the bfloat16 copy it multiplied,
// makes the gradient's copy once for dX and dW, and takes ReLU's derivative and the bias's sums in
// one pass: the same gradients as the CPU's autocast (products of the same bfloat16 operands, float32
// sums in another order). Differentiating that backward again is one line.
TEST(Gpu, AutocastLinearTrainsFromItsBFloat16Input) {
  TG_NEED_GPU();
  tg::manual_seed(24);
  for (tg::Activation act : {tg::Activation::kIdentity, tg::Activation::kRelu}) {
    const Tensor x = tg::randn({64, 48}), w = tg::randn({32, 48}), b = tg::randn({32}), r = tg::randn({64, 32});
    auto run = [&](Device dev, std::vector<Tensor>* grads) {
      std::vector<Tensor> in = {x.to(dev).detach(), w.to(dev).detach(), b.to(dev).detach()};  // (to(cpu) is x itself)
      for (Tensor& t : in) t.requires_grad_();
      Tensor y;
      {
        tg::AutocastGuard autocast(tg::kBFloat16);
        y = tg::linear(in[0], in[1], in[2], act);
      }
      tg::sum(tg::mul(y, r.to(dev))).backward();
      for (const Tensor& t : in) grads->push_back(t.grad().to(tg::kCPU));
      return y.to(tg::kCPU);
    };
    std::vector<Tensor> cpu, gpu;
    EXPECT_LE(max_rel_error(run(kGpu, &gpu), run(tg::kCPU, &cpu)), 1e-4);
    for (int i = 0; i < 3; ++i) EXPECT_LE(max_rel_error(gpu[i], cpu[i]), 1e-4) << "gradient " << i;
  }
  Tensor x = tg::randn({8, 16}).to(kGpu), w = tg::randn({4, 16}).to(kGpu), b = tg::randn({4}).to(kGpu);
  x.requires_grad_();
  Tensor y;
  {
    tg::AutocastGuard autocast(tg::kBFloat16);
    y = tg::linear(x, w, b);
  }
  try {
    (void)tg::grad({tg::sum(y)}, {x}, {}, {.create_graph = true});
    FAIL() << "no error";
  } catch (const tg::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be differentiated again"), std::string::npos) << e.what();
  }
}

// Under autocast a GPU weight's bfloat16 copy is made once and kept: a second product launches no
// conversion for it; the optimizer rewrites the copy in its update pass, so the next product sees
// the updated weight exactly as a fresh conversion would.
TEST(Gpu, AutocastKeepsEachWeightsBFloat16CopyAndTheOptimizerRefreshesIt) {
  TG_NEED_GPU();
  tg::manual_seed(23);
  Tensor w = tg::randn({64, 32}).to(kGpu).requires_grad_();
  const Tensor x = tg::randn({8, 32}).to(kGpu);
  tg::AdamW opt({{"w", w}}, {.lr = 0.1});
  for (int step = 0; step < 3; ++step) {
    tg::AutocastGuard autocast(tg::kBFloat16);
    const uint64_t k0 = tg::cuda::kernel_launches();
    Tensor y1 = tg::matmul(x, w, false, true);
    const uint64_t k1 = tg::cuda::kernel_launches();
    Tensor y2 = tg::matmul(x, w, false, true);
    const uint64_t k2 = tg::cuda::kernel_launches();
    // Step 0: the first product makes the weight's copy and x's (two conversions more); later steps
    // find the weight's copy the optimizer refreshed and x's kept one: neither product converts.
    if (step == 0) EXPECT_EQ(k1 - k0, k2 - k1 + 2) << "step 0: the second product reuses the weight's and x's copies";
    else EXPECT_EQ(k1 - k0, k2 - k1) << "step " << step << ": the optimizer refreshed the copy, no conversion";
    const Tensor fresh = tg::matmul(x, w.detach().clone(), false, true);  // a new storage: converted afresh
    EXPECT_EQ(bytes_of(y2.to(tg::kCPU)), bytes_of(fresh.to(tg::kCPU))) << "step " << step;
    opt.zero_grad();
    tg::sum(y1).backward();
    opt.step();
  }
}

}  // namespace

namespace {

// KernelProfile times every op on the GPU: each op launched appears with its launches, the times
// are positive, and the table comes back largest first.
TEST(Gpu, KernelProfileTimesEveryOp) {
  TG_NEED_GPU();
  const Tensor a = tg::randn({512, 512}).to(kGpu), b = tg::randn({512, 512}).to(kGpu);
  tg::cuda::synchronize();
  std::vector<tg::cuda::OpTime> table;
  {
    tg::cuda::KernelProfile profile;
    for (int i = 0; i < 3; ++i) (void)tg::softmax(tg::add(tg::matmul(a, b), 1.0), -1);
    table = profile.table();
    EXPECT_EQ(profile.table().size(), table.size());  // a second call: the same table
  }
  std::map<std::string, tg::cuda::OpTime> by_op;
  for (const auto& row : table) by_op[row.op] = row;
  for (const char* op : {"matmul", "add", "softmax"}) {
    ASSERT_TRUE(by_op.count(op)) << op;
    EXPECT_EQ(by_op[op].launches, 3u) << op;
    EXPECT_GT(by_op[op].ms, 0.0) << op;
  }
  for (size_t i = 1; i < table.size(); ++i) EXPECT_GE(table[i - 1].ms, table[i].ms);
  tg::cuda::KernelProfile again;  // one at a time, and the last one has ended
  (void)again.table();
}

}  // namespace

namespace {

// Dropout on the attention weights draws the CPU's mask on the GPU (never stored), on the plain
// kernel (float32) and the tensor cores (bfloat16), keyed by the generator or by sample: outputs
// and gradients match the CPU's from the same seed.
TEST(Gpu, AttentionDropoutDrawsTheCpusMask) {
  TG_NEED_GPU();
  for (tg::DType dt : {tg::kFloat32, tg::kBFloat16}) {
    for (bool by_sample : {false, true}) {
      const int64_t d = dt == tg::kFloat32 ? 40 : 64;
      tg::manual_seed(12);
      const Tensor q = tg::randn({2, 4, 70, d}).to(dt), k = tg::randn({2, 2, 90, d}).to(dt), v = tg::randn({2, 2, 90, d}).to(dt),
                   w = tg::randn({2, 4, 70, d}).to(dt);
      const tg::AttentionOptions o{.causal = true, .causal_offset = 20, .dropout = 0.25};
      auto run = [&](const tg::Device& dev) {
        std::vector<Tensor> in = {q.to(dev).detach().requires_grad_(), k.to(dev).detach().requires_grad_(),
                                  v.to(dev).detach().requires_grad_()};
        tg::manual_seed(31);
        std::unique_ptr<tg::SampleKeyScope> scope;
        if (by_sample) scope = std::make_unique<tg::SampleKeyScope>(5, std::vector<int64_t>{3, 8});
        const Tensor out = tg::flash_attention(in[0], in[1], in[2], o);
        tg::sum(tg::mul(out, w.to(dev)).to(tg::kFloat32)).backward();
        return std::vector<Tensor>{out.detach().to(tg::kCPU), in[0].grad().to(tg::kCPU), in[1].grad().to(tg::kCPU),
                                   in[2].grad().to(tg::kCPU)};
      };
      const std::vector<Tensor> cpu = run(tg::kCPU), gpu = run(kGpu);
      const double tol = dt == tg::kFloat32 ? 1e-4 : 5e-2;
      for (int i = 0; i < 4; ++i) {
        EXPECT_LE(max_rel_error(gpu[i], cpu[i]), tol) << tg::dtype_name(dt) << (by_sample ? " by sample" : "") << " tensor " << i;
      }
    }
  }
}

// One input feeding three linear layers and a product (Q, K, V and more): on the GPU the later
// products add dX into the gathered sum with beta = 1, and a second backward adds each weight's
// gradient into its .grad() in place (the same device memory); all as on the CPU, in float32 and
// under autocast.
TEST(Gpu, ProductsAddTheirGradientsIntoTheGatheredSum) {
  TG_NEED_GPU();
  tg::manual_seed(41);
  const Tensor x = tg::randn({4, 16, 48}), wq = tg::randn({32, 48}), bq = tg::randn({32}), wk = tg::randn({32, 48}),
               wv = tg::randn({40, 48}), bv = tg::randn({40}), m = tg::randn({48, 24}), c = tg::randn({4, 16, 32});
  for (bool autocast : {false, true}) {
    auto run = [&](const Device& dev) {
      std::vector<Tensor> p = {x.to(dev).detach(), wq.to(dev).detach(), bq.to(dev).detach(), wk.to(dev).detach(),
                               wv.to(dev).detach(), bv.to(dev).detach()};
      for (Tensor& t : p) t.requires_grad_();
      const Tensor md = m.to(dev), cd = c.to(dev);
      auto step = [&] {
        std::optional<tg::AutocastGuard> guard;
        if (autocast) guard.emplace(tg::kBFloat16);
        const Tensor h = p[0] * 1.0;
        const Tensor loss = tg::sum(tg::linear(h, p[1], p[2]) * 0.5) + tg::sum(tg::linear(h, p[3]) * cd) +
                            tg::sum(tg::linear(h, p[4], p[5], tg::Activation::kRelu)) + tg::sum(tg::matmul(h, md));
        guard.reset();
        loss.backward();
      };
      step();
      std::vector<Tensor> out;
      for (const Tensor& t : p) out.push_back(t.grad().to(tg::kCPU).clone());  // (a copy: holding .grad() itself keeps it from being added into)
      const void* before = dev.is_cuda() ? static_cast<const void*>(p[1].grad().cuda_data<float>()) : p[1].grad().raw_data();
      step();
      const void* after = dev.is_cuda() ? static_cast<const void*>(p[1].grad().cuda_data<float>()) : p[1].grad().raw_data();
      EXPECT_EQ(after, before) << dev.str() << (autocast ? " autocast" : "");
      for (const Tensor& t : p) out.push_back(t.grad().to(tg::kCPU).clone());
      return out;
    };
    const std::vector<Tensor> cpu = run(tg::kCPU), gpu = run(kGpu);
    const double tol = autocast ? 1e-3 : 1e-4;
    for (size_t i = 0; i < cpu.size(); ++i)
      EXPECT_LE(max_rel_error(gpu[i], cpu[i]), tol) << (autocast ? "autocast " : "") << "gradient " << i % 6 << " after step " << 1 + i / 6;
  }
}

// Under autocast a GPU's attention being trained stays in bfloat16 between its projections: Q, K
// and V come out of their products in bfloat16, the tensor cores read them as they are and W_O
// takes the heads as they are — no conversion but the input's one bfloat16 copy (shared by Q, K and
// V) — and the output and every gradient are the CPU's float32 module's within bfloat16's tolerance.
TEST(Gpu, AutocastAttentionStaysInBFloat16BetweenItsProjections) {
  TG_NEED_GPU();
  for (bool causal : {false, true}) {
    tg::manual_seed(8);
    tg::MultiHeadAttention cpu(256, 4);  // head size 64
    {
      tg::NoGradGuard ng;  // biases away from zero (they start at zero), the same on both sides
      for (auto& [name, p] : cpu.named_parameters())
        if (name.ends_with("bias")) p.detach().copy_(tg::randn(p.shape()));
    }
    tg::MultiHeadAttention gpu(256, 4);
    gpu.load_state_dict(cpu.state_dict());
    gpu.to(kGpu);
    tg::manual_seed(9);
    const Tensor x = tg::randn({2, 40, 256}), r = tg::randn({2, 40, 256});
    const tg::AttentionMask m{.causal = causal};
    Tensor xc = x.clone().requires_grad_();
    const Tensor want = cpu.forward(xc, xc, m);
    tg::sum(tg::mul(want, r)).backward();
    Tensor xg = x.to(kGpu).detach().requires_grad_();
    Tensor got;
    uint64_t conversions = 0;
    bool attended = false;
    {
      tg::AutocastGuard autocast(tg::kBFloat16);
      const Tensor warm = tg::randn({2, 40, 256}).to(kGpu).requires_grad_();
      (void)gpu.forward(warm, warm, m);  // (the weights' bfloat16 copies are made here, and kept)
      tg::cuda::synchronize();
      tg::cuda::KernelProfile profile;
      got = gpu.forward(xg, xg, m);
      for (const auto& row : profile.table()) {
        if (row.op == "to") conversions += row.launches;
        if (row.op == "flash_attention") attended = true;
      }
    }
    EXPECT_TRUE(attended) << causal;
    EXPECT_EQ(conversions, 1u) << causal;
    ASSERT_EQ(got.dtype(), tg::kFloat32);
    tg::sum(tg::mul(got, r.to(kGpu))).backward();
    EXPECT_LE(max_rel_error(got.to(tg::kCPU), want), 5e-2) << causal;
    EXPECT_LE(max_rel_error(xg.grad().to(tg::kCPU), xc.grad()), 5e-2) << causal;
    // The parameters' gradients, each error relative to the largest gradient of its projection (the
    // weight's and bias's together, at least 1): bfloat16 operands make errors that grow with the
    // gradient (element by element, |err| / (1 + |want|) reaches 0.19 on W_O's, and 0.13 for the
    // CPU's own autocast). K's bias has no gradient in exact arithmetic (the softmax ignores a
    // constant a row); it gets the rounding of delta = rowsum(dO o O) from the bfloat16 output, as
    // FlashAttention-2's does.
    const auto pc = cpu.named_parameters(), pg = gpu.named_parameters();
    ASSERT_EQ(pc.size(), pg.size());
    std::map<std::string, double> scale;
    for (const auto& [name, p] : pc) {
      const std::string layer = name.substr(0, name.find('.'));
      for (double w : p.grad().to_vector<double>()) scale[layer] = std::max({scale[layer], 1.0, std::fabs(w)});
    }
    for (size_t i = 0; i < pc.size(); ++i) {
      const std::vector<double> g = pg[i].second.grad().to(tg::kCPU).to_vector<double>(),
                                w = pc[i].second.grad().to_vector<double>();
      double e = 0;
      for (size_t j = 0; j < w.size(); ++j) e = std::max(e, std::fabs(g[j] - w[j]));
      EXPECT_LE(e / scale[pc[i].first.substr(0, pc[i].first.find('.'))], 2e-2) << pc[i].first << " " << causal;
    }
    // An optimizer step rewrites the weights' and biases' bfloat16 copies: the next output follows.
    tg::AdamW og(gpu.named_parameters(), {.lr = 0.01});
    og.step();
    tg::MultiHeadAttention fresh(256, 4);  // the updated weights, converted afresh
    fresh.load_state_dict(gpu.state_dict());
    fresh.to(kGpu);
    Tensor after_gpu, after_fresh;
    {
      tg::AutocastGuard autocast(tg::kBFloat16);
      after_gpu = gpu.forward(xg, xg, m);
      after_fresh = fresh.forward(xg, xg, m);
    }
    EXPECT_EQ(bytes_of(after_gpu.to(tg::kCPU)), bytes_of(after_fresh.to(tg::kCPU))) << "after a step " << causal;
    EXPECT_NE(bytes_of(after_gpu.to(tg::kCPU)), bytes_of(got.to(tg::kCPU))) << "the step changed the output " << causal;
  }
}

// Under autocast a GPU's feed-forward block being trained keeps its hidden layer in bfloat16: out of
// the first product (ReLU in the epilogue) through dropout (the CPU's mask) into the second — no
// conversion but the input's bfloat16 copy — with the CPU's float32 output and gradients within
// bfloat16's tolerance.
TEST(Gpu, AutocastFeedForwardKeepsItsHiddenLayerInBFloat16) {
  TG_NEED_GPU();
  for (tg::Activation act : {tg::Activation::kRelu}) {
    tg::manual_seed(21);
    tg::FeedForward cpu(256, 1024, act, 0.1);
    tg::manual_seed(21);
    tg::FeedForward gpu(256, 1024, act, 0.1);
    gpu.to(kGpu);
    cpu.train();
    gpu.train();
    tg::manual_seed(22);
    const Tensor x = tg::randn({2, 40, 256}), r = tg::randn({2, 40, 256});
    Tensor xc = x.clone().requires_grad_();
    Tensor want;
    {  // The CPU takes the same roundings explicitly (its FeedForward keeps float32 under autocast):
       // the hidden layer out of its product in bfloat16, bfloat16 dropout, the mixed second product.
      tg::AutocastGuard autocast(tg::kBFloat16);
      tg::manual_seed(23);
      const Tensor h = tg::detail::linear_bf16_output(xc, cpu.linear1->weight, cpu.linear1->bias, /*relu=*/true);
      want = cpu.linear2->forward(cpu.dropout->forward(h));
    }
    tg::sum(tg::mul(want, r)).backward();
    Tensor xg = x.to(kGpu).detach().requires_grad_();
    Tensor got;
    uint64_t conversions = 0;
    bool dropped = false;
    {
      tg::AutocastGuard autocast(tg::kBFloat16);
      (void)gpu.forward(tg::randn({2, 40, 256}).to(kGpu).requires_grad_());  // (the weights' bfloat16 copies, kept)
      tg::cuda::synchronize();
      tg::manual_seed(23);  // the CPU's dropout mask
      tg::cuda::KernelProfile profile;
      got = gpu.forward(xg);
      for (const auto& row : profile.table()) {
        if (row.op == "to") conversions += row.launches;
        if (row.op == "dropout") dropped = true;
      }
    }
    const int a = static_cast<int>(act);
    EXPECT_TRUE(dropped) << a;
    EXPECT_EQ(conversions, 1u) << a;
    ASSERT_EQ(got.dtype(), tg::kFloat32);
    tg::sum(tg::mul(got, r.to(kGpu))).backward();
    EXPECT_LE(max_rel_error(got.to(tg::kCPU), want), 1e-2) << a;
    EXPECT_LE(max_rel_error(xg.grad().to(tg::kCPU), xc.grad()), 1e-2) << a;
    // The parameters' gradients as a whole (relative L2): a pre-activation within float32 rounding of
    // zero may take the other side of ReLU on the other device and move one entry a lot.
    const auto pc = cpu.named_parameters(), pg = gpu.named_parameters();
    ASSERT_EQ(pc.size(), pg.size());
    for (size_t i = 0; i < pc.size(); ++i) {
      const Tensor want_g = pc[i].second.grad(), diff = tg::sub(pg[i].second.grad().to(tg::kCPU), want_g);
      const double err = std::sqrt(tg::sum(tg::mul(diff, diff)).item()) / std::sqrt(tg::sum(tg::mul(want_g, want_g)).item() + 1e-30);
      EXPECT_LE(err, 1e-2) << pc[i].first << " " << a;
    }
  }
}

// Trained under autocast on a GPU, layer norm and RMS norm write their output's bfloat16 rounding in
// the same pass, and the products that read the output take it: no conversion, the bits of a
// product of the output converted afresh.
TEST(Gpu, AutocastNormsHandTheirOutputsBFloat16CopyToTheProducts) {
  TG_NEED_GPU();
  tg::manual_seed(31);
  const Tensor x = tg::randn({6, 10, 256}).to(kGpu).requires_grad_();
  const Tensor g = tg::randn({256}).to(kGpu).requires_grad_(), b = tg::randn({256}).to(kGpu).requires_grad_();
  const Tensor w = tg::randn({128, 256}).to(kGpu).requires_grad_(), bias = tg::randn({128}).to(kGpu).requires_grad_();
  for (const bool rms : {false, true}) {
    for (const bool inference : {false, true}) {  // (decoding too: no gradients recorded)
      tg::AutocastGuard autocast(tg::kBFloat16);
      std::unique_ptr<tg::NoGradGuard> no_grad;
      if (inference) no_grad = std::make_unique<tg::NoGradGuard>();
      (void)tg::linear(x, w, bias);  // (the weight's own copy, made once)
      const Tensor y = rms ? tg::rms_norm(x, g) : tg::layer_norm(x, 1, g, b);
      const Tensor y2 = y.detach().clone();  // a new storage: its product converts it first
      const uint64_t k0 = tg::cuda::kernel_launches();
      const Tensor z = tg::linear(y, w, bias);
      const uint64_t k1 = tg::cuda::kernel_launches();
      const Tensor fresh = tg::linear(y2, w, bias);
      const uint64_t k2 = tg::cuda::kernel_launches();
      EXPECT_EQ(k2 - k1, k1 - k0 + 1) << "rms " << rms << " inference " << inference
                                      << ": the product of the norm's output converts nothing";
      EXPECT_EQ(bytes_of(z.to(tg::kCPU)), bytes_of(fresh.to(tg::kCPU))) << "rms " << rms << " inference " << inference;
    }
  }
}

// A layer's residual connection on a GPU, residual + dropout(x), is one kernel with the bits of the
// two ops (the same mask, the sum rounded on its own), forward and backward, keyed by the generator
// or by sample, in float32 and float64.
TEST(Gpu, TheResidualDropoutIsOneKernelWithTheTwoOpsBits) {
  TG_NEED_GPU();
  for (tg::DType dt : {tg::kFloat32, tg::kFloat64}) {
    for (bool by_sample : {false, true}) {
      tg::manual_seed(51);
      const Tensor x0 = tg::randn({4, 33, 64}, dt).to(kGpu), r0 = tg::randn({4, 33, 64}, dt).to(kGpu),
                   w = tg::randn({4, 33, 64}, dt).to(kGpu);
      auto run = [&](bool fused, uint64_t* launches) {
        Tensor x = x0.detach().clone().requires_grad_(), r = r0.detach().clone().requires_grad_();
        tg::manual_seed(52);
        std::unique_ptr<tg::SampleKeyScope> scope;
        if (by_sample) scope = std::make_unique<tg::SampleKeyScope>(9, std::vector<int64_t>{1, 2, 3, 4});
        const uint64_t before = tg::cuda::kernel_launches();
        const Tensor y = fused ? tg::detail::dropout_add(x, r, 0.25, true) : tg::add(r, tg::dropout(x, 0.25, true));
        if (launches != nullptr) *launches = tg::cuda::kernel_launches() - before;
        tg::sum(tg::mul(y, w)).backward();
        return std::vector<std::vector<unsigned char>>{bytes_of(y.to(tg::kCPU)), bytes_of(x.grad().to(tg::kCPU)),
                                                       bytes_of(r.grad().to(tg::kCPU))};
      };
      uint64_t fused_launches = 0, plain_launches = 0;
      const auto fused = run(true, &fused_launches), plain = run(false, &plain_launches);
      const std::string what = std::string(tg::dtype_name(dt)) + (by_sample ? " by sample" : "");
      EXPECT_EQ(fused_launches + 1, plain_launches) << what << ": the add's kernel saved";
      if (!by_sample) {
        EXPECT_EQ(fused_launches, 1u) << what;
      }
      for (size_t i = 0; i < 3; ++i) EXPECT_EQ(fused[i], plain[i]) << what << " tensor " << i;
    }
  }
}

// Under autocast the residual dropout's backward also writes x's gradient rounded to bfloat16, and
// the product that made x (W_O, the FFN's second linear) takes it: one cast fewer in its backward,
// the same gradient bits as the two ops with the cast.
TEST(Gpu, TheResidualDropoutHandsItsGradientsBFloat16CopyToTheProduct) {
  TG_NEED_GPU();
  tg::manual_seed(53);
  const Tensor x0 = tg::randn({4, 33, 64}).to(kGpu), r0 = tg::randn({4, 33, 96}).to(kGpu),
               v = tg::randn({4, 33, 96}).to(kGpu), w0 = tg::randn({96, 64}).to(kGpu);
  auto run = [&](bool fused, uint64_t* backward_launches) {
    Tensor x = x0.detach().clone().requires_grad_(), w = w0.detach().clone().requires_grad_();
    const Tensor r = r0;  // (no gradient: the add's would be a copy, as it also feeds the dropout's backward)
    tg::manual_seed(54);
    Tensor loss;
    {
      tg::AutocastGuard autocast(tg::kBFloat16);
      const Tensor h = tg::linear(x, w);  // float32 out: the residual branch's product
      const Tensor y = fused ? tg::detail::dropout_add(h, r, 0.25, true) : tg::add(r, tg::dropout(h, 0.25, true));
      loss = tg::sum(tg::mul(y, v));
    }
    const uint64_t before = tg::cuda::kernel_launches();
    loss.backward();
    *backward_launches = tg::cuda::kernel_launches() - before;
    return std::vector<std::vector<unsigned char>>{bytes_of(x.grad().to(tg::kCPU)), bytes_of(w.grad().to(tg::kCPU))};
  };
  uint64_t fused_launches = 0, plain_launches = 0;
  const auto fused = run(true, &fused_launches), plain = run(false, &plain_launches);
  EXPECT_EQ(fused_launches + 1, plain_launches) << "the cast of the product's gradient saved";
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(fused[i], plain[i]) << "gradient " << i;
}

}  // namespace
