// Devices without a GPU: what every machine can check of the GPU part — device names, which
// architectures run on which card, the caching allocator's bookkeeping over a fake device, and the
// one-line refusals where no GPU is usable. tests/gpu/ holds the tests that need a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "graph/capture_internal.h"
#include "graph/cuda/runtime.h"
#include "graph/device_memory_internal.h"
#include "tapegrad.h"

namespace {

using tg::Device;

TEST(Devices, ParseAndPrint) {
  EXPECT_EQ(Device::parse("cpu"), tg::kCPU);
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::parse("cuda:3").str(), "cuda:3");
  EXPECT_EQ(fmt::format("{} {}", tg::kCPU, Device::cuda(1)), "cpu cuda:1");
  EXPECT_EQ(Device(tg::DeviceType::kCPU, 5), tg::kCPU);  // the CPU has no index
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1234", "CPU", ""}) {
    try {
      Device::parse(bad);
      ADD_FAILURE() << bad << " parsed";
    } catch (const tg::Error& e) {
      EXPECT_EQ(std::string(e.what()), fmt::format("device: '{}' is not a device (expected cpu, cuda or cuda:N)", bad));
    }
  }
}

TEST(Devices, ArchitectureListsRunWhereTheDriverCanRunThem) {
  using tg::cuda_rt::architectures_run_on;
  const std::string def = "80-real;90-real;90-virtual";  // the build's default
  EXPECT_TRUE(architectures_run_on(def, 80));    // A100: real sm_80
  EXPECT_TRUE(architectures_run_on(def, 86));    // RTX 30xx: sm_80 code runs on 8.6
  EXPECT_TRUE(architectures_run_on(def, 89));    // L4 / RTX 40xx
  EXPECT_TRUE(architectures_run_on(def, 90));    // H100
  EXPECT_TRUE(architectures_run_on(def, 100));   // B200: the compute_90 PTX, compiled by the driver
  EXPECT_TRUE(architectures_run_on(def, 120));
  EXPECT_FALSE(architectures_run_on(def, 75));   // Turing: below every architecture
  EXPECT_TRUE(architectures_run_on("90a-real", 90));
  EXPECT_FALSE(architectures_run_on("90a-real", 100));  // arch-specific code: that card only
  EXPECT_FALSE(architectures_run_on("90-real", 100));   // real code does not cross a major version
  EXPECT_FALSE(architectures_run_on("86-real", 80));    // nor run on an older minor
  EXPECT_TRUE(architectures_run_on("86", 89));          // a plain number: real code and PTX
  EXPECT_TRUE(architectures_run_on("80-virtual", 90));
  EXPECT_TRUE(architectures_run_on("100f-real", 103));  // family code: its major version
  EXPECT_FALSE(architectures_run_on("100f-real", 120));
  EXPECT_FALSE(architectures_run_on("", 90));
}

// A device of `total` bytes, in memory of the host, that counts its calls.
struct FakeDevice final : tg::detail::DeviceMemoryBackend {
  size_t total, used = 0, mallocs = 0, syncs = 0;
  std::map<void*, size_t> live;
  explicit FakeDevice(size_t t) : total(t) {}
  ~FakeDevice() override {
    for (auto& [p, n] : live) std::free(p);
  }
  void* allocate(size_t bytes) override {
    if (used + bytes > total) return nullptr;
    void* p = std::malloc(bytes);
    live[p] = bytes;
    used += bytes;
    ++mallocs;
    return p;
  }
  void release(void* p, size_t bytes) override {
    EXPECT_EQ(live.at(p), bytes);
    live.erase(p);
    used -= bytes;
    std::free(p);
  }
  void synchronize() override { ++syncs; }
  void mem_info(size_t* free_bytes, size_t* total_bytes) override {
    *free_bytes = total - used;
    *total_bytes = total;
  }
  std::string name() const override { return "cuda:0"; }
};

