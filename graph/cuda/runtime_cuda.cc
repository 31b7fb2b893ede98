// Every cudart call of the library, in a build with CUDA (runtime_none.cc is the build without).
// cudart is linked statically and opens the driver at its first call, so a CUDA-enabled library
// loads and runs on the CPU where there is no driver.
#include "graph/cuda/runtime.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "graph/error.h"
#include "tg_build_config.h"

namespace tg::cuda_rt {
using detail::fail;
namespace {

constexpr int kMaxDevices = 64;

struct DeviceState {
  std::once_flag once;
  cudaStream_t stream = nullptr;
  std::once_flag flag_once;
  IndexError* flag_device = nullptr;  // raised by index kernels
  IndexError* flag_host = nullptr;    // pinned: its copy, read at each synchronization
  int capability = 0;
  std::string error;  // why use_device failed ("" when it did not)
  std::atomic<bool> capturing{false};  // a tg::cuda::Graph is recording the stream
};
std::array<DeviceState, kMaxDevices>& devices() {
  static auto* d = new std::array<DeviceState, kMaxDevices>();  // never destroyed: streams outlive statics
  return *d;
}

std::atomic<uint64_t> g_launches{0};
std::atomic<uint64_t> g_host_waits{0};
thread_local bool t_forbid_waits = false;
std::atomic<bool> g_sync_debug{[] {
  const char* e = std::getenv("TG_CUDA_SYNC");
  return e != nullptr && e[0] == '1';
}()};

// The first sticky error, after which every call refuses.
std::atomic<bool> g_broken{false};
std::mutex g_broken_mu;
std::string g_broken_what;

[[noreturn]] void refuse_broken(const char* op) {
  std::lock_guard<std::mutex> lock(g_broken_mu);
  fail(op, "the GPU is unusable after an earlier CUDA error ({}); restart the process", g_broken_what);
}

bool is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorContained:
    case cudaErrorExternalDevice:
    case cudaErrorTensorMemoryLeak:
      return true;
    default:
      return false;
  }
}

void check(cudaError_t e, int device, const char* op, const char* what) {
  if (e == cudaSuccess) [[likely]] return;
  const std::string msg = fmt::format("{} on cuda:{} failed: {} ({})", what, device, cudaGetErrorString(e),
                                      cudaGetErrorName(e));
  if (is_sticky(e)) {
    std::lock_guard<std::mutex> lock(g_broken_mu);
    if (!g_broken.exchange(true)) g_broken_what = fmt::format("{}: {}", op, msg);
  }
  fail(op, "{}", msg);
}

void check_usable(const char* op) {
  if (g_broken.load(std::memory_order_acquire)) [[unlikely]] refuse_broken(op);
}

thread_local int t_current = -1;

}  // namespace

bool built() { return true; }
const char* architectures() { return TG_BUILD_CUDA_ARCHITECTURES; }

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess && n > 0) return n;
  if (why != nullptr) {
    switch (e) {
      case cudaSuccess:
      case cudaErrorNoDevice: *why = "no CUDA device found"; break;
      case cudaErrorInsufficientDriver:
        *why = fmt::format("the NVIDIA driver is missing or older than CUDA {}.{} needs (nvidia-smi tells its version)",
                           CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
        break;
      default: *why = fmt::format("CUDA reports {} ({})", cudaGetErrorString(e), cudaGetErrorName(e)); break;
    }
  }
  cudaGetLastError();  // clears the (non-sticky) error
  return 0;
}

void use_device(int device, const char* op) {
  check_usable(op);
  if (t_current == device) [[likely]] return;
  if (device < 0 || device >= kMaxDevices) fail(op, "cuda:{} is not a device index", device);
  DeviceState& s = devices()[static_cast<size_t>(device)];
  std::call_once(s.once, [&] {
    std::string why;
    const int n = device_count(&why);
    if (n == 0) {
      s.error = fmt::format("cuda:{} asked for, but no GPU is usable: {}", device, why);
      return;
    }
    if (device >= n) {
      s.error = fmt::format("cuda:{} asked for, but this machine has {} GPU{} (cuda:0{})", device, n, n == 1 ? "" : "s",
                            n == 1 ? "" : fmt::format(" to cuda:{}", n - 1));
      return;
    }
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, device) != cudaSuccess) {
      s.error = fmt::format("cuda:{}: cannot read its properties", device);
      return;
    }
    s.capability = p.major * 10 + p.minor;
    if (s.capability < 80) {
      s.error = fmt::format("cuda:{} is {} (compute capability {}.{}); tapegrad needs 8.0 (Ampere) or newer", device,
                            p.name, p.major, p.minor);
      return;
    }
    if (!architectures_run_on(architectures(), s.capability)) {
      s.error = fmt::format("cuda:{} is {} (compute capability {}.{}), and this build has code only for {}: "
                            "rebuild with -DCMAKE_CUDA_ARCHITECTURES=\"{};{}\"", device, p.name, p.major, p.minor,
                            architectures(), architectures(), s.capability);
      return;
    }
    if (cudaSetDevice(device) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) != cudaSuccess) {
      s.error = fmt::format("cuda:{}: cannot create a stream ({})", device, cudaGetErrorString(cudaGetLastError()));
    }
  });
  if (!s.error.empty()) fail(op, "{}", s.error);
  check(cudaSetDevice(device), device, op, "cudaSetDevice");
  t_current = device;
}

