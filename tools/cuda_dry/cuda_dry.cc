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
// Values are never computed: what a program reads back is zeros or what it uploaded. Except built
// with TG_CUDA_EMU (-DTG_CUDA_EMU=ON, `./tg.sh emu`): then the kernels of the .cu files, compiled by
// the host compiler (emu/emu.h), arrive through tg_emu_launch and run here, each CUDA thread a fiber
// (the executor below), with the same checks; cuBLASLt's products are computed by a plain loop.
// Emulated, device memory starts as 0xff bytes (NaN) and each allocation, like each block's dynamic
// shared memory, ends against an unmapped page: a kernel's access past its end is reported (the
// kernel, the thread, what it overran) as it faults.
#include <cuda_runtime_api.h>
#if defined(TG_CUDA_EMU)
#include "emu/emu_abi.h"
#endif

#include <cxxabi.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

constexpr size_t kTotalMemory = size_t{80} << 30;  // what an H100 SXM reports
constexpr int kSmemOptin = 232448;                 // sm_90's largest dynamic shared memory a block may ask for
constexpr int kSmemDefault = 48 << 10;
constexpr size_t kPage = 4096;

struct Kernel {
  std::string name;             // demangled
  std::vector<bool> pointer;    // which parameters are pointers
  int max_dynamic_smem = kSmemDefault;
  uint64_t launches = 0;
};

enum class NodeKind { kKernel, kMemset, kCopy };
struct Node {
  NodeKind kind = NodeKind::kKernel;
  Kernel* kernel = nullptr;
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  int value = 0;
  // A kernel's pointer parameters (a product's operands) and the serial number of the allocation
  // each was in at the capture: at each replay each must still be in that allocation.
  std::vector<std::pair<const void*, uint64_t>> pointers;
  // The emulator's work (TG_CUDA_EMU): one CUDA thread's body over grid x block, or (host) the whole
  // of a product or a library's sort.
  std::shared_ptr<std::function<void()>> work;
  bool host = false;
  dim3 grid, block;
  size_t smem = 0;
};

Node make_node(NodeKind kind, Kernel* kernel, void* dst = nullptr, const void* src = nullptr, size_t bytes = 0,
               int value = 0) {
  Node n;
  n.kind = kind;
  n.kernel = kernel;
  n.dst = dst;
  n.src = src;
  n.bytes = bytes;
  n.value = value;
  return n;
}

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
  uintptr_t base = 0;   // where the mapping starts, when not at the allocation (emulated: the guard page's)
};