TEST(DeviceAllocator, SizeClassesBoundTheWaste) {
  using A = tg::detail::CachingDeviceAllocator;
  EXPECT_EQ(A::round(0), 512u);
  EXPECT_EQ(A::round(1), 512u);
  EXPECT_EQ(A::round(513), 1024u);
  EXPECT_EQ(A::round(size_t{1} << 20), size_t{1} << 20);
  EXPECT_EQ(A::round((size_t{1} << 20) + 1), (size_t{5} << 18));  // 1.25 MiB
  for (size_t n = 1; n < (size_t{1} << 34); n = n * 3 + 7) {
    const size_t r = A::round(n);
    EXPECT_GE(r, n);
    EXPECT_LE(r, n + n / 4 + 512) << n;
    EXPECT_EQ(A::round(r), r) << n;  // a class is its own class
  }
}

TEST(DeviceAllocator, ASteadyLoopReusesItsBuffersWithoutNewMallocs) {
  FakeDevice dev(size_t{1} << 30);
  tg::detail::CachingDeviceAllocator a(&dev);
  size_t r1 = 0, r2 = 0, r3 = 0;
  for (int step = 0; step < 100; ++step) {  // a training step's varied temporaries
    void* x = a.allocate(1000 + static_cast<size_t>(step % 3), &r1, "op");
    void* y = a.allocate(3 << 20, &r2, "op");
    void* z = a.allocate(12345, &r3, "op");
    a.free(y, r2);
    a.free(x, r1);
    a.free(z, r3);
  }
  EXPECT_EQ(dev.mallocs, 3u);
  const auto c = a.counters();
  EXPECT_EQ(c.allocated, 0u);
  EXPECT_EQ(c.reserved, r1 + r2 + r3);
  EXPECT_EQ(c.peak_allocated, r1 + r2 + r3);
  EXPECT_EQ(c.device_mallocs, 3u);
  a.empty_cache();
  EXPECT_EQ(a.counters().reserved, 0u);
  EXPECT_EQ(dev.used, 0u);
  EXPECT_TRUE(dev.live.empty());
}

// TG_CUDA_NO_CACHING=1: each buffer exactly as large as asked and given back when freed (so memory
// checkers see each tensor's own end); during a capture freed buffers wait for its end.
TEST(DeviceAllocator, WithoutCachingEachBufferIsExactAndFreedAtOnce) {
  FakeDevice dev(size_t{1} << 30);
  tg::detail::CachingDeviceAllocator a(&dev, /*caching=*/false);
  size_t r1 = 0, r2 = 0, r0 = 0;
  void* x = a.allocate(1000, &r1, "op");
  void* y = a.allocate((3 << 20) + 5, &r2, "op");
  void* z = a.allocate(0, &r0, "op");
  EXPECT_EQ(r1, 1000u);
  EXPECT_EQ(r2, (3u << 20) + 5);
  EXPECT_EQ(r0, 1u);
  EXPECT_EQ(dev.live.at(x), 1000u);
  EXPECT_EQ(a.counters().reserved, 1000u + (3u << 20) + 5 + 1);
  a.free(x, r1);
  a.free(z, r0);
  EXPECT_EQ(dev.live.size(), 1u);
  EXPECT_EQ(a.counters().reserved, (3u << 20) + 5);
  void* again = a.allocate(1000, &r1, "op");
  EXPECT_EQ(dev.mallocs, 4u) << "nothing is reused";
  a.free(again, r1);
  // A capture: what it frees is held (a replay may write it) until the graph is released.
  a.begin_capture(1);
  void* t = a.allocate(64, &r0, "op");
  a.free(t, r0);
  a.end_capture();
  EXPECT_EQ(dev.live.count(t), 1u);
  a.free(y, r2);  // alive when the capture began: the graph owns it too
  EXPECT_EQ(dev.live.count(y), 1u);
  a.release_graph(1);
  EXPECT_TRUE(dev.live.empty());
  EXPECT_EQ(a.counters().reserved, 0u);
  EXPECT_EQ(a.counters().allocated, 0u);
}

TEST(DeviceAllocator, OutOfMemoryReturnsTheCacheAndRetriesOnce) {
  FakeDevice dev(size_t{8} << 20);
  tg::detail::CachingDeviceAllocator a(&dev);
  size_t r = 0, r2 = 0;
  void* p = a.allocate(size_t{5} << 20, &r, "matmul");
  a.free(p, r);  // cached: 5 MiB held, none in tensors
  void* q = a.allocate(size_t{6} << 20, &r2, "matmul");  // fits only once the cache is returned
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(dev.syncs, 1u);
  EXPECT_EQ(a.counters().reserved, r2);
  try {
    a.allocate(size_t{4} << 20, &r, "matmul");
    FAIL() << "no error";
  } catch (const tg::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "matmul: cuda:0: out of memory: 4.0 MiB asked for; the card has 8.0 MiB in all, 2.0 MiB free; tapegrad "
              "holds 6.0 MiB in tensors and 0 bytes in its cache (a smaller batch or model, or bfloat16, needs less)");
  }
  a.free(q, r2);
}