std::string describe(int device) {
  use_device(device, "describe");
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, device), device, "describe", "cudaGetDeviceProperties");
  return fmt::format("{} (sm_{}{}, {:.1f} GiB)", p.name, p.major, p.minor,
                     static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
}

namespace {
// cudaMalloc while this thread captures a graph: allowed in relaxed mode (the capture records no
// allocation; the allocator keeps the buffer for the graph), as PyTorch's allocator does.
struct RelaxedCapture {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode); }
  ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode); }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;
};
}  // namespace

void* malloc(int device, size_t bytes, const char* op) {
  use_device(device, op);
  void* p = nullptr;
  const RelaxedCapture relaxed;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;
  }
  check(e, device, op, "cudaMalloc");
  return p;
}

void free(int device, void* p) {
  if (g_broken.load(std::memory_order_acquire)) return;  // the context is gone with the error
  use_device(device, "free");
  cudaFree(p);
}

void mem_info(int device, size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = *total_bytes = 0;
  if (g_broken.load(std::memory_order_acquire)) return;
  use_device(device, "mem_info");
  const RelaxedCapture relaxed;  // (asked by an out-of-memory message, perhaps while capturing)
  if (cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess) cudaGetLastError();
}

namespace {
[[noreturn]] void refuse_in_capture(int device, const char* op, const char* what) {
  fail(op, "{} while a CUDA graph is being captured on cuda:{} (tg::cuda::Graph::capture): {}", what, device,
       "a captured step keeps its data on the GPU (a replay would copy the same bytes again, or none); copy new inputs "
       "into the step's tensors before replay(), and read results after it");
}
}  // namespace

void copy_to_device(int device, void* dst, const void* src, size_t bytes, const char* op) {
  use_device(device, op);
  if (bytes == 0) return;
  if (capturing(device))
    refuse_in_capture(device, op, "would copy host data to the GPU");
  // From pageable host memory cudaMemcpyAsync returns once the source has been read (staged), so the
  // caller may free it; the copy is ordered on the stream.
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, devices()[device].stream), device, op,
        "copy to the GPU");
  count_launch();
  after_launch(device, op);
}

namespace {
// Waits for the device's stream, with the index flag's copy queued last; throws if it was raised.
void wait_and_check_indices(int device, const char* op, const char* what) {
  if (t_forbid_waits) {
    fail(op, "would wait for cuda:{} ({}) where host waits are forbidden (tg::cuda::ForbidHostWaits): keep the value on "
         "the GPU, or read it outside that section", device, what);
  }
  DeviceState& d = devices()[device];
  if (capturing(device)) refuse_in_capture(device, op, "would wait for the GPU");
  g_host_waits.fetch_add(1, std::memory_order_relaxed);
  if (d.flag_device != nullptr) {
    check(cudaMemcpyAsync(d.flag_host, d.flag_device, sizeof(IndexError), cudaMemcpyDeviceToHost, d.stream), device, op,
          what);
  }
  check(cudaStreamSynchronize(d.stream), device, op, what);
  if (d.flag_device != nullptr && d.flag_host->raised != 0) {
    const IndexError e = *d.flag_host;
    *d.flag_host = IndexError{};
    check(cudaMemsetAsync(d.flag_device, 0, sizeof(IndexError), d.stream), device, op, what);
    fail(e.op != nullptr ? e.op : "index", "index {} is out of range for a dimension of size {} (found on cuda:{} at the "
         "next synchronization, in {}; that op wrote zeros in its place)", e.value, e.limit, device, op);
  }
}
}  // namespace

IndexError* index_error_flag(int device) {
  use_device(device, "index");
  DeviceState& d = devices()[device];
  std::call_once(d.flag_once, [&] {
    const RelaxedCapture relaxed;
    check(cudaMalloc(reinterpret_cast<void**>(&d.flag_device), sizeof(IndexError)), device, "index", "cudaMalloc");
    check(cudaMallocHost(reinterpret_cast<void**>(&d.flag_host), sizeof(IndexError)), device, "index", "cudaMallocHost");
    *d.flag_host = IndexError{};
    check(cudaMemsetAsync(d.flag_device, 0, sizeof(IndexError), d.stream), device, "index", "memset");
  });
  return d.flag_device;
}

