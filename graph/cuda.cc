// tg::cuda's functions, over the runtime of graph/cuda/ (the driver, or "built without CUDA") and
// one caching allocator per device.
#include "graph/cuda.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "graph/capture_internal.h"
#include "graph/cuda/runtime.h"
#include "graph/device_memory_internal.h"
#include "graph/error.h"

namespace tg {

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.substr(0, 5) == "cuda:" && text.size() > 5 && text.size() <= 8) {
    int index = 0;
    for (char c : text.substr(5)) {
      if (c < '0' || c > '9') index = -1;
      if (index >= 0) index = index * 10 + (c - '0');
    }
    if (index >= 0) return cuda(index);
  }
  detail::fail("device", "'{}' is not a device (expected cpu, cuda or cuda:N)", text);
}

std::string Device::str() const { return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index); }

namespace {

class CudaBackend final : public detail::DeviceMemoryBackend {
 public:
  explicit CudaBackend(int device) : device_(device) {}
  void* allocate(size_t bytes) override { return cuda_rt::malloc(device_, bytes, "allocate"); }
  void release(void* p, size_t) override { cuda_rt::free(device_, p); }
  void synchronize() override { cuda_rt::synchronize(device_, "allocate"); }
  void mem_info(size_t* free_bytes, size_t* total_bytes) override { cuda_rt::mem_info(device_, free_bytes, total_bytes); }
  std::string name() const override { return fmt::format("cuda:{}", device_); }

 private:
  int device_;
};

struct PerDevice {
  std::unique_ptr<CudaBackend> backend;
  std::unique_ptr<detail::CachingDeviceAllocator> allocator;
};
constexpr int kMaxDevices = 64;

detail::CachingDeviceAllocator& allocator(int device, const char* op) {
  TG_CHECK(device >= 0 && device < kMaxDevices, op, "cuda:{} is not a device index", device);
  static auto* all = new std::array<PerDevice, kMaxDevices>();  // never destroyed: tensors may outlive statics
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  PerDevice& d = (*all)[static_cast<size_t>(device)];
  if (!d.allocator) {
    d.backend = std::make_unique<CudaBackend>(device);
    const char* no_caching = std::getenv("TG_CUDA_NO_CACHING");  // exact buffers, for memory checkers
    d.allocator = std::make_unique<detail::CachingDeviceAllocator>(d.backend.get(),
                                                                   no_caching == nullptr || no_caching[0] != '1');
  }
  return *d.allocator;
}

}  // namespace

namespace {
std::atomic<bool> g_poison{[] {
  const char* e = std::getenv("TG_CUDA_POISON");
  return e != nullptr && e[0] == '1';
}()};
}  // namespace

namespace detail {
// ---- Graph ----

// Per-step values live in device chunks of kValuesALaunch (one launch writes a chunk), a larger
// request in its own buffer; the host side of each is rewritten by the `next`s before a replay.
struct GraphState {
  int device = 0;
  int id = 0;
  void* exec = nullptr;
  size_t nodes = 0;
  bool tried = false;
  struct Chunk {
    uint64_t* dev = nullptr;
    size_t rounded = 0;
    std::vector<uint64_t> host;  // its values, host side (size: those in use)
    size_t capacity = 0;
  };
  std::vector<Chunk> chunks;
  std::vector<std::function<void()>> nexts;  // in the order the ops asked
  std::vector<std::function<void()>> checks;

  const uint64_t* values(const uint64_t* now, size_t count, std::function<void(uint64_t*)> next,
                         std::function<void()> check);
  void upload(const char* op);
};

namespace {
// The graph each device is capturing (nullptr: none).
std::array<std::atomic<GraphState*>, kMaxDevices>& active_captures() {
  static auto* a = new std::array<std::atomic<GraphState*>, kMaxDevices>();
  return *a;
}
std::atomic<int> g_graph_ids{0};
}  // namespace

const uint64_t* GraphState::values(const uint64_t* now, size_t count, std::function<void(uint64_t*)> next,
                                   std::function<void()> check) {
  if (check) checks.push_back(std::move(check));
  if (count == 0) {  // no values, but the host work a replay must repeat (a scope's call counted)
    nexts.push_back([next = std::move(next)] {
      uint64_t none = 0;
      next(&none);
    });
    return nullptr;
  }
  size_t c = chunks.size();
  if (count <= cuda_rt::kValuesALaunch && c > 0 && chunks.back().capacity - chunks.back().host.size() >= count) {
    c = chunks.size() - 1;
  } else {
    Chunk k;
    k.capacity = std::max(count, cuda_rt::kValuesALaunch);
    // Straight from the allocator (not poisoned: a recorded poisoning would overwrite the values).
    // Not one of the capture's freed temporaries: the host writes it before each launch.
    k.dev = static_cast<uint64_t*>(allocator(device, "cuda::Graph").allocate(k.capacity * sizeof(uint64_t), &k.rounded,
                                                                          "cuda::Graph", /*reuse_capture_frees=*/false));
    chunks.push_back(std::move(k));
  }
  Chunk& k = chunks[c];
  const size_t offset = k.host.size();
  k.host.insert(k.host.end(), now, now + count);
  nexts.push_back([this, c, offset, next = std::move(next)] { next(chunks[c].host.data() + offset); });
  return k.dev + offset;
}

void GraphState::upload(const char* op) {
  for (const Chunk& k : chunks) {
    for (size_t i = 0; i < k.host.size(); i += cuda_rt::kValuesALaunch)
      cuda_rt::write_values(device, k.dev + i, k.host.data() + i, std::min(cuda_rt::kValuesALaunch, k.host.size() - i), op);
  }
}

}  // namespace detail