// What a CUDA graph's replays write stays its own: the buffers alive when the capture began and
// those it allocated are never handed to anything else while the graph lives; the capture reuses
// the buffers it freed itself; release_graph gives them back.
TEST(DeviceAllocator, AGraphKeepsTheBuffersItsReplaysWrite) {
  FakeDevice dev(size_t{1} << 30);
  tg::detail::CachingDeviceAllocator a(&dev);
  size_t r = 0, r2 = 0, r3 = 0, r4 = 0;
  void* cached = a.allocate(4096, &r, "op");
  a.free(cached, r);                                   // in the cache before the capture
  void* param = a.allocate(4096, &r, "op");            // alive at the capture: the graph writes it
  EXPECT_EQ(param, cached);
  a.begin_capture(7);
  void* tmp = a.allocate(8192, &r2, "op");             // a temporary of the captured step
  a.free(tmp, r2);                                     // held for the graph...
  void* tmp2 = a.allocate(8192, &r2, "op");            // ...and reused by the same capture
  EXPECT_EQ(tmp2, tmp);
  void* out = a.allocate(1024, &r3, "op");             // the step's result, alive after it
  a.free(tmp2, r2);
  a.end_capture();
  EXPECT_EQ(a.held(), r2);
  void* other = a.allocate(8192, &r4, "op");           // eager work after the capture: a new buffer
  EXPECT_NE(other, tmp);
  a.free(param, r);                                    // the graph's: held, not cached
  void* again = a.allocate(4096, &r, "op");
  EXPECT_NE(again, param);
  EXPECT_EQ(a.held(), r2 + r);
  auto c = a.counters();
  EXPECT_EQ(c.allocated, r3 + r4 + r);
  EXPECT_EQ(c.reserved, dev.used);
  a.release_graph(7);                                  // the graph is gone: its held buffers are cached
  EXPECT_EQ(a.held(), 0u);
  const size_t mallocs = dev.mallocs;
  void* reuse = a.allocate(8192, &r2, "op");
  EXPECT_EQ(reuse, tmp);
  EXPECT_EQ(dev.mallocs, mallocs);
  a.free(out, r3);                                     // no graph owns it now: cached at once
  EXPECT_EQ(a.held(), 0u);
  for (auto [p, n] : {std::pair{other, r4}, {again, r}, {reuse, r2}}) a.free(p, n);
  a.empty_cache();
  EXPECT_EQ(dev.used, 0u);
}

// A capture reuses only the temporaries it allocated itself: a buffer alive when it began may hold
// what a replay reads first, and one the host writes before each launch (reuse_capture_frees
// false) must be one no recorded kernel touches.
TEST(DeviceAllocator, ACaptureReusesOnlyItsOwnTemporaries) {
  FakeDevice dev(size_t{1} << 30);
  tg::detail::CachingDeviceAllocator a(&dev);
  size_t r = 0;
  void* input = a.allocate(4096, &r, "op");   // made before the capture, read by the step
  a.begin_capture(1);
  a.free(input, r);                           // the step drops it...
  void* t1 = a.allocate(4096, &r, "op");      // ...but a later temporary does not take it
  EXPECT_NE(t1, input);
  a.free(t1, r);
  void* t2 = a.allocate(4096, &r, "op");      // the capture's own temporary: reused
  EXPECT_EQ(t2, t1);
  a.free(t2, r);
  void* values = a.allocate(4096, &r, "op", /*reuse_capture_frees=*/false);
  EXPECT_NE(values, t1);
  EXPECT_NE(values, input);
  a.free(values, r);
  a.end_capture();
  EXPECT_EQ(a.held(), 3 * r);
  a.release_graph(1);
  EXPECT_EQ(a.held(), 0u);
  EXPECT_EQ(a.counters().allocated, 0u);
  a.empty_cache();
  EXPECT_EQ(dev.used, 0u);
}

