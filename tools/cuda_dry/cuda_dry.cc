// A CUDA runtime that runs no kernel: tapegrad's GPU code, host side, on a machine without a GPU.
//
// Built only with -DTG_CUDA_DRY=ON (a check build; `./tg.sh dry`), in place of the toolkit's cudart.
// It answers as one H100 would, with host memory for "device" memory (zeroed; never written by a
// kernel), and checks what the real runtime would refuse or what would crash a GPU:
//   - a launch's grid and block against the card's limits (an empty grid included), its dynamic
//     shared memory against what the kernel was allowed (cudaFuncSetAttribute), its stream (work on
//     the legacy default stream is not ordered with tapegrad's non-blocking stream);
//   - every pointer parameter of a kernel (read from the kernel's demangled signature): null, or
//     inside a live device or pinned host allocation;
//   - every copy and memset: its device bytes inside one live allocation;
//   - graph capture: the calls a capture forbids (cudaMalloc, cudaFree, host waits, copies from
//     pageable memory) fail and invalidate the capture as the real runtime does, under the thread's
//     capture mode; a graph's memsets and copies run again at each launch, and each launch checks
//     that what its kernels and products point to was not freed since the capture (even where the
//     address came back in a new allocation).
// Pointers inside a struct passed by value are checked where the library names them before the
// launch (ops/cuda/launch.cuh's dry_pointers: attention's and the optimizers' parameter blocks).
// Not seen: a caching allocator's reuse of a block it never gave back (tapegrad's own
// DeviceAllocator tests check that).
// Each finding prints one line starting "cuda_dry:" on stderr and the call returns the error the
// real runtime would (or none, where the real one would go on and crash later). At exit, with
// TG_CUDA_DRY_REPORT=FILE, the launches per kernel and the findings are written to FILE as JSON;
// TG_CUDA_DRY_ABORT=1 aborts at the first finding (for a debugger).
// Values are never computed: what a program reads back is zeros or what it uploaded.
#include <cuda_runtime_api.h>

#include <cxxabi.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kTotalMemory = size_t{80} << 30;  // what an H100 SXM reports
constexpr int kSmemOptin = 232448;                 // sm_90's largest dynamic shared memory a block may ask for
constexpr int kSmemDefault = 48 << 10;

struct Kernel {
  std::string name;             // demangled
  std::vector<bool> pointer;    // which parameters are pointers
  int max_dynamic_smem = kSmemDefault;
  uint64_t launches = 0;
};

enum class NodeKind { kKernel, kMemset, kCopy };
struct Node {
  NodeKind kind;
  Kernel* kernel = nullptr;
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  int value = 0;
  // A kernel's pointer parameters (a product's operands) and the serial number of the allocation
  // each was in at the capture: at each replay each must still be in that allocation.
  std::vector<std::pair<const void*, uint64_t>> pointers;
};

struct Graph {
  std::vector<Node> nodes;
};

struct Stream {
  bool capturing = false;
  bool invalidated = false;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id owner;
  Graph* graph = nullptr;
};

struct Alloc {
  size_t bytes;
  bool pinned;  // cudaMallocHost
  size_t mapped = 0;  // bytes mapped with mmap (0: from the heap)
  uint64_t serial = 0;  // a new number for each allocation (an address may come back)
};

struct State {
  std::mutex mu;
  std::map<uintptr_t, Alloc> allocs;
  size_t device_bytes = 0;
  std::map<const void*, Kernel> kernels;  // by host stub
  std::vector<Stream*> streams;
  std::map<std::string, uint64_t> findings;  // by kind
  uint64_t launches = 0, graph_launches = 0, syncs = 0, copies_to_host = 0, copies_to_device = 0;
  uint64_t serials = 0;
};

State& st() {
  static State* s = new State();  // never destroyed: static destructors of the library may still call in
  return *s;
}

thread_local cudaError_t t_last = cudaSuccess;
thread_local cudaStreamCaptureMode t_mode = cudaStreamCaptureModeGlobal;
struct CallConfig {
  dim3 grid, block;
  size_t smem;
  void* stream;
};
thread_local std::vector<CallConfig> t_configs;
// Pointers the library says the next launch from this thread finds inside a struct argument.
thread_local std::vector<const void*> t_struct_pointers;

// Every runtime call a program makes (not the registration of its kernels at load): a CPU run makes
// none ("a CPU run never initialises CUDA"), which the dry run checks.
std::atomic<uint64_t> g_calls{0};
void count_call() { g_calls.fetch_add(1, std::memory_order_relaxed); }

cudaError_t set_error(cudaError_t e) {
  if (e != cudaSuccess) t_last = e;
  return e;
}

// One line on stderr; the count goes into the report.
void finding(const char* kind, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void finding(const char* kind, const char* fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "cuda_dry: %s: %s\n", kind, line);
  st().findings[kind] += 1;  // (callers hold the lock)
  static const bool stop = std::getenv("TG_CUDA_DRY_ABORT") != nullptr;
  if (stop) std::abort();  // (for a debugger's backtrace)
}

// The allocation holding [p, p + bytes), or null.
const std::pair<const uintptr_t, Alloc>* holding(const void* p, size_t bytes) {
  auto& a = st().allocs;
  const auto v = reinterpret_cast<uintptr_t>(p);
  auto it = a.upper_bound(v);
  if (it == a.begin()) return nullptr;
  --it;
  const uintptr_t off = v - it->first;  // (no v + bytes: a huge count must not wrap around)
  if (off > it->second.bytes || bytes > it->second.bytes - off) return nullptr;
  return &*it;
}

