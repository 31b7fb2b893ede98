#pragma once
// The GPU caching allocator, written against a small backend (the driver in graph/cuda/, a fake
// in the tests), so that its bookkeeping — size classes, reuse, the memory cap, the retry after an
// out-of-memory and its one-line message — is tested on machines without a GPU.
//
// With one in-order stream per device a freed buffer may serve the next request at once: work
// queued later on the stream runs after the work that used it.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tg::detail {

struct DeviceMemoryBackend {
  virtual ~DeviceMemoryBackend() = default;
  virtual void* allocate(size_t bytes) = 0;              // nullptr when the device is out of memory
  virtual void release(void* p, size_t bytes) = 0;
  virtual void synchronize() = 0;                        // waits for queued work (before a retry)
  virtual void mem_info(size_t* free_bytes, size_t* total_bytes) = 0;
  virtual std::string name() const = 0;                  // "cuda:0"
};

struct DeviceMemoryCounters {
  size_t allocated = 0, reserved = 0, peak_allocated = 0, device_mallocs = 0;
};

class CachingDeviceAllocator {
 public:
  // caching false (TG_CUDA_NO_CACHING=1): each buffer of exactly the bytes asked, given back to the
  // driver when freed (outside a capture), so that compute-sanitizer and the emulator see each
  // tensor's own bounds; slower (cudaFree waits for the device).
  explicit CachingDeviceAllocator(DeviceMemoryBackend* backend, bool caching = true)
      : backend_(backend), caching_(caching) {}
  CachingDeviceAllocator(const CachingDeviceAllocator&) = delete;
  CachingDeviceAllocator& operator=(const CachingDeviceAllocator&) = delete;

  // A buffer of at least `bytes` (its class's size: *rounded). Out of memory, even after returning
  // the cache to the driver and retrying, throws tg::Error with one line naming op.
  // reuse_capture_frees false: not one of the running capture's freed buffers (a buffer the host
  // writes before each launch of the graph must be one its recorded kernels never touch).
  void* allocate(size_t bytes, size_t* rounded, const char* op, bool reuse_capture_frees = true);
  void free(void* p, size_t rounded);

  DeviceMemoryCounters counters() const;
  void reset_peak();
  void empty_cache();
  void set_limit(size_t bytes);  // 0: none
  size_t limit() const;

  // The size class of a request: multiples of 512 bytes up to 1 MiB, then four classes per power
  // of two (so a buffer is at most 25% larger than asked, and varied shapes reuse each other's).
  static size_t round(size_t bytes);

  // CUDA graphs (tg::cuda::Graph): a graph's replays write the buffers its capture used, so none of
  // them may serve anything else while the graph lives. Between begin_capture(g) and end_capture()
  // graph g owns every buffer handed out, and every buffer alive when the capture began. An owned
  // buffer that is freed is held, not cached: one the capture allocated, freed during it and owned
  // by g alone serves the capture's later requests of its class (the stream orders its uses; one
  // alive before may hold what a replay reads first, so it is not reused); release_graph(g)
  // returns to the cache the held buffers no other graph owns. During a capture nothing is given back
  // to the driver (that would wait for the device) and an out-of-memory fails without the retry.
  void begin_capture(int graph);
  void end_capture();
  void release_graph(int graph);
  size_t held() const;  // bytes of freed buffers that graphs keep (in reserved, not in the cache)

 private:
  struct Block {
    size_t size = 0;
    std::vector<int> owners;  // graphs that own it (few)
    int born = -1;            // the capture that allocated it (-1: none)
  };
  void* take_locked(size_t r, bool reuse_capture_frees);  // from the cache or the capture's own frees, or nullptr
  void release_cache_locked();
  [[noreturn]] void fail_out_of_memory(size_t bytes, const char* op, bool over_limit);

  DeviceMemoryBackend* backend_;
  bool caching_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> cache_;  // free buffers by class
  size_t cached_ = 0;
  size_t limit_ = 0;
  DeviceMemoryCounters c_;
  // Buffers in use (with the graphs that own them), freed ones that graphs hold, and those of the
  // running capture's graph alone, by class.
  std::unordered_map<void*, Block> live_;
  std::unordered_map<void*, Block> held_;
  std::map<size_t, std::vector<void*>> capture_free_;
  size_t held_bytes_ = 0;
  int capturing_ = -1;
};

// "1.50 GiB", "12.0 MiB", "512 bytes": for messages.
std::string format_bytes(size_t bytes);

}  // namespace tg::detail

namespace tg {
class Tensor;
struct Device;
namespace detail {
struct CallSite;
}  // namespace detail
}  // namespace tg

namespace tg::detail {
// "softmax_forward (ops/nn.cc:36)" (or "ops/nn.cc:36" for a lambda): where a call came from.
std::string caller_name(const CallSite& where);
// A copy of x on `to` (no autodiff: Tensor::to(Device) is the op). One GPU to another refuses.
Tensor copy_to_device(const Tensor& x, Device to, const char* op);
// GPU buffers for storages, from the device's caching allocator (graph/cuda.cc).
void* device_allocate(int device, size_t bytes, size_t* rounded, const char* op);
void device_free(int device, void* p, size_t rounded);
}  // namespace tg::detail