void copy_to_host(int device, void* dst, const void* src, size_t bytes, const char* op) {
  use_device(device, op);
  if (bytes == 0) return;
  if (capturing(device))
    refuse_in_capture(device, op, "would copy GPU data to the CPU");
  if (t_forbid_waits)  // before the copy: into pageable memory it already waits for the stream
    fail(op, "would wait for cuda:{} (copy to the CPU) where host waits are forbidden (tg::cuda::ForbidHostWaits): keep "
         "the value on the GPU, or read it outside that section", device);
  cudaStream_t s = devices()[device].stream;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s), device, op, "copy to the CPU");
  wait_and_check_indices(device, op, "copy to the CPU");
}

void copy_rows_on_device(int device, void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                         size_t rows, const char* op) {
  use_device(device, op);
  if (row_bytes == 0 || rows == 0) return;
  constexpr size_t kMaxPitch = 2147483647;  // cudaMemcpy2D refuses pitches past 2^31 - 1 bytes
  if (rows == 1 || (dst_pitch == row_bytes && src_pitch == row_bytes)) {  // one block (concat along dim 0)
    check(cudaMemcpyAsync(dst, src, row_bytes * rows, cudaMemcpyDeviceToDevice, devices()[device].stream), device, op,
          "copy on the GPU");
  } else if (dst_pitch <= kMaxPitch && src_pitch <= kMaxPitch) {
    check(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows, cudaMemcpyDeviceToDevice,
                            devices()[device].stream), device, op, "copy on the GPU");
  } else {
    for (size_t r = 0; r < rows; ++r)  // (rows of 2 GiB and more: few)
      check(cudaMemcpyAsync(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch,
                            row_bytes, cudaMemcpyDeviceToDevice, devices()[device].stream), device, op, "copy on the GPU");
  }
  count_launch();
  after_launch(device, op);
}

void copy_on_device(int device, void* dst, const void* src, size_t bytes, const char* op) {
  use_device(device, op);
  if (bytes == 0) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, devices()[device].stream), device, op,
        "copy on the GPU");
  count_launch();
  after_launch(device, op);
}

void fill_bytes(int device, void* dst, size_t bytes, int value, const char* op) {
  use_device(device, op);
  if (bytes == 0) return;
  check(cudaMemsetAsync(dst, value, bytes, devices()[device].stream), device, op, "memset");
  count_launch();
  after_launch(device, op);
}

void poison_bytes(int device, void* dst, size_t bytes, const char* op) {
  use_device(device, op);
  if (bytes == 0) return;
  check(cudaMemsetAsync(dst, 0xFF, bytes, devices()[device].stream), device, op, "memset (poisoning)");
}

void synchronize(int device, const char* op) {
  use_device(device, op);
  wait_and_check_indices(device, op, "synchronize");
}

void* stream(int device) {
  use_device(device, "stream");
  return devices()[device].stream;
}

namespace {
// KernelProfile's state: the device profiled (-1: none) and an event after each launch there.
struct Profile {
  std::mutex mu;
  int device = -1;
  cudaEvent_t start = nullptr;
  std::vector<std::pair<const char*, cudaEvent_t>> marks;
  std::vector<cudaEvent_t> spare;  // events of earlier profiles, reused
};
Profile& profile() {
  static auto* p = new Profile();  // never destroyed (events outlive statics)
  return *p;
}
std::atomic<int> g_profiled_device{-1};

cudaEvent_t profile_event(Profile& p, int device, const char* op) {
  cudaEvent_t e = nullptr;
  if (!p.spare.empty()) {
    e = p.spare.back();
    p.spare.pop_back();
  } else {
    check(cudaEventCreate(&e), device, op, "a profiling event");
  }
  check(cudaEventRecord(e, devices()[device].stream), device, op, "a profiling event");
  return e;
}
}  // namespace

void profile_begin(int device, const char* op) {
  use_device(device, op);
  if (capturing(device))
    fail(op, "cuda:{} is capturing a CUDA graph: profile its replays instead", device);
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.device >= 0) fail(op, "a KernelProfile of cuda:{} is already running (one at a time)", p.device);
  p.start = profile_event(p, device, op);
  p.device = device;
  g_profiled_device.store(device, std::memory_order_release);
}