bool is_device(const void* p) {
  const auto* h = holding(p, 1);  // (its end may be where a host block begins)
  return h != nullptr && !h->second.pinned;
}

// A capture that forbids this thread's unsafe calls (the CUDA programming guide's rules for
// cudaStreamCaptureModeGlobal / ThreadLocal / Relaxed).
Stream* forbidding_capture() {
  if (t_mode == cudaStreamCaptureModeRelaxed) return nullptr;
  for (Stream* s : st().streams) {
    if (!s->capturing || s->mode == cudaStreamCaptureModeRelaxed) continue;
    if (s->owner == std::this_thread::get_id()) return s;
    if (t_mode == cudaStreamCaptureModeGlobal && s->mode == cudaStreamCaptureModeGlobal) return s;
  }
  return nullptr;
}

cudaError_t unsafe_in_capture(const char* call) {
  Stream* s = forbidding_capture();
  if (s == nullptr) return cudaSuccess;
  finding("capture", "%s while a stream captures a graph (the real runtime refuses it and invalidates the capture)", call);
  s->invalidated = true;
  return set_error(cudaErrorStreamCaptureUnsupported);
}

// One of the streams made here, or null (the legacy or per-thread default stream, or a handle that
// is no stream: never dereferenced).
Stream* stream_of(void* s) {
  for (Stream* x : st().streams)
    if (x == s) return x;
  return nullptr;
}

// Whether work queued on `s` is recorded into a graph rather than run.
Stream* capturing(void* s) {
  Stream* x = stream_of(s);
  return x != nullptr && x->capturing ? x : nullptr;
}

void check_stream(void* s, const char* what) {
  if (stream_of(s) == nullptr) {
    finding("stream", "%s on stream %p, not one made by cudaStreamCreateWithFlags (the legacy or per-thread default "
            "stream is not ordered with tapegrad's non-blocking stream)", what, s);
  }
}

void run_node(const Node& n) {
  switch (n.kind) {
    case NodeKind::kKernel: n.kernel->launches += 1; st().launches += 1; break;
    case NodeKind::kMemset: std::memset(n.dst, n.value, n.bytes); break;
    case NodeKind::kCopy: std::memmove(n.dst, n.src, n.bytes); break;
  }
}

// Parameters of a demangled signature "ns::f<T>(float const*, long, Args)": which are pointers.
std::vector<bool> pointer_params(const std::string& sig) {
  std::vector<bool> out;
  size_t close = sig.rfind(')');
  if (close == std::string::npos) return out;
  int depth = 0;
  size_t open = close;
  for (size_t i = close + 1; i-- > 0;) {
    const char c = sig[i];
    if (c == ')' || c == '>') ++depth;
    if (c == '(' || c == '<') --depth;
    if (depth == 0 && c == '(') {
      open = i;
      break;
    }
  }
  std::string cur;
  depth = 0;
  auto flush = [&] {
    std::string p = cur;
    for (const char* q : {" const", " volatile", " __restrict__", " __restrict", " restrict"}) {
      const size_t n = std::strlen(q);
      while (p.size() >= n && p.compare(p.size() - n, n, q) == 0) p.resize(p.size() - n);
    }
    while (!p.empty() && p.back() == ' ') p.pop_back();
    p.erase(0, p.find_first_not_of(' '));
    if (!cur.empty()) out.push_back(!p.empty() && p.back() == '*' && p != "char const*");
    cur.clear();
  };
  for (size_t i = open + 1; i < close; ++i) {
    const char c = sig[i];
    if (c == '(' || c == '<' || c == '[') ++depth;
    if (c == ')' || c == '>' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      flush();
      continue;
    }
    cur.push_back(c);
  }
  flush();
  if (out.size() == 1 && sig.compare(open, 6, "(void)") == 0) out.clear();
  return out;
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void write_report() {
  const char* path = std::getenv("TG_CUDA_DRY_REPORT");
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  uint64_t n = 0;
  for (auto& f : s.findings) n += f.second;
  if (n > 0) std::fprintf(stderr, "cuda_dry: %llu finding(s) in all\n", static_cast<unsigned long long>(n));
  if (path == nullptr) return;
  FILE* f = std::fopen(path, "w");
  if (f == nullptr) return;
  auto quoted = [f](const std::string& t) {
    std::fputc('"', f);
    for (char c : t) {
      if (c == '"' || c == '\\') std::fputc('\\', f);
      std::fputc(c, f);
    }
    std::fputc('"', f);
  };
  std::fprintf(f, "{\"calls\": %llu, \"launches\": %llu, \"graph_launches\": %llu, \"syncs\": %llu, "
               "\"copies_to_host\": %llu, \"copies_to_device\": %llu,\n \"findings\": {",
               static_cast<unsigned long long>(g_calls.load()), static_cast<unsigned long long>(s.launches),
               static_cast<unsigned long long>(s.graph_launches), static_cast<unsigned long long>(s.syncs),
               static_cast<unsigned long long>(s.copies_to_host), static_cast<unsigned long long>(s.copies_to_device));
  bool first = true;
  for (auto& [k, v] : s.findings) {
    std::fprintf(f, "%s", first ? "" : ", ");
    quoted(k);
    std::fprintf(f, ": %llu", static_cast<unsigned long long>(v));
    first = false;
  }
  std::fprintf(f, "},\n \"kernels\": {");
  std::vector<const Kernel*> ks;
  for (auto& [h, k] : s.kernels)
    if (k.launches > 0) ks.push_back(&k);
  std::sort(ks.begin(), ks.end(), [](const Kernel* a, const Kernel* b) { return a->launches > b->launches; });
  first = true;
  for (const Kernel* k : ks) {
    std::fprintf(f, "%s\n  ", first ? "" : ",");
    quoted(k->name);
    std::fprintf(f, ": %llu", static_cast<unsigned long long>(k->launches));
    first = false;
  }
  std::fprintf(f, "}}\n");
  std::fclose(f);
}

const bool kRegistered = [] { return std::atexit(write_report) == 0; }();

}  // namespace