namespace detail {
const uint64_t* step_values(int device, const uint64_t* now, size_t count, std::function<void(uint64_t*)> next,
                            std::function<void()> check) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  GraphState* g = detail::active_captures()[static_cast<size_t>(device)].load(std::memory_order_acquire);
  return g != nullptr ? g->values(now, count, std::move(next), std::move(check)) : nullptr;
}
bool capturing(int device) { return cuda_rt::capturing(device); }
const int64_t* replay_step(int device, int64_t step) {
  const uint64_t now = static_cast<uint64_t>(step);
  return reinterpret_cast<const int64_t*>(
      step_values(device, &now, 1, [s = step](uint64_t* out) mutable { *out = static_cast<uint64_t>(++s); }));
}

void* device_allocate(int device, size_t bytes, size_t* rounded, const char* op) {
  cuda_rt::use_device(device, op);  // one line when there is no such GPU, before any bookkeeping
  void* p = allocator(device, op).allocate(bytes, rounded, op);
  if (g_poison.load(std::memory_order_relaxed)) cuda_rt::poison_bytes(device, p, *rounded, op);
  return p;
}
void device_free(int device, void* p, size_t rounded) { allocator(device, "free").free(p, rounded); }
}  // namespace detail

namespace cuda {

bool built() { return cuda_rt::built(); }
bool available() { return device_count() > 0; }
int device_count() {
  static const int n = cuda_rt::device_count(nullptr);  // asked once: CUDA is initialised at most once
  return n;
}
std::string unavailable_reason() {
  std::string why;
  return cuda_rt::device_count(&why) > 0 ? std::string() : why;
}
const char* built_architectures() { return cuda_rt::architectures(); }
std::string describe(int device) { return cuda_rt::describe(device); }

void synchronize(int device) { cuda_rt::synchronize(device, "synchronize"); }

MemoryStats memory_stats(int device) {
  detail::CachingDeviceAllocator& a = allocator(device, "memory_stats");
  const detail::DeviceMemoryCounters c = a.counters();
  return MemoryStats{c.allocated, c.reserved, c.peak_allocated, c.device_mallocs, a.held()};
}
void reset_peak_memory(int device) { allocator(device, "reset_peak_memory").reset_peak(); }
void empty_cache(int device) { allocator(device, "empty_cache").empty_cache(); }
void set_memory_limit(size_t bytes, int device) { allocator(device, "set_memory_limit").set_limit(bytes); }

void set_sync_debug(bool on) { cuda_rt::set_sync_debug(on); }
bool sync_debug() { return cuda_rt::sync_debug(); }
uint64_t kernel_launches() { return cuda_rt::launches(); }
uint64_t host_waits() { return cuda_rt::host_waits(); }
ForbidHostWaits::ForbidHostWaits() : outer_(cuda_rt::forbid_host_waits(true)) {}
ForbidHostWaits::~ForbidHostWaits() { cuda_rt::forbid_host_waits(outer_); }
namespace {
std::atomic<bool> g_tf32{[] {
  const char* e = std::getenv("TG_CUDA_TF32");
  return e != nullptr && e[0] == '1';
}()};
}  // namespace
void set_allow_tf32(bool on) { g_tf32.store(on, std::memory_order_relaxed); }
bool allow_tf32() { return g_tf32.load(std::memory_order_relaxed); }
void set_poison_allocations(bool on) { g_poison.store(on, std::memory_order_relaxed); }
bool poison_allocations() { return g_poison.load(std::memory_order_relaxed); }
void* stream(int device) { return cuda_rt::stream(device); }
void check_launch(const char* op, int device) {
  cuda_rt::count_launch();  // (the caller's kernel)
  cuda_rt::after_launch(device, op);
}

Graph::Graph(int device) : s_(std::make_unique<detail::GraphState>()) {
  TG_CHECK(device >= 0 && device < kMaxDevices, "cuda::Graph", "cuda:{} is not a device index", device);
  s_->device = device;
  s_->id = detail::g_graph_ids.fetch_add(1, std::memory_order_relaxed);
}

Graph::~Graph() {
  if (!s_->tried) return;
  try {
    cuda_rt::destroy_graph(s_->device, s_->exec);  // (a launch still queued runs to its end first)
  } catch (const Error&) {  // (a destructor does not throw: the error shows at the next GPU call)
  }
  detail::CachingDeviceAllocator& a = allocator(s_->device, "cuda::Graph");
  for (const detail::GraphState::Chunk& k : s_->chunks) a.free(k.dev, k.rounded);
  a.release_graph(s_->id);  // (work queued later on the stream runs after the graph's)
}

void Graph::capture(const std::function<void()>& step) {
  const char* op = "cuda::Graph::capture";
  TG_CHECK(!s_->tried, op, "this graph has already captured a step (a Graph records one; make another for another step)");
  const int device = s_->device;
  cuda_rt::use_device(device, op);
  TG_CHECK(detail::active_captures()[static_cast<size_t>(device)].load() == nullptr, op,
           "cuda:{} is already capturing a graph (one capture at a time)", device);
  s_->tried = true;
  (void)cuda_rt::index_error_flag(device);  // made (and zeroed) now, not recorded into the graph
  detail::CachingDeviceAllocator& a = allocator(device, op);
  a.begin_capture(s_->id);
  try {
    cuda_rt::begin_capture(device, op);
  } catch (...) {
    a.end_capture();
    throw;
  }
  detail::active_captures()[static_cast<size_t>(device)].store(s_.get());
  try {
    step();
  } catch (...) {
    detail::active_captures()[static_cast<size_t>(device)].store(nullptr);
    cuda_rt::abort_capture(device);
    a.end_capture();
    throw;
  }
  detail::active_captures()[static_cast<size_t>(device)].store(nullptr);
  try {
    s_->exec = cuda_rt::end_capture(device, op, &s_->nodes);
  } catch (...) {
    a.end_capture();
    throw;
  }
  a.end_capture();
  s_->upload(op);  // the captured step's own values, then the step itself
  cuda_rt::launch_graph(device, s_->exec, op);
}

void Graph::replay() {
  const char* op = "cuda::Graph::replay";
  TG_CHECK(s_->exec != nullptr, op, "{}", s_->tried ? "the capture failed: nothing to replay"
                                                    : "nothing captured yet: call capture(step) first");
  TG_CHECK(!cuda_rt::capturing(s_->device), op, "cuda:{} is capturing a graph: a replay inside a capture would be "
           "recorded with this step's values (replay it outside)", s_->device);
  for (const auto& check : s_->checks) check();  // (a refused replay changes no host state)
  for (const auto& next : s_->nexts) next();
  s_->upload(op);
  cuda_rt::launch_graph(s_->device, s_->exec, op);
}

bool Graph::captured() const { return s_->exec != nullptr; }
size_t Graph::nodes() const { return s_->nodes; }
int Graph::device() const { return s_->device; }

std::vector<OpTime> op_time_table(const std::vector<std::pair<std::string, double>>& launches) {
  std::map<std::string, OpTime> by_op;
  for (const auto& [op, ms] : launches) {
    OpTime& t = by_op[op];
    t.op = op;
    t.ms += ms;
    ++t.launches;
  }
  std::vector<OpTime> rows;
  rows.reserve(by_op.size());
  for (auto& [op, t] : by_op) rows.push_back(std::move(t));
  std::stable_sort(rows.begin(), rows.end(), [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; });
  return rows;
}

KernelProfile::KernelProfile(int device) : device_(device) { cuda_rt::profile_begin(device, "KernelProfile"); }
KernelProfile::~KernelProfile() {
  if (done_) return;
  try {
    (void)cuda_rt::profile_end(device_, "KernelProfile");
  } catch (const Error&) {  // (a destructor does not throw: the error shows at the next GPU call)
  }
}
const std::vector<OpTime>& KernelProfile::table() {
  if (done_) return table_;
  done_ = true;
  std::vector<std::pair<std::string, double>> launches;
  for (const cuda_rt::ProfileMark& m : cuda_rt::profile_end(device_, "KernelProfile")) launches.emplace_back(m.op, m.ms);
  table_ = op_time_table(launches);
  return table_;
}

}  // namespace cuda
}  // namespace tg