struct State {
  std::mutex mu;
  std::map<uintptr_t, Alloc> allocs;
  size_t device_bytes = 0;
  std::map<const void*, Kernel> kernels;  // by host stub
  std::vector<Stream*> streams;
  std::map<std::string, uint64_t> findings;  // by kind
  uint64_t launches = 0, graph_launches = 0, syncs = 0, copies_to_host = 0, copies_to_device = 0;
  uint64_t emu_threads = 0, emu_switches = 0;  // the emulator's CUDA threads run, and switches between them
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

void run_grid(const Node& n);  // the emulator's executor (below; a no-op in the dry run)

void run_node(const Node& n) {
  switch (n.kind) {
    case NodeKind::kKernel:
      n.kernel->launches += 1;
      st().launches += 1;
      if (n.work != nullptr) {
        if (n.host) {
          (*n.work)();
        } else {
          run_grid(n);
        }
      }
      break;
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
               "\"copies_to_host\": %llu, \"copies_to_device\": %llu, \"emu_threads\": %llu, \"emu_switches\": %llu,\n"
               " \"findings\": {",
               static_cast<unsigned long long>(g_calls.load()), static_cast<unsigned long long>(s.launches),
               static_cast<unsigned long long>(s.graph_launches), static_cast<unsigned long long>(s.syncs),
               static_cast<unsigned long long>(s.copies_to_host), static_cast<unsigned long long>(s.copies_to_device),
               static_cast<unsigned long long>(s.emu_threads), static_cast<unsigned long long>(s.emu_switches));
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

// A kernel launch's checks (its configuration, stream and pointers: each parameter given as
// (position, value), and those the library named inside a struct argument); then queued into the
// stream's capture or run. Callers hold the lock.
cudaError_t queue_launch(Node n, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                         const std::vector<std::pair<size_t, const void*>>& params) {
  const Kernel& k = *n.kernel;
  const char* name = k.name.c_str();
  std::vector<const void*> inside;
  inside.swap(t_struct_pointers);
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
  for (const auto& [i, p] : params) {
    if (p != nullptr && holding(p, 0) == nullptr) {
      finding("pointer", "%s: parameter %zu is %p, in no live device or pinned allocation", name, i, p);
    }
  }
  for (const void* p : inside) {
    if (p != nullptr && holding(p, 0) == nullptr) {
      finding("pointer", "%s: its parameter block holds %p, in no live device or pinned allocation", name, p);
    }
  }
  n.grid = grid;
  n.block = block;
  n.smem = smem;
  if (Stream* c = capturing(stream)) {
    for (const auto& [i, p] : params) {
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

}  // namespace

// ---- The emulator's executor (TG_CUDA_EMU) ------------------------------------------------------------
// Each CUDA thread of a block is a fiber of the host thread that runs the launch (under the state's
// lock, so one block at a time): it runs until it finishes or waits at a barrier, then the next one
// runs; a barrier opens when every thread of the block (of the warp) that has not finished waits at
// it. Blocks run one after another, threads in index order (TG_CUDA_EMU_REVERSE=1: both reversed,
// which shows a kernel whose result depends on that order).
#if defined(TG_CUDA_EMU)
TgEmuNow tg_emu_now{};  // (declared extern "C" in emu_abi.h)
// Saves this context (the callee-saved registers; the floating-point control state is the thread's,
// shared by its fibers), resumes the other.
extern "C" void tg_emu_swap(void** save_sp, void* load_sp);
asm(R"(
  .text
  .globl tg_emu_swap
  .hidden tg_emu_swap
  .type tg_emu_swap, @function
tg_emu_swap:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size tg_emu_swap, .-tg_emu_swap
)");

namespace {

enum class Wait : uint8_t { kReady, kBlock, kWarp, kDone };
struct Fiber {
  void* sp = nullptr;
  Wait wait = Wait::kReady;
  uint3 tid{};
  unsigned lane = 0, warp = 0;
  int or_value = 0;
};

constexpr size_t kStackBytes = size_t{64} << 10;
constexpr size_t kGuardBytes = kPage;  // below each stack, unmapped: an overflow faults

struct Executor {
  std::vector<Fiber> fibers;
  char* stacks = nullptr;
  size_t stack_slots = 0;
  void* scheduler_sp = nullptr;
  Fiber* current = nullptr;
  const std::function<void()>* body = nullptr;
  std::vector<uint64_t> warp_in, warp_out;  // [warp][lane][16]
  std::vector<unsigned> warp_waiting, warp_alive;  // lanes at a collective; lanes not finished
  std::vector<unsigned> ready, next;              // fibers to run this round; released for the next
  size_t ready_at = 0;                            // the next of `ready` to run
  unsigned threads = 0, alive = 0, at_block = 0;  // the block's: threads, not finished, at __syncthreads
  int block_or = 0;
  // The block's dynamic shared memory: its end (rounded up to 128 bytes) against an unmapped page.
  char* shared_map = nullptr;
  size_t shared_cap = 0;  // bytes mapped before the guard page
  char* shared = nullptr;
  size_t shared_bytes = 0;
  const char* name = "";
  bool reverse = std::getenv("TG_CUDA_EMU_REVERSE") != nullptr && std::getenv("TG_CUDA_EMU_REVERSE")[0] == '1';
};
Executor& ex() {
  static Executor* e = new Executor();
  return *e;
}

void switch_from(Fiber* me);

[[noreturn]] void fiber_main() {  // (entered by the first switch to a fiber: never called)
  Executor& e = ex();
  (*e.body)();
  e.current->wait = Wait::kDone;
  switch_from(e.current);
  __builtin_unreachable();
}

[[noreturn]] void emu_fatal(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void emu_fatal(const char* fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "cuda_emu: %s\n", line);
  std::fflush(stderr);
  std::abort();
}

void ensure_stacks(size_t n) {
  Executor& e = ex();
  if (e.stack_slots >= n) return;
  if (e.stacks != nullptr) ::munmap(e.stacks, e.stack_slots * (kStackBytes + kGuardBytes));
  const size_t bytes = n * (kStackBytes + kGuardBytes);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) emu_fatal("no memory for %zu thread stacks", n);
  e.stacks = static_cast<char*>(p);
  e.stack_slots = n;
  for (size_t i = 0; i < n; ++i) ::mprotect(e.stacks + i * (kStackBytes + kGuardBytes), kGuardBytes, PROT_NONE);
}

void ensure_shared(size_t smem) {
  Executor& e = ex();
  const size_t body = (smem + 127) / 128 * 128;
  if (body > e.shared_cap) {
    if (e.shared_map != nullptr) ::munmap(e.shared_map, e.shared_cap + kPage);
    const size_t cap = (body + kPage - 1) / kPage * kPage;
    void* p = ::mmap(nullptr, cap + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) emu_fatal("no memory for %zu bytes of shared memory", smem);
    ::mprotect(static_cast<char*>(p) + cap, kPage, PROT_NONE);
    e.shared_map = static_cast<char*>(p);
    e.shared_cap = cap;
  }
  e.shared = e.shared_map + e.shared_cap - body;
  e.shared_bytes = smem;
}

// A kernel's access that faults — past the end of a device allocation or of the block's dynamic
// shared memory (both end at an unmapped page), or off a thread's stack — is reported in one line
// naming the kernel, the thread and what it overran; then the process dies of the signal as usual.
// (Async-signal-safe enough: the process is going down, and the state is read without its lock,
// which the launching thread holds.)
void describe_fault(uintptr_t a, char* out, size_t size) {
  Executor& e = ex();
  const auto shared_guard = reinterpret_cast<uintptr_t>(e.shared_map) + e.shared_cap;  // (where ensure_shared put it)
  if (e.shared_map != nullptr && a >= shared_guard && a < shared_guard + kPage) {
    std::snprintf(out, size, "at offset %zu of its %zu bytes of dynamic shared memory (past their end)",
                  static_cast<size_t>(a - reinterpret_cast<uintptr_t>(e.shared)), e.shared_bytes);
    return;
  }
  const auto stacks = reinterpret_cast<uintptr_t>(e.stacks);
  if (e.stacks != nullptr && a >= stacks && a < stacks + e.stack_slots * (kStackBytes + kGuardBytes) &&
      (a - stacks) % (kStackBytes + kGuardBytes) < kGuardBytes) {
    std::snprintf(out, size, "off the end of its %zu KiB stack (deep recursion or a large local array)",
                  kStackBytes >> 10);
    return;
  }
  auto& allocs = st().allocs;
  auto it = allocs.upper_bound(a);
  if (it != allocs.begin()) {
    --it;
    const Alloc& m = it->second;
    if (!m.pinned && m.base != 0 && a < m.base + m.mapped) {
      std::snprintf(out, size, "at offset %zu of a %zu-byte device allocation at %p (past its end)",
                    static_cast<size_t>(a - it->first), m.bytes, reinterpret_cast<void*>(it->first));
      return;
    }
  }
  std::snprintf(out, size, "in no device allocation (on a GPU: an illegal address)");
}

thread_local bool t_fault_stack = false;

void on_fault(int sig, siginfo_t* info, void*) {
  Executor& e = ex();
  if (e.body != nullptr && e.current != nullptr) {
    char what[256], line[768];
    describe_fault(reinterpret_cast<uintptr_t>(info->si_addr), what, sizeof what);
    const Fiber* f = e.current;
    const int n = std::snprintf(line, sizeof line,
                                "cuda_emu: %s: thread (%u, %u, %u) of block (%u, %u, %u) touched %p, %s\n", e.name,
                                f->tid.x, f->tid.y, f->tid.z, tg_emu_now.block.x, tg_emu_now.block.y,
                                tg_emu_now.block.z, info->si_addr, what);
    if (n > 0) (void)!::write(2, line, std::min<size_t>(static_cast<size_t>(n), sizeof line - 1));
  }
  ::signal(sig, SIG_DFL);  // (the access runs again and the process dies of it)
}

// The fault handler, on a stack of its own (a fiber's may be what overflowed), for this thread.
void watch_faults() {
  if (t_fault_stack) return;
  t_fault_stack = true;
  static const bool installed = [] {
    struct sigaction a {};
    a.sa_sigaction = on_fault;
    a.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&a.sa_mask);
    ::sigaction(SIGSEGV, &a, nullptr);
    ::sigaction(SIGBUS, &a, nullptr);
    return true;
  }();
  (void)installed;
  stack_t ss{};
  ss.ss_size = size_t{64} << 10;
  ss.ss_sp = std::malloc(ss.ss_size);  // (kept for the thread's life)
  if (ss.ss_sp != nullptr) ::sigaltstack(&ss, nullptr);
}

// A fiber's first context: the registers tg_emu_swap restores, returning into fiber_main.
void* fresh_context(size_t slot) {
  // (each stack's top a different number of cache lines into its page: the fibers' live frames then
  // fall in different cache sets instead of all in the same few)
  char* top = ex().stacks + (slot + 1) * (kStackBytes + kGuardBytes) - (slot * 5 % 64) * 64;
  auto* sp = reinterpret_cast<uint64_t*>(top);
  sp[-1] = 0;                                         // fiber_main's (never used) return address
  sp[-2] = reinterpret_cast<uint64_t>(&fiber_main);  // where the switch returns to
  for (int i = 3; i <= 8; ++i) sp[-i] = 0;            // rbp, rbx, r12..r15
  return &sp[-8];
}

// A warp whose live lanes all wait at a collective: its exchange published, its lanes ready again.
void open_warp(unsigned w) {
  Executor& e = ex();
  const unsigned lo = w * 32, hi = std::min(e.threads, lo + 32);
  if (e.warp_alive[w] != 32) {
    finding("warp", "%s: a warp collective (shuffle, __syncwarp, ldmatrix, mma) with %u of the warp's 32 lanes "
            "(the others have exited or do not exist): undefined on a GPU", e.name, e.warp_alive[w]);
  }
  uint64_t* out = &e.warp_out[size_t{w} * 32 * 16];
  std::memcpy(out, &e.warp_in[size_t{w} * 32 * 16], 32 * 16 * sizeof(uint64_t));
  for (unsigned k = 0; k < hi - lo; ++k) {
    const unsigned i = e.reverse ? hi - 1 - k : lo + k;
    Fiber& f = e.fibers[i];
    if (f.wait == Wait::kDone) std::memset(&out[(i - lo) * 16], 0, 16 * sizeof(uint64_t));
    if (f.wait == Wait::kWarp) {
      f.wait = Wait::kReady;
      e.next.push_back(i);
    }
  }
  e.warp_waiting[w] = 0;
}

// A fiber that finished or waits: counted, then the next fiber of the round runs (or, the round
// over, the scheduler), straight from this one.
void switch_from(Fiber* me) {
  Executor& e = ex();
  st().emu_switches += 1;
  switch (me->wait) {
    case Wait::kDone:
      e.alive -= 1;
      e.warp_alive[me->warp] -= 1;
      if (e.warp_waiting[me->warp] > 0 && e.warp_waiting[me->warp] == e.warp_alive[me->warp]) open_warp(me->warp);
      break;
    case Wait::kWarp:
      e.warp_waiting[me->warp] += 1;
      if (e.warp_waiting[me->warp] == e.warp_alive[me->warp]) open_warp(me->warp);
      break;
    case Wait::kBlock: e.at_block += 1; break;
    case Wait::kReady: break;
  }
  if (e.ready_at < e.ready.size()) {
    Fiber& f = e.fibers[e.ready[e.ready_at++]];
    e.current = &f;
    tg_emu_now.thread = f.tid;
    tg_emu_now.lane = f.lane;
    tg_emu_swap(&me->sp, f.sp);
  } else {
    tg_emu_swap(&me->sp, e.scheduler_sp);
  }
}

void yield_to_scheduler() { switch_from(ex().current); }

void run_block(const Node& n, uint3 block_idx) {
  Executor& e = ex();
  const unsigned nt = n.block.x * n.block.y * n.block.z, warps = (nt + 31) / 32;
  tg_emu_now.block = block_idx;
  std::memset(e.shared, 0xff, e.shared_bytes);
  e.fibers.assign(nt, Fiber{});
  e.warp_waiting.assign(warps, 0);
  e.warp_alive.assign(warps, 0);
  if (e.warp_in.size() < size_t{warps} * 32 * 16) {  // (what a lane reads is always written first)
    e.warp_in.resize(size_t{warps} * 32 * 16);
    e.warp_out.resize(size_t{warps} * 32 * 16);
  }
  e.ready.clear();
  for (unsigned k = 0; k < nt; ++k) {
    const unsigned i = e.reverse ? nt - 1 - k : k;
    Fiber& f = e.fibers[i];
    f.tid = uint3{i % n.block.x, (i / n.block.x) % n.block.y, i / (n.block.x * n.block.y)};
    f.lane = i % 32;
    f.warp = i / 32;
    f.sp = fresh_context(i);
    e.warp_alive[f.warp] += 1;
    e.ready.push_back(i);
  }
  e.threads = nt;
  st().emu_threads += nt;
  e.alive = nt;
  e.at_block = 0;
  while (e.alive > 0) {
    e.next.clear();
    e.ready_at = 0;
    if (!e.ready.empty()) {  // the round: each ready fiber in turn, each switching to the next
      Fiber& f = e.fibers[e.ready[e.ready_at++]];
      e.current = &f;
      tg_emu_now.thread = f.tid;
      tg_emu_now.lane = f.lane;
      tg_emu_swap(&e.scheduler_sp, f.sp);
    }
    if (e.next.empty() && e.alive > 0 && e.at_block == e.alive) {  // every live thread at __syncthreads
      int any = 0;
      for (unsigned k = 0; k < nt; ++k) {
        const unsigned i = e.reverse ? nt - 1 - k : k;
        Fiber& f = e.fibers[i];
        if (f.wait != Wait::kBlock) continue;
        any |= f.or_value;
        f.wait = Wait::kReady;
        e.next.push_back(i);
      }
      e.block_or = any;
      e.at_block = 0;
    }
    if (e.next.empty() && e.alive > 0) {
      unsigned at_warp = 0;
      for (unsigned w = 0; w < warps; ++w) at_warp += e.warp_waiting[w];
      emu_fatal("%s: block (%u, %u, %u) hangs: %u threads wait at __syncthreads, %u at a warp collective whose "
                "other lanes never come (a deadlock on a GPU too)", e.name, block_idx.x, block_idx.y, block_idx.z,
                e.at_block, at_warp);
    }
    e.ready.swap(e.next);
  }
}

void run_grid(const Node& n) {
  Executor& e = ex();
  const unsigned nt = n.block.x * n.block.y * n.block.z;
  ensure_stacks(nt);
  e.body = n.work.get();
  e.name = n.kernel->name.c_str();
  ensure_shared(n.smem);
  watch_faults();
  tg_emu_now.grid_dim = n.grid;
  tg_emu_now.block_dim = n.block;
  tg_emu_now.dynamic_shared = e.shared;
  const uint64_t blocks = uint64_t{n.grid.x} * n.grid.y * n.grid.z;
  for (uint64_t k = 0; k < blocks; ++k) {
    const uint64_t b = e.reverse ? blocks - 1 - k : k;
    run_block(n, uint3{static_cast<unsigned>(b % n.grid.x), static_cast<unsigned>((b / n.grid.x) % n.grid.y),
                       static_cast<unsigned>(b / (uint64_t{n.grid.x} * n.grid.y))});
  }
  e.body = nullptr;
}

}  // namespace

extern "C" {

void tg_emu_block_barrier() {
  ex().current->wait = Wait::kBlock;
  yield_to_scheduler();
}

int tg_emu_block_or(int v) {
  Executor& e = ex();
  e.current->or_value = v != 0;
  e.current->wait = Wait::kBlock;
  yield_to_scheduler();
  return e.block_or;
}

const uint64_t* tg_emu_warp_exchange(const uint64_t* words, int n) {
  Executor& e = ex();
  Fiber& f = *e.current;
  if (n > 16) emu_fatal("%s: a warp exchange of %d words", e.name, n);
  if (n > 0) std::memcpy(&e.warp_in[(size_t{f.warp} * 32 + f.lane) * 16], words, static_cast<size_t>(n) * sizeof(uint64_t));
  f.wait = Wait::kWarp;
  yield_to_scheduler();
  return &e.warp_out[size_t{f.warp} * 32 * 16];
}

void tg_emu_trap(const char* what) {
  const Fiber* f = ex().current;
  emu_fatal("%s: %s (thread (%u, %u, %u) of block (%u, %u, %u))", ex().name, what, f->tid.x, f->tid.y, f->tid.z,
            tg_emu_now.block.x, tg_emu_now.block.y, tg_emu_now.block.z);
}

void tg_emu_launch(const void* kernel, const char* name, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                   std::function<void()>* body, const void* const* pointers, const int* positions, int n_pointers) {
  count_call();
  std::shared_ptr<std::function<void()>> work(body);
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  Kernel& k = s.kernels[kernel];
  if (k.name.empty() || k.name == "a kernel") k.name = name;
  std::vector<std::pair<size_t, const void*>> params;
  for (int i = 0; i < n_pointers; ++i) params.emplace_back(static_cast<size_t>(positions[i]), pointers[i]);
  Node n = make_node(NodeKind::kKernel, &k);
  n.work = std::move(work);
  queue_launch(std::move(n), grid, block, smem, stream, params);
}

void tg_emu_enqueue(const char* name, cudaStream_t stream, std::function<void()>* work) {
  count_call();
  std::shared_ptr<std::function<void()>> w(work);
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  Kernel& k = s.kernels[name];
  if (k.name.empty()) k.name = name;
  check_stream(stream, name);
  Node n = make_node(NodeKind::kKernel, &k);
  n.work = std::move(w);
  n.host = true;
  if (Stream* c = capturing(stream)) {
    c->graph->nodes.push_back(std::move(n));
    return;
  }
  run_node(n);
}

}  // extern "C"
#else
namespace {
void run_grid(const Node&) {}
}  // namespace
#endif

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
  std::vector<std::pair<size_t, const void*>> params;  // (a `char const*` is an op's name, kept for an error message, never read)
  for (size_t i = 0; i < k.pointer.size(); ++i) {
    if (k.pointer[i]) params.emplace_back(i + 1, *static_cast<void* const*>(args[i]));
  }
  Node n = make_node(NodeKind::kKernel, &k);
  return queue_launch(std::move(n), grid, block, smem, stream, params);
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
#if defined(TG_CUDA_EMU)
  std::snprintf(p->name, sizeof p->name, "tapegrad's CUDA emulator on the CPU (an H100's limits)");
#else
  std::snprintf(p->name, sizeof p->name, "NVIDIA H100 80GB HBM3 (tapegrad dry run: no kernel runs)");
#endif
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
#if defined(TG_CUDA_EMU)
  auto it = s.kernels.try_emplace(func).first;
#else
  auto it = s.kernels.find(func);
  if (it == s.kernels.end()) return set_error(cudaErrorInvalidDeviceFunction);
#endif
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
#if defined(TG_CUDA_EMU)  // (the emulator's kernels are known from their first launch or attribute)
  auto it = s.kernels.try_emplace(func).first;
  if (it->second.name.empty()) it->second.name = "a kernel";
#else
  auto it = s.kernels.find(func);
  if (it == s.kernels.end()) return set_error(cudaErrorInvalidDeviceFunction);
#endif
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
  void* q = nullptr;
  size_t mapped = 0;
  uintptr_t base = 0;
#if defined(TG_CUDA_EMU)
  // Emulated kernels read and write it: it ends (its size rounded up to 16 bytes, the alignment of
  // a vector load) where an unmapped page begins, so an access past its end faults at once and the
  // fault handler names the kernel, its thread and the allocation. (Before its start: not caught.)
  const size_t body = std::max<size_t>(16, (bytes + 15) / 16 * 16);
  mapped = (body + kPage - 1) / kPage * kPage + kPage;
  void* m = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return set_error(cudaErrorMemoryAllocation);
  ::mprotect(static_cast<char*>(m) + mapped - kPage, kPage, PROT_NONE);
  base = reinterpret_cast<uintptr_t>(m);
  q = static_cast<char*>(m) + mapped - kPage - body;
  std::memset(q, 0xff, body);  // (not zeros: a read of what no kernel or copy wrote comes out NaN)
#else
  // Zeroed, as no kernel writes it; large blocks mapped, so untouched pages cost no memory.
  if (n >= (size_t{1} << 20)) {
    q = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (q == MAP_FAILED) return set_error(cudaErrorMemoryAllocation);
    mapped = n;
  } else {
    q = std::aligned_alloc(256, n);
    if (q == nullptr) return set_error(cudaErrorMemoryAllocation);
    std::memset(q, 0, n);
  }
#endif
  s.allocs[reinterpret_cast<uintptr_t>(q)] = {bytes, false, mapped, ++s.serials, base};
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
    ::munmap(it->second.base != 0 ? reinterpret_cast<void*>(it->second.base) : p, it->second.mapped);
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
    c->graph->nodes.push_back(make_node(NodeKind::kCopy, nullptr, dst, src, bytes));
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
    c->graph->nodes.push_back(make_node(NodeKind::kMemset, nullptr, p, nullptr, bytes, value));
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

#if defined(TG_CUDA_EMU)
// The emulator's product: D = alpha op(A) op(B) + beta C (+ bias, then ReLU, by the epilogue), in the
// compute type (float64, or float32 sums of float32 / bfloat16 operands; TF32 rounds the operands'
// mantissas to 10 bits first), each sum over k in order. alpha and beta are read now, as cuBLASLt
// reads host scalars at the call.
float emu_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t emu_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (f != f) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
float emu_tf32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (f != f || (u & 0x7f800000u) == 0x7f800000u) return f;
  u += 0xfffu + ((u >> 13) & 1u);
  u &= 0xffffe000u;
  std::memcpy(&f, &u, 4);
  return f;
}
double emu_load(const void* base, cudaDataType t, int64_t i) {
  switch (t) {
    case CUDA_R_64F: return static_cast<const double*>(base)[i];
    case CUDA_R_32F: return static_cast<const float*>(base)[i];
    case CUDA_R_16BF: return emu_bf16(static_cast<const uint16_t*>(base)[i]);
    default: return 0;
  }
}
void emu_store(void* base, cudaDataType t, int64_t i, double v) {
  switch (t) {
    case CUDA_R_64F: static_cast<double*>(base)[i] = v; break;
    case CUDA_R_32F: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case CUDA_R_16BF: static_cast<uint16_t*>(base)[i] = emu_to_bf16(static_cast<float>(v)); break;
    default: break;
  }
}
std::shared_ptr<std::function<void()>> emu_product(const LtDesc& d, const LtLayout& la, const LtLayout& lb,
                                                   const LtLayout& lc, const LtLayout& ld, const void* alpha_p,
                                                   const void* beta_p, const void* A, const void* B, const void* C,
                                                   void* D) {
  const bool f64 = d.compute == CUBLAS_COMPUTE_64F;
  const double alpha = f64 ? *static_cast<const double*>(alpha_p) : *static_cast<const float*>(alpha_p);
  const double beta = f64 ? *static_cast<const double*>(beta_p) : *static_cast<const float*>(beta_p);
  return std::make_shared<std::function<void()>>([=] {
    const int64_t m = static_cast<int64_t>(ld.rows), n = static_cast<int64_t>(ld.cols);
    const int64_t k = static_cast<int64_t>(d.ta == CUBLAS_OP_N ? la.cols : la.rows);
    const bool tf32 = d.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
    const bool bias = d.epilogue == CUBLASLT_EPILOGUE_BIAS || d.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
    const bool relu = d.epilogue == CUBLASLT_EPILOGUE_RELU || d.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
    const cudaDataType bias_type = static_cast<cudaDataType>(d.bias_type == -1 ? ld.type : d.bias_type);
    // op(A) as m rows of k and op(B) as n columns of k, each contiguous, in the compute type.
    std::vector<double> a64, b64;
    std::vector<float> a32, b32;
    auto gather = [&](const void* base, const LtLayout& l, bool trans, int64_t offset, int64_t rows, auto& out) {
      out.resize(static_cast<size_t>(rows * k));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t p = 0; p < k; ++p) {
          const int64_t at = trans ? p + r * l.ld : r + p * l.ld;
          double v = emu_load(base, l.type, offset + at);
          if (tf32) v = emu_tf32(static_cast<float>(v));
          out[static_cast<size_t>(r * k + p)] = static_cast<std::remove_reference_t<decltype(out[0])>>(v);
        }
      }
    };
    for (int32_t b = 0; b < ld.batch; ++b) {
      const int64_t oa = b * la.stride, ob = b * lb.stride, oc = b * lc.stride, od = b * ld.stride;
      // op(A)[i, p] = A[i + p lda] (N) or A[p + i lda] (T); op(B)[p, j] = B[p + j ldb] (N) or B[j + p ldb] (T).
      if (f64) {
        gather(A, la, d.ta != CUBLAS_OP_N, oa, m, a64);
        gather(B, lb, d.tb == CUBLAS_OP_N, ob, n, b64);
      } else {
        gather(A, la, d.ta != CUBLAS_OP_N, oa, m, a32);
        gather(B, lb, d.tb == CUBLAS_OP_N, ob, n, b32);
      }
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t i = 0; i < m; ++i) {
          double v;
          if (f64) {
            const double* x = &a64[static_cast<size_t>(i * k)];
            const double* y = &b64[static_cast<size_t>(j * k)];
            double sum = 0;
            for (int64_t p = 0; p < k; ++p) sum += x[p] * y[p];
            v = alpha * sum;
            if (beta != 0) v += beta * emu_load(C, lc.type, oc + i + j * lc.ld);
            if (bias) v += emu_load(d.bias, bias_type, i);
          } else {
            const float* x = &a32[static_cast<size_t>(i * k)];
            const float* y = &b32[static_cast<size_t>(j * k)];
            float sum = 0;
            for (int64_t p = 0; p < k; ++p) sum += x[p] * y[p];
            float f = static_cast<float>(alpha) * sum;
            if (beta != 0) f += static_cast<float>(beta) * static_cast<float>(emu_load(C, lc.type, oc + i + j * lc.ld));
            if (bias) f += static_cast<float>(emu_load(d.bias, bias_type, i));
            v = f;
          }
          if (relu && v < 0) v = 0;
          emu_store(D, ld.type, od + i + j * ld.ld, v);
        }
      }
    }
  });
}
#endif

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

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b, const void* beta,
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
  Node n = make_node(NodeKind::kKernel, lt_kernel());
#if defined(TG_CUDA_EMU)
  n.work = emu_product(dd, la, lb, lc, ld, alpha, beta, A, B, C, D);
  n.host = true;
#else
  (void)alpha;
  (void)beta;
#endif
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