extern "C" {

// ---- Registration and launch (what nvcc's generated host code calls) --------------------------------
void** __cudaRegisterFatBinary(void* fat) {
  static thread_local void* handle;
  handle = fat;
  return &handle;
}
void __cudaRegisterFatBinaryEnd(void**) {}
void __cudaUnregisterFatBinary(void**) {}
void __cudaRegisterVar(void**, char*, char*, const char*, int, size_t, int, int) {}

void __cudaRegisterFunction(void**, const char* host_fun, char*, const char* device_name, int, uint3*, uint3*, dim3*,
                            dim3*, int*) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  Kernel& k = s.kernels[host_fun];
  int status = 0;
  char* d = abi::__cxa_demangle(device_name, nullptr, nullptr, &status);
  k.name = status == 0 && d != nullptr ? d : device_name;
  std::free(d);
  k.pointer = pointer_params(k.name);
}

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t smem, struct CUstream_st* stream) {
  count_call();
  t_configs.push_back({grid, block, smem, stream});
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* smem, void* stream) {
  count_call();
  if (t_configs.empty()) return cudaErrorMissingConfiguration;
  const CallConfig c = t_configs.back();
  t_configs.pop_back();
  *grid = c.grid;
  *block = c.block;
  *smem = c.smem;
  *static_cast<void**>(stream) = c.stream;
  return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* fun) {
  count_call();
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(fun));
  return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args, size_t smem,
                               cudaStream_t stream) {
  count_call();
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.kernels.find(reinterpret_cast<const void*>(kernel));
  if (it == s.kernels.end()) {
    finding("launch", "a kernel that was never registered");
    return set_error(cudaErrorInvalidDeviceFunction);
  }
  Kernel& k = it->second;
  const char* name = k.name.c_str();
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0 || threads > 1024 ||
      block.z > 64 || grid.y > 65535 || grid.z > 65535 || grid.x > 2147483647u) {
    finding("launch", "%s: grid (%u, %u, %u), block (%u, %u, %u) is beyond the card's limits (invalid configuration)",
            name, grid.x, grid.y, grid.z, block.x, block.y, block.z);
    if (Stream* c = capturing(stream)) c->invalidated = true;
    return set_error(cudaErrorInvalidConfiguration);
  }
  if (smem > static_cast<size_t>(k.max_dynamic_smem)) {
    finding("launch", "%s: %zu bytes of dynamic shared memory, %d allowed (cudaFuncSetAttribute)", name, smem,
            k.max_dynamic_smem);
    if (Stream* c = capturing(stream)) c->invalidated = true;
    return set_error(cudaErrorInvalidValue);
  }
  check_stream(stream, name);
  for (size_t i = 0; i < k.pointer.size(); ++i) {
    if (!k.pointer[i]) continue;  // (a `char const*` is an op's name, kept for an error message, never read)
    const void* p = *static_cast<void* const*>(args[i]);
    if (p != nullptr && holding(p, 0) == nullptr) {
      finding("pointer", "%s: parameter %zu is %p, in no live device or pinned allocation", name, i + 1, p);
    }
  }
  std::vector<const void*> inside;
  inside.swap(t_struct_pointers);
  for (const void* p : inside) {
    if (p != nullptr && holding(p, 0) == nullptr) {
      finding("pointer", "%s: its parameter block holds %p, in no live device or pinned allocation", name, p);
    }
  }
  Node n{NodeKind::kKernel, &k, nullptr, nullptr, 0, 0, {}};
  if (Stream* c = capturing(stream)) {
    for (size_t i = 0; i < k.pointer.size(); ++i) {
      if (!k.pointer[i]) continue;
      const void* p = *static_cast<void* const*>(args[i]);
      if (const auto* h = holding(p, 0)) n.pointers.emplace_back(p, h->second.serial);
    }
    for (const void* p : inside) {
      if (const auto* h = holding(p, 0)) n.pointers.emplace_back(p, h->second.serial);
    }
    c->graph->nodes.push_back(std::move(n));
    return cudaSuccess;
  }
  run_node(n);
  return cudaSuccess;
}

// The library's note of the pointers inside the next launch's struct argument (ops/cuda/launch.cuh:
// a weak symbol there, defined only here).
void tg_cuda_dry_pointers(const void* const* ptrs, int n) { t_struct_pointers.assign(ptrs, ptrs + n); }