// A buffer two graphs use is held until both are gone; a capture never takes another graph's.
TEST(DeviceAllocator, ABufferOfTwoGraphsWaitsForBoth) {
  FakeDevice dev(size_t{1} << 30);
  tg::detail::CachingDeviceAllocator a(&dev);
  size_t r = 0;
  void* shared = a.allocate(4096, &r, "op");
  a.begin_capture(1);
  a.end_capture();
  a.begin_capture(2);
  a.free(shared, r);                                   // owned by 1 and 2: not for capture 2's reuse
  void* p = a.allocate(4096, &r, "op");
  EXPECT_NE(p, shared);
  a.end_capture();
  a.release_graph(2);
  EXPECT_EQ(a.held(), r);                              // graph 1 still owns it
  a.release_graph(1);
  EXPECT_EQ(a.held(), 0u);
  void* q = a.allocate(4096, &r, "op");
  EXPECT_EQ(q, shared);
  a.free(p, r);
  a.free(q, r);
  a.empty_cache();
  EXPECT_EQ(dev.used, 0u);
}

// During a capture nothing goes back to the driver (that would wait for the device): an
// out-of-memory fails at once, without the retry, and says so.
TEST(DeviceAllocator, OutOfMemoryDuringACaptureDoesNotRetry) {
  FakeDevice dev(size_t{8} << 20);
  tg::detail::CachingDeviceAllocator a(&dev);
  size_t r = 0, r2 = 0;
  void* p = a.allocate(size_t{5} << 20, &r, "matmul");
  a.free(p, r);
  a.begin_capture(3);
  try {
    a.allocate(size_t{6} << 20, &r2, "matmul");
    FAIL() << "no error";
  } catch (const tg::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "matmul: cuda:0: out of memory: 6.0 MiB asked for; the card has 8.0 MiB in all, 3.0 MiB free; tapegrad "
              "holds 0 bytes in tensors and 5.0 MiB in its cache (while capturing a CUDA graph, nothing is given back "
              "to the driver) (a smaller batch or model, or bfloat16, needs less)");
  }
  EXPECT_EQ(dev.syncs, 0u);
  a.empty_cache();  // (not during the capture)
  EXPECT_EQ(dev.used, r);
  a.end_capture();
  a.release_graph(3);
  a.empty_cache();
  EXPECT_EQ(dev.used, 0u);
}

TEST(DeviceAllocator, TheMemoryLimitIsAnOutOfMemoryOfItsOwn) {
  FakeDevice dev(size_t{1} << 30);
  tg::detail::CachingDeviceAllocator a(&dev);
  a.set_limit(size_t{10} << 20);
  size_t r = 0, r2 = 0;
  void* p = a.allocate(size_t{8} << 20, &r, "linear");
  try {
    a.allocate(size_t{4} << 20, &r2, "linear");
    FAIL() << "no error";
  } catch (const tg::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "linear: cuda:0: out of memory: 4.0 MiB asked for, past the limit of 10.0 MiB set by "
              "tg::cuda::set_memory_limit (tapegrad holds 8.0 MiB in tensors and 0 bytes in its cache; the card has "
              "1.00 GiB in all, 1016.0 MiB free)");
  }
  a.free(p, r);
  void* q = a.allocate(size_t{9} << 20, &r2, "linear");  // the cached 8 MiB goes back, 9 fits
  EXPECT_EQ(a.counters().reserved, r2);
  a.set_limit(size_t{4} << 20);  // lowered below what is held: the buffer goes back when freed
  a.free(q, r2);
  EXPECT_EQ(a.counters().reserved, 0u);
  EXPECT_EQ(dev.used, 0u);
}

TEST(Devices, CallerNamesAreShort) {
  auto here = [](tg::detail::CallSite w = tg::detail::CallSite::current()) { return tg::detail::caller_name(w); };
  const std::string name = here(), line = std::to_string(__LINE__);
  EXPECT_EQ(name, "TestBody (tests/device_test.cc:" + line + ")");
  const std::string next = std::to_string(__LINE__ + 1);
  auto in_lambda = [&] { return here(); };  // a lambda has no name worth printing: the place alone
  EXPECT_EQ(in_lambda(), "tests/device_test.cc:" + next);
}

