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
  explicit CachingDeviceAllocator(DeviceMemoryBackend* backend) : backend_(backend) {}
  CachingDeviceAllocator(const CachingDeviceAllocator&) = delete;
  CachingDeviceAllocator& operator=(const CachingDeviceAllocator&) = delete;

  // A buffer of at least `bytes` (its class's size: *rounded). Out of memory, even after returning
  // the cache to the driver and retrying, throws tg::Error with one line naming op.
  void* allocate(size_t bytes, size_t* rounded, const char* op);
  void free(void* p, size_t rounded);

  DeviceMemoryCounters counters() const;
  void reset_peak();
  void empty_cache();
  void set_limit(size_t bytes);  // 0: none
  size_t limit() const;

  // The size class of a request: multiples of 512 bytes up to 1 MiB, then four classes per power
  // of two (so a buffer is at most 25% larger than asked, and varied shapes reuse each other's).
  static size_t round(size_t bytes);

 private:
  void release_cache_locked();
  [[noreturn]] void fail_out_of_memory(size_t bytes, const char* op, bool over_limit);

  DeviceMemoryBackend* backend_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> cache_;  // free buffers by class
  size_t cached_ = 0;
  size_t limit_ = 0;
  DeviceMemoryCounters c_;
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