// ---- Devices ----------------------------------------------------------------------------------------
cudaError_t cudaGetDeviceCount(int* count) {
  count_call();
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  count_call();
  return device == 0 ? cudaSuccess : set_error(cudaErrorInvalidDevice);
}
cudaError_t cudaGetDevice(int* device) {
  count_call();
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  count_call();
  if (device != 0) return set_error(cudaErrorInvalidDevice);
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof p->name, "NVIDIA H100 80GB HBM3 (tapegrad dry run: no kernel runs)");
  p->totalGlobalMem = kTotalMemory;
  p->sharedMemPerBlock = kSmemDefault;
  p->sharedMemPerBlockOptin = kSmemOptin;
  p->sharedMemPerMultiprocessor = 233472;
  p->regsPerBlock = 65536;
  p->regsPerMultiprocessor = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsPerMultiProcessor = 2048;
  p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647;
  p->maxGridSize[1] = p->maxGridSize[2] = 65535;
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = 132;
  p->l2CacheSize = 50 << 20;
  p->memoryBusWidth = 5120;
  p->unifiedAddressing = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  count_call();
  if (device != 0) return set_error(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = kSmemDefault; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = kSmemOptin; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = 233472; break;
    case cudaDevAttrMultiProcessorCount: *value = 132; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrMaxRegistersPerBlock: *value = 65536; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = 2048; break;
    case cudaDevAttrMaxGridDimX: *value = 2147483647; break;
    case cudaDevAttrMaxGridDimY:
    case cudaDevAttrMaxGridDimZ: *value = 65535; break;
    case cudaDevAttrL2CacheSize: *value = 50 << 20; break;
    default: *value = 0; break;
  }
  return cudaSuccess;
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, const void* func) {
  count_call();
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.kernels.find(func);
  if (it == s.kernels.end()) return set_error(cudaErrorInvalidDeviceFunction);
  *a = cudaFuncAttributes{};
  a->maxThreadsPerBlock = 1024;
  a->numRegs = 32;
  a->ptxVersion = 90;
  a->binaryVersion = 90;
  a->maxDynamicSharedSizeBytes = it->second.max_dynamic_smem;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  count_call();
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.kernels.find(func);
  if (it == s.kernels.end()) return set_error(cudaErrorInvalidDeviceFunction);
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || value > kSmemOptin) {
      finding("launch", "%s: asks for %d bytes of dynamic shared memory; the card allows %d", it->second.name.c_str(),
              value, kSmemOptin);
      return set_error(cudaErrorInvalidValue);
    }
    it->second.max_dynamic_smem = value;
  }
  return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, const void*, int block_size, size_t,
                                                                   unsigned) {
  count_call();
  *blocks = block_size > 0 ? std::max(1, 2048 / block_size) : 0;
  return cudaSuccess;
}

// ---- Errors -----------------------------------------------------------------------------------------
cudaError_t cudaGetLastError() {
  count_call();
  const cudaError_t e = t_last;
  t_last = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() {
  count_call();
  return t_last;
}

const char* cudaGetErrorString(cudaError_t e) {
  count_call();
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    default: return "unknown error (dry run)";
  }
}
const char* cudaGetErrorName(cudaError_t e) {
  count_call();
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    default: return "cudaErrorUnknown";
  }
}

// ---- Memory -----------------------------------------------------------------------------------------
cudaError_t cudaMalloc(void** p, size_t bytes) {
  count_call();
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  *p = nullptr;
  if (cudaError_t e = unsafe_in_capture("cudaMalloc"); e != cudaSuccess) return e;
  if (bytes > kTotalMemory) return set_error(cudaErrorMemoryAllocation);
  const size_t n = std::max<size_t>(256, (bytes + 255) / 256 * 256);  // (rounded as the driver does)
  if (n > kTotalMemory - s.device_bytes) return set_error(cudaErrorMemoryAllocation);
  // Zeroed, as nothing else writes it; large blocks mapped, so untouched pages cost no memory.
  void* q = nullptr;
  size_t mapped = 0;
  if (n >= (size_t{1} << 20)) {
    q = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (q == MAP_FAILED) return set_error(cudaErrorMemoryAllocation);
    mapped = n;
  } else {
    q = std::aligned_alloc(256, n);
    if (q == nullptr) return set_error(cudaErrorMemoryAllocation);
    std::memset(q, 0, n);
  }
  s.allocs[reinterpret_cast<uintptr_t>(q)] = {bytes, false, mapped, ++s.serials};
  s.device_bytes += n;
  *p = q;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  count_call();
  if (p == nullptr) return cudaSuccess;
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  if (cudaError_t e = unsafe_in_capture("cudaFree"); e != cudaSuccess) return e;
  auto it = s.allocs.find(reinterpret_cast<uintptr_t>(p));
  if (it == s.allocs.end() || it->second.pinned) {
    finding("memory", "cudaFree(%p): not the start of a live cudaMalloc allocation", p);
    return set_error(cudaErrorInvalidValue);
  }
  s.device_bytes -= std::max<size_t>(256, (it->second.bytes + 255) / 256 * 256);
  if (it->second.mapped != 0) {
    ::munmap(p, it->second.mapped);
  } else {
    std::free(p);
  }
  s.allocs.erase(it);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t bytes) {
  count_call();
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  *p = nullptr;
  if (cudaError_t e = unsafe_in_capture("cudaMallocHost"); e != cudaSuccess) return e;
  void* q = std::calloc(1, std::max<size_t>(bytes, 1));
  if (q == nullptr) return set_error(cudaErrorMemoryAllocation);
  s.allocs[reinterpret_cast<uintptr_t>(q)] = {bytes, true, 0, ++s.serials};
  *p = q;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  count_call();
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  if (cudaError_t e = unsafe_in_capture("cudaMemGetInfo"); e != cudaSuccess) return e;
  *total = kTotalMemory;
  *free_bytes = kTotalMemory - s.device_bytes;
  return cudaSuccess;
}

