// Tensors on a GPU: copies there and back keep every bit, factories fill on the device, the host
// refuses to read device memory, the caching allocator reuses and frees, and each failure is one
// line. Needs a GPU (tests/gpu/gpu_test_util.h: skipped without one, failed with TG_REQUIRE_GPU=1).
#include <cstring>
#include <string>
#include <vector>

#include "gpu_test_util.h"

namespace {

using tg::Device;
using tg::Tensor;
const Device kGpu = Device::cuda(0);

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
}

TEST(Gpu, TheHostReadsDeviceMemoryOnlyThroughCopies) {
  TG_NEED_GPU();
  Tensor g = tg::tensor({1.5, -2.0, 3.25}).to(kGpu);
  try {
    (void)g.data<float>();
    FAIL() << "no error";
  } catch (const tg::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("Gpu_TheHostReadsDeviceMemoryOnlyThroughCopies_Test::TestBody (gpu/device_gpu_test.cc:"),
              std::string::npos) << m;
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
  EXPECT_EQ(end.device_mallocs, mallocs_after_first);  // a steady loop calls cudaMalloc no more
  EXPECT_EQ(end.allocated, start.allocated);          // everything freed went back
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

}  // namespace