std::vector<ProfileMark> profile_end(int device, const char* op) {
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  g_profiled_device.store(-1, std::memory_order_release);
  std::vector<ProfileMark> out;
  if (p.device != device) return out;
  p.device = -1;
  const std::vector<std::pair<const char*, cudaEvent_t>> marks = std::move(p.marks);
  p.marks.clear();
  wait_and_check_indices(device, op, "the profile's kernels");
  cudaEvent_t prev = p.start;
  out.reserve(marks.size());
  for (const auto& [name, e] : marks) {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, prev, e), device, op, "a profiling event");
    out.push_back({name, static_cast<double>(ms)});
    p.spare.push_back(prev);
    prev = e;
  }
  p.spare.push_back(prev);
  return out;
}

void count_launch() { g_launches.fetch_add(1, std::memory_order_relaxed); }

void after_launch(int device, const char* op) {
  check(cudaGetLastError(), device, op, "launch");
  if (g_sync_debug.load(std::memory_order_relaxed) && !capturing(device)) {
    check(cudaStreamSynchronize(devices()[device].stream), device, op, "the kernel (sync-debug mode)");
  }
  if (g_profiled_device.load(std::memory_order_acquire) == device) {
    Profile& p = profile();
    std::lock_guard<std::mutex> lock(p.mu);
    if (p.device == device) p.marks.emplace_back(op, profile_event(p, device, op));
  }
}

void check_status(int error, int device, const char* op, const char* what) {
  check(static_cast<cudaError_t>(error), device, op, what);
}

void begin_capture(int device, const char* op) {
  use_device(device, op);
  DeviceState& d = devices()[device];
  if (d.capturing.load(std::memory_order_acquire))
    fail(op, "cuda:{} is already capturing a CUDA graph (one capture at a time)", device);
  if (g_profiled_device.load(std::memory_order_acquire) == device)
    fail(op, "a KernelProfile is running on cuda:{}: end it before capturing a graph", device);
  // Thread-local mode: this thread's calls that could break the recording fail (the allocator's
  // cudaMalloc switches to relaxed); other threads are not affected.
  check(cudaStreamBeginCapture(d.stream, cudaStreamCaptureModeThreadLocal), device, op, "cudaStreamBeginCapture");
  d.capturing.store(true, std::memory_order_release);
}

void* end_capture(int device, const char* op, size_t* nodes) {
  use_device(device, op);
  DeviceState& d = devices()[device];
  cudaGraph_t g = nullptr;
  const cudaError_t e = cudaStreamEndCapture(d.stream, &g);
  d.capturing.store(false, std::memory_order_release);
  if (e != cudaSuccess || g == nullptr) {
    if (g != nullptr) cudaGraphDestroy(g);
    cudaGetLastError();
    fail(op, "capturing a CUDA graph on cuda:{} failed: {} ({}); a call in the step cannot be recorded (a wait for the "
         "GPU, a copy from the host, or another thread's work on the device)", device, cudaGetErrorString(e),
         cudaGetErrorName(e));
  }
  size_t n = 0;
  cudaGraphGetNodes(g, nullptr, &n);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t ie = cudaGraphInstantiate(&exec, g, 0);
  cudaGraphDestroy(g);
  check(ie, device, op, "cudaGraphInstantiate");
  *nodes = n;
  return exec;
}

void abort_capture(int device) {
  DeviceState& d = devices()[device];
  if (!d.capturing.load(std::memory_order_acquire)) return;
  cudaGraph_t g = nullptr;
  cudaStreamEndCapture(d.stream, &g);
  if (g != nullptr) cudaGraphDestroy(g);
  cudaGetLastError();  // (the capture's error, not sticky)
  d.capturing.store(false, std::memory_order_release);
}

bool capturing(int device) {
  return device >= 0 && device < kMaxDevices && devices()[device].capturing.load(std::memory_order_acquire);
}

void launch_graph(int device, void* exec, const char* op) {
  use_device(device, op);
  check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), devices()[device].stream), device, op, "cudaGraphLaunch");
  count_launch();
  after_launch(device, op);
}

void destroy_graph(int device, void* exec) {
  if (exec == nullptr || g_broken.load(std::memory_order_acquire)) return;
  use_device(device, "cuda::Graph");
  cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
}

uint64_t launches() { return g_launches.load(std::memory_order_relaxed); }
uint64_t host_waits() { return g_host_waits.load(std::memory_order_relaxed); }
bool forbid_host_waits(bool on) {
  const bool was = t_forbid_waits;
  t_forbid_waits = on;
  return was;
}
bool sync_debug() { return g_sync_debug.load(std::memory_order_relaxed); }
void set_sync_debug(bool on) { g_sync_debug.store(on, std::memory_order_relaxed); }

}  // namespace tg::cuda_rt