namespace {
// Checks one copy's sides; queues it into a capture or runs it.
cudaError_t copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream, const char* call) {
  State& s = st();
  if (bytes == 0) return cudaSuccess;
  check_stream(stream, call);
  const bool dst_dev = is_device(dst), src_dev = is_device(src);
  const bool want_dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool want_src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind != cudaMemcpyDefault && (dst_dev != want_dst_dev || src_dev != want_src_dev)) {
    finding("copy", "%s of %zu bytes from %p (%s) to %p (%s) does not match its kind %d", call, bytes, src,
            src_dev ? "device" : "host", dst, dst_dev ? "device" : "host", static_cast<int>(kind));
    return set_error(cudaErrorInvalidValue);
  }
  if ((dst_dev && holding(dst, bytes) == nullptr) || (src_dev && holding(src, bytes) == nullptr)) {
    finding("copy", "%s of %zu bytes from %p to %p runs past the end of its allocation", call, bytes, src, dst);
    return set_error(cudaErrorInvalidValue);
  }
  if (dst_dev && !src_dev) s.copies_to_device += 1;
  if (src_dev && !dst_dev) s.copies_to_host += 1;
  if (Stream* c = capturing(stream)) {
    const bool pageable = (!dst_dev && holding(dst, bytes) == nullptr) || (!src_dev && holding(src, bytes) == nullptr);
    if (pageable) {
      finding("capture", "%s from or to pageable host memory while capturing a graph", call);
      c->invalidated = true;
      return set_error(cudaErrorStreamCaptureUnsupported);
    }
    c->graph->nodes.push_back({NodeKind::kCopy, nullptr, dst, src, bytes, 0, {}});
    return cudaSuccess;
  }
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}
}  // namespace

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  count_call();
  std::lock_guard<std::mutex> lock(st().mu);
  return copy(dst, src, bytes, kind, stream, "cudaMemcpyAsync");
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t stream) {
  count_call();
  std::lock_guard<std::mutex> lock(st().mu);
  if (width > dpitch || width > spitch) {
    finding("copy", "cudaMemcpy2DAsync: rows of %zu bytes wider than the pitches %zu / %zu", width, dpitch, spitch);
    return set_error(cudaErrorInvalidPitchValue);
  }
  for (size_t r = 0; r < height; ++r) {
    const cudaError_t e = copy(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width,
                               kind, stream, "cudaMemcpy2DAsync");
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream) {
  count_call();
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  if (bytes == 0) return cudaSuccess;
  check_stream(stream, "cudaMemsetAsync");
  if (!is_device(p) || holding(p, bytes) == nullptr) {
    finding("copy", "cudaMemsetAsync of %zu bytes at %p: not inside one live device allocation", bytes, p);
    return set_error(cudaErrorInvalidValue);
  }
  if (Stream* c = capturing(stream)) {
    c->graph->nodes.push_back({NodeKind::kMemset, nullptr, p, nullptr, bytes, value, {}});
    return cudaSuccess;
  }
  std::memset(p, value, bytes);
  return cudaSuccess;
}

// ---- Streams, events, graphs ------------------------------------------------------------------------
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  count_call();
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  auto* x = new Stream();
  s.streams.push_back(x);
  *stream = reinterpret_cast<cudaStream_t>(x);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  count_call();
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  if (Stream* c = capturing(stream)) {
    finding("capture", "cudaStreamSynchronize on a stream that captures a graph");
    c->invalidated = true;
    return set_error(cudaErrorStreamCaptureUnsupported);
  }
  if (cudaError_t e = unsafe_in_capture("cudaStreamSynchronize"); e != cudaSuccess) return e;
  s.syncs += 1;
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  count_call();
  std::swap(t_mode, *mode);
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  count_call();
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  Stream* x = stream_of(stream);
  if (x == nullptr) {
    finding("capture", "cudaStreamBeginCapture on the legacy default stream");
    return set_error(cudaErrorStreamCaptureUnsupported);
  }
  if (x->capturing) {
    finding("capture", "cudaStreamBeginCapture on a stream already capturing");
    return set_error(cudaErrorIllegalState);
  }
  x->capturing = true;
  x->invalidated = false;
  x->mode = mode;
  x->owner = std::this_thread::get_id();
  x->graph = new Graph();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  count_call();
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  Stream* x = stream_of(stream);
  *graph = nullptr;
  if (x == nullptr || !x->capturing) return set_error(cudaErrorIllegalState);
  if (x->owner != std::this_thread::get_id() && x->mode != cudaStreamCaptureModeRelaxed) {
    finding("capture", "cudaStreamEndCapture from another thread than the one that began it");
    return set_error(cudaErrorStreamCaptureWrongThread);
  }
  x->capturing = false;
  Graph* g = x->graph;
  x->graph = nullptr;
  if (x->invalidated) {
    delete g;
    return set_error(cudaErrorStreamCaptureInvalidated);
  }
  *graph = reinterpret_cast<cudaGraph_t>(g);
  return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  count_call();
  const auto* g = reinterpret_cast<const Graph*>(graph);
  if (g == nullptr) return set_error(cudaErrorInvalidValue);
  if (nodes != nullptr) return set_error(cudaErrorNotSupported);  // (only the count is asked for)
  *count = g->nodes.size();
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  count_call();
  const auto* g = reinterpret_cast<const Graph*>(graph);
  if (g == nullptr) return set_error(cudaErrorInvalidValue);
  *exec = reinterpret_cast<cudaGraphExec_t>(new Graph(*g));
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  count_call();
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  const auto* g = reinterpret_cast<const Graph*>(exec);
  if (g == nullptr) return set_error(cudaErrorInvalidValue);
  check_stream(stream, "cudaGraphLaunch");
  if (capturing(stream) != nullptr) {
    finding("capture", "cudaGraphLaunch into a capture");
    return set_error(cudaErrorStreamCaptureUnsupported);
  }
  s.graph_launches += 1;
  for (const Node& n : g->nodes) {
    for (const auto& [p, serial] : n.pointers) {
      const auto* h = holding(p, 0);
      if (h == nullptr || h->second.serial != serial) {
        finding("graph", "a replayed %s reads or writes %p, freed after the capture", n.kernel->name.c_str(), p);
        return set_error(cudaErrorIllegalAddress);
      }
    }
    if ((n.kind != NodeKind::kKernel) &&
        (holding(n.dst, n.bytes) == nullptr || (n.src != nullptr && holding(n.src, n.bytes) == nullptr))) {
      finding("graph", "a replayed copy or memset of %zu bytes at %p: its memory was freed after the capture", n.bytes,
              n.dst);
      return set_error(cudaErrorIllegalAddress);
    }
    run_node(n);
  }
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  count_call();
  delete reinterpret_cast<Graph*>(graph);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  count_call();
  delete reinterpret_cast<Graph*>(exec);
  return cudaSuccess;
}