// Without a usable GPU (a CPU-only build, no driver, or no card), asking for one is one line.
TEST(Devices, WithoutAGpuAskingForOneIsOneLine) {
  if (tg::cuda::available()) GTEST_SKIP() << "a GPU is usable here (tests/gpu/ covers it)";
  const std::string why = tg::cuda::unavailable_reason();
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(tg::cuda::device_count(), 0);
  EXPECT_EQ(why.find('\n'), std::string::npos);
  auto expect_one_line = [&](auto&& f, const std::string& op) {
    try {
      f();
      ADD_FAILURE() << "no error from " << op;
    } catch (const tg::Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind(op + ": ", 0), 0u) << m;
      EXPECT_NE(m.find(tg::cuda::built() ? "no GPU is usable: " + why : why), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  };
  tg::Tensor x = tg::randn({2, 3});
  expect_one_line([&] { (void)x.to(Device::cuda()); }, "to");
  expect_one_line([&] { (void)tg::zeros({4}, tg::kFloat32, Device::cuda()); }, "allocate");
  expect_one_line([&] { tg::cuda::synchronize(); }, "synchronize");
  expect_one_line([&] { tg::cuda::KernelProfile profile; }, "KernelProfile");
  tg::cuda::Graph graph;
  bool ran = false;
  expect_one_line([&] { graph.capture([&] { ran = true; }); }, "cuda::Graph::capture");
  EXPECT_FALSE(ran);  // refused before the step
  EXPECT_FALSE(graph.captured());
  EXPECT_FALSE(tg::detail::capturing(0));
  EXPECT_EQ(tg::detail::step_values(0, nullptr, 1, [](uint64_t*) {}), nullptr);  // outside a capture: none
  EXPECT_EQ(x.device(), tg::kCPU);
  EXPECT_FALSE(x.is_cuda());
  EXPECT_EQ(tg::zeros_like(x).device(), tg::kCPU);
  EXPECT_EQ(x.to(tg::kCPU).same(x), true);  // already there: the same tensor, no copy
}

// A Graph replays only what it captured, once per Graph.
TEST(Devices, AGraphReplaysOnlyAfterItsCapture) {
  tg::cuda::Graph graph;
  EXPECT_EQ(graph.nodes(), 0u);
  try {
    graph.replay();
    FAIL() << "no error";
  } catch (const tg::Error& e) {
    EXPECT_EQ(std::string(e.what()), "cuda::Graph::replay: nothing captured yet: call capture(step) first");
  }
  if (tg::cuda::available()) return;  // (tests/gpu/ captures)
  EXPECT_THROW(graph.capture([] {}), tg::Error);  // no GPU
  try {
    graph.replay();
    FAIL() << "no error";
  } catch (const tg::Error& e) {
    EXPECT_EQ(std::string(e.what()), "cuda::Graph::replay: nothing captured yet: call capture(step) first");
  }
}

TEST(Devices, CpuTensorsRefuseGpuPointers) {
  tg::Tensor x = tg::ones({3});
  try {
    (void)x.cuda_data<float>();
    FAIL() << "no error";
  } catch (const tg::Error& e) {
    EXPECT_NE(std::string(e.what()).find("asks for the GPU pointer of a tensor on cpu"), std::string::npos) << e.what();
  }
}

}  // namespace

// KernelProfile's table: launch times summed by op, largest first, ties in name order.
TEST(Devices, KernelProfileTablesSumByOpLargestFirst) {
  const std::vector<tg::cuda::OpTime> t = tg::cuda::op_time_table(
      {{"matmul", 1.5}, {"add", 0.125}, {"matmul", 2.0}, {"softmax", 0.5}, {"add", 0.25}, {"layer_norm", 0.5}});
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].op, "matmul");
  EXPECT_DOUBLE_EQ(t[0].ms, 3.5);
  EXPECT_EQ(t[0].launches, 2u);
  EXPECT_EQ(t[1].op, "layer_norm");  // 0.5, before softmax's 0.5 by name
  EXPECT_EQ(t[2].op, "softmax");
  EXPECT_EQ(t[3].op, "add");
  EXPECT_DOUBLE_EQ(t[3].ms, 0.375);
  EXPECT_EQ(t[3].launches, 2u);
  EXPECT_TRUE(tg::cuda::op_time_table({}).empty());
}