namespace {
struct Event {
  double ms = 0;
};
}  // namespace

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  count_call();
  *event = reinterpret_cast<cudaEvent_t>(new Event());
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  count_call();
  std::lock_guard<std::mutex> lock(st().mu);
  check_stream(stream, "cudaEventRecord");
  reinterpret_cast<Event*>(event)->ms = now_ms();  // host time: no kernel runs
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  count_call();
  *ms = static_cast<float>(reinterpret_cast<Event*>(end)->ms - reinterpret_cast<Event*>(start)->ms);
  return cudaSuccess;
}

}  // extern "C"

// ---- cuBLASLt ---------------------------------------------------------------------------------------
// This library's file is named libcublasLt.so.13, so tapegrad's dlopen of cuBLASLt finds it (already
// loaded, by its soname). A product is checked as cuBLASLt would refuse it — types, shapes, leading
// dimensions — and each operand's bytes must lie in one live allocation; nothing is computed.
#include <cublasLt.h>

namespace {

struct LtLayout {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;
};

struct LtDesc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int bias_type = -1;
};

size_t elem_size(cudaDataType t) {
  switch (t) {
    case CUDA_R_64F: return 8;
    case CUDA_R_32F: return 4;
    case CUDA_R_16BF:
    case CUDA_R_16F: return 2;
    default: return 0;
  }
}

const char* type_name(int t) {
  switch (t) {
    case CUDA_R_64F: return "64F";
    case CUDA_R_32F: return "32F";
    case CUDA_R_16BF: return "16BF";
    case CUDA_R_16F: return "16F";
    default: return "?";
  }
}

// The combinations of cublasLtMatmul's type table that tapegrad may ask for.
bool supported_types(const LtDesc& d, cudaDataType ab, cudaDataType cd) {
  switch (d.compute) {
    case CUBLAS_COMPUTE_64F: return d.scale == CUDA_R_64F && ab == CUDA_R_64F && cd == CUDA_R_64F;
    case CUBLAS_COMPUTE_32F_FAST_TF32: return d.scale == CUDA_R_32F && ab == CUDA_R_32F && cd == CUDA_R_32F;
    case CUBLAS_COMPUTE_32F:
      return d.scale == CUDA_R_32F && ((ab == CUDA_R_32F && cd == CUDA_R_32F) ||
                                       (ab == CUDA_R_16BF && (cd == CUDA_R_16BF || cd == CUDA_R_32F)));
    default: return false;
  }
}

// Whether cuBLASLt would take this product; says why not in `why`.
bool valid_product(const LtDesc& d, const LtLayout& a, const LtLayout& b, const LtLayout& c, const LtLayout& dd,
                   char* why, size_t n) {
  if (!supported_types(d, a.type, c.type) || a.type != b.type || c.type != dd.type) {
    std::snprintf(why, n, "types A %s, B %s, C %s, D %s with compute %d, scale %s: not a combination cuBLASLt runs",
                  type_name(a.type), type_name(b.type), type_name(c.type), type_name(dd.type), static_cast<int>(d.compute),
                  type_name(d.scale));
    return false;
  }
  for (const LtLayout* l : {&a, &b, &c, &dd}) {
    if (l->ld < static_cast<int64_t>(std::max<uint64_t>(l->rows, 1))) {
      std::snprintf(why, n, "a %llu x %llu operand with leading dimension %lld (column-major: ld >= rows)",
                    static_cast<unsigned long long>(l->rows), static_cast<unsigned long long>(l->cols),
                    static_cast<long long>(l->ld));
      return false;
    }
  }
  const uint64_t m = d.ta == CUBLAS_OP_N ? a.rows : a.cols, k = d.ta == CUBLAS_OP_N ? a.cols : a.rows;
  const uint64_t kb = d.tb == CUBLAS_OP_N ? b.rows : b.cols, nn = d.tb == CUBLAS_OP_N ? b.cols : b.rows;
  if (k != kb || c.rows != m || c.cols != nn || dd.rows != m || dd.cols != nn) {
    std::snprintf(why, n, "op(A) %llu x %llu times op(B) %llu x %llu into C %llu x %llu, D %llu x %llu: shapes disagree",
                  static_cast<unsigned long long>(m), static_cast<unsigned long long>(k),
                  static_cast<unsigned long long>(kb), static_cast<unsigned long long>(nn),
                  static_cast<unsigned long long>(c.rows), static_cast<unsigned long long>(c.cols),
                  static_cast<unsigned long long>(dd.rows), static_cast<unsigned long long>(dd.cols));
    return false;
  }
  if (a.batch != c.batch || b.batch != c.batch || dd.batch != c.batch || c.batch < 1) {
    std::snprintf(why, n, "batch counts A %d, B %d, C %d, D %d disagree", a.batch, b.batch, c.batch, dd.batch);
    return false;
  }
  for (const LtLayout* l : {&a, &b, &c, &dd}) {
    if (l->stride < 0) {
      std::snprintf(why, n, "a negative batch stride %lld", static_cast<long long>(l->stride));
      return false;
    }
  }
  if (dd.batch > 1 && static_cast<uint64_t>(dd.stride) < (dd.cols - 1) * static_cast<uint64_t>(dd.ld) + dd.rows) {
    std::snprintf(why, n, "a batch of %d outputs %lld elements apart, each %llu long: they overlap", dd.batch,
                  static_cast<long long>(dd.stride),
                  static_cast<unsigned long long>((dd.cols - 1) * static_cast<uint64_t>(dd.ld) + dd.rows));
    return false;
  }
  const bool bias = d.epilogue == CUBLASLT_EPILOGUE_BIAS || d.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  if (bias && c.batch != 1) {
    std::snprintf(why, n, "a bias epilogue on a batch of %d", c.batch);
    return false;
  }
  if (bias && d.bias_type != -1 && d.bias_type != dd.type && d.bias_type != CUDA_R_32F) {
    std::snprintf(why, n, "a %s bias for a %s output", type_name(d.bias_type), type_name(dd.type));
    return false;
  }
  return true;
}

// Bytes a layout spans from its pointer.
size_t span(const LtLayout& l) {
  if (l.rows == 0 || l.cols == 0) return 0;
  const size_t one = ((l.cols - 1) * static_cast<size_t>(l.ld) + l.rows) * elem_size(l.type);
  return one + static_cast<size_t>(l.batch - 1) * static_cast<size_t>(l.stride) * elem_size(l.type);
}

// The four minimum alignments a search was told (cuBLASLt assumes 256 bytes where it is not).
struct LtPref {
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D
};

constexpr uint64_t kAlgoMagic = 0x7467647279616c67;  // an algorithm this library's search returned

uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ULL; }
// What an algorithm is chosen for: the descriptor (but its bias pointer) and the four layouts.
uint64_t product_hash(const LtDesc& d, const LtLayout* const (&ls)[4]) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (uint64_t v : {uint64_t(d.compute), uint64_t(d.scale), uint64_t(d.ta), uint64_t(d.tb), uint64_t(d.epilogue),
                     uint64_t(static_cast<int64_t>(d.bias_type))})
    h = mix(h, v);
  for (const LtLayout* l : ls) {
    for (uint64_t v : {uint64_t(l->type), l->rows, l->cols, uint64_t(l->ld), uint64_t(l->batch), uint64_t(l->stride)})
      h = mix(h, v);
  }
  return h;
}

// The largest power of two (up to 256) dividing a pointer and, in a batch, its stride in bytes.
uint32_t alignment_of(const void* p, const LtLayout& l) {
  uint64_t v = reinterpret_cast<uintptr_t>(p) | 256;
  if (l.batch > 1) v |= static_cast<uint64_t>(l.stride) * elem_size(l.type);
  return static_cast<uint32_t>(v & (~v + 1));
}

Kernel* lt_kernel() {
  static Kernel* k = [] {
    Kernel* x = &st().kernels[reinterpret_cast<const void*>(&lt_kernel)];
    x->name = "cublasLtMatmul";
    return x;
  }();
  return k;
}

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  count_call();
  static int token;
  *handle = reinterpret_cast<cublasLtHandle_t>(&token);
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasLtGetStatusString(cublasStatus_t s) {
  count_call();
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value (dry run)";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported (dry run)";
    default: return "an error (dry run)";
  }
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  count_call();
  auto* d = new LtDesc{compute, scale};
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t bytes) {
  count_call();
  auto* d = reinterpret_cast<LtDesc*>(desc);
  auto take = [&](auto& field) {
    if (bytes != sizeof field) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&field, buf, bytes);
    return CUBLAS_STATUS_SUCCESS;
  };
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return take(d->ta);
    case CUBLASLT_MATMUL_DESC_TRANSB: return take(d->tb);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return take(d->epilogue);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return take(d->bias);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return take(d->bias_type);
    default: return CUBLAS_STATUS_SUCCESS;
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
  count_call();
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(new LtLayout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t bytes) {
  count_call();
  auto* l = reinterpret_cast<LtLayout*>(layout);
  if (attr == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && bytes == sizeof l->batch) std::memcpy(&l->batch, buf, bytes);
  if (attr == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET && bytes == sizeof l->stride) std::memcpy(&l->stride, buf, bytes);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  count_call();
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(new LtPref());
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t bytes) {
  count_call();
  auto* p = reinterpret_cast<LtPref*>(pref);
  const int i = attr == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES   ? 0
                : attr == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES ? 1
                : attr == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES ? 2
                : attr == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES ? 3
                                                                     : -1;
  if (i >= 0) {
    if (bytes != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&p->align[i], buf, bytes);
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  count_call();
  delete reinterpret_cast<LtPref*>(pref);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* found) {
  count_call();
  char why[512];
  std::lock_guard<std::mutex> lock(st().mu);
  if (!valid_product(*reinterpret_cast<LtDesc*>(desc), *reinterpret_cast<LtLayout*>(a), *reinterpret_cast<LtLayout*>(b),
                     *reinterpret_cast<LtLayout*>(c), *reinterpret_cast<LtLayout*>(d), why, sizeof why)) {
    finding("cublasLt", "algorithm search: %s", why);
    *found = 0;
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  *found = requested > 0 ? 1 : 0;
  if (*found) {  // the algorithm remembers what it was chosen for, as a real one's kernel depends on it
    results[0] = cublasLtMatmulHeuristicResult_t{};
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    const LtLayout* const ls[4] = {reinterpret_cast<LtLayout*>(a), reinterpret_cast<LtLayout*>(b),
                                   reinterpret_cast<LtLayout*>(c), reinterpret_cast<LtLayout*>(d)};
    const LtPref& p = *reinterpret_cast<LtPref*>(pref);
    uint64_t* data = results[0].algo.data;
    data[0] = kAlgoMagic;
    data[1] = product_hash(*reinterpret_cast<LtDesc*>(desc), ls);
    for (int i = 0; i < 4; ++i) data[2 + i] = p.align[i];
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc, const void*, const void* A,
                              cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b, const void*,
                              const void* C, cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes,
                              cudaStream_t stream) {
  count_call();
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  const LtDesc& dd = *reinterpret_cast<LtDesc*>(desc);
  const LtLayout &la = *reinterpret_cast<LtLayout*>(a), &lb = *reinterpret_cast<LtLayout*>(b),
                 &lc = *reinterpret_cast<LtLayout*>(c), &ld = *reinterpret_cast<LtLayout*>(d);
  char why[512];
  if (!valid_product(dd, la, lb, lc, ld, why, sizeof why)) {
    finding("cublasLt", "matmul: %s", why);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (algo != nullptr) {  // (null: cuBLASLt searches itself, with default preferences)
    const LtLayout* const ls[4] = {&la, &lb, &lc, &ld};
    if (algo->data[0] != kAlgoMagic || algo->data[1] != product_hash(dd, ls)) {
      finding("cublasLt", "matmul: %s", algo->data[0] != kAlgoMagic
                                            ? "an algorithm cublasLtMatmulAlgoGetHeuristic did not return"
                                            : "an algorithm chosen for another descriptor or other layouts");
      return CUBLAS_STATUS_INVALID_VALUE;
    }
    const void* ptrs[4] = {A, B, C, D};
    for (int i = 0; i < 4; ++i) {
      const uint32_t have = alignment_of(ptrs[i], *ls[i]);
      if (have < algo->data[2 + i]) {
        finding("cublasLt", "matmul: operand %c at %p is aligned to %u bytes, the algorithm was chosen for %llu",
                "ABCD"[i], ptrs[i], have, static_cast<unsigned long long>(algo->data[2 + i]));
        return CUBLAS_STATUS_INVALID_VALUE;
      }
    }
  }
  check_stream(stream, "cublasLtMatmul");
  struct Operand {
    const char* name;
    const void* p;
    size_t bytes;
  };
  const bool bias = dd.epilogue == CUBLASLT_EPILOGUE_BIAS || dd.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  const size_t bias_elem = elem_size(static_cast<cudaDataType>(dd.bias_type == -1 ? ld.type : dd.bias_type));
  const Operand ops[] = {{"A", A, span(la)}, {"B", B, span(lb)}, {"C", C, span(lc)}, {"D", D, span(ld)},
                         {"bias", dd.bias, bias ? ld.rows * bias_elem : 0},
                         {"workspace", workspace, workspace_bytes}};
  for (const Operand& o : ops) {
    if (o.bytes == 0) continue;
    if (o.p == nullptr || !is_device(o.p) || holding(o.p, o.bytes) == nullptr) {
      finding("cublasLt", "matmul: %s at %p spans %zu bytes, not inside one live device allocation", o.name, o.p,
              o.bytes);
      return CUBLAS_STATUS_INVALID_VALUE;
    }
  }
  Node n{NodeKind::kKernel, lt_kernel(), nullptr, nullptr, 0, 0, {}};
  if (Stream* x = capturing(stream)) {
    for (const Operand& o : ops) {
      if (o.bytes == 0) continue;
      if (const auto* h = holding(o.p, 0)) n.pointers.emplace_back(o.p, h->second.serial);
    }
    x->graph->nodes.push_back(n);
  } else {
    run_node(n);
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
