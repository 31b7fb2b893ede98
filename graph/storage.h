#pragma once
// Storage: one 64-byte-aligned buffer, shared by every tensor that views it. Freed buffers of 64 KiB
// and more go back to a bounded cache, by size class (four per power of two, so the varied batch
// shapes of a translator reuse each other's buffers), so that a training loop does not pay for
// fresh pages on every step. The cache never holds more than storage_cache_limit() bytes: by
// default the most bytes tensors have held at once in this process (at least 64 MiB), so memory
// stays within about twice what the work itself needs; buffers freed past it go back to the system.
//
// A storage on a GPU (device().is_cuda()) holds a device pointer from that GPU's caching allocator
// (graph/device_memory_internal.h); its data() may not be read on the host.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "device.h"

namespace tg {

class Storage {
 public:
  // Tensors of up to kInlineBytes keep their data inside the Storage object itself.
  static constexpr size_t kInlineBytes = 64;
  explicit Storage(size_t nbytes);
  Storage(size_t nbytes, Device device);  // on a GPU: from its caching allocator
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // Counts in-place writes made through tapegrad (Tensor::add_/mul_/fill_/copy_, optimizer steps,
  // loading a state dict), so that values derived from the data know when they are stale. Writes
  // through data<T>() pointers are not seen: call bump_version() after them.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  void bump_version() { version_.fetch_add(1, std::memory_order_acq_rel); }

  // A value derived from this data and kept with it, in one of two slots, under a key that names
  // the derivation and the version it was made from (autocast's packed bfloat16 copies of a float32
  // weight, one per orientation). nullptr when the slot holds another key.
  std::shared_ptr<const void> derived(int slot, uint64_t key) const;
  std::shared_ptr<const void> derived_any(int slot) const;  // whatever the slot holds, any key
  void set_derived(int slot, uint64_t key, std::shared_ptr<const void> value) const;

 private:
  void allocate_host(size_t nbytes);
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  std::atomic<uint64_t> version_{0};
  mutable std::atomic<bool> derived_lock_{false};
  mutable uint64_t derived_key_[2] = {0, 0};
  mutable std::shared_ptr<const void> derived_[2];
  alignas(64) unsigned char small_[kInlineBytes];
};

std::shared_ptr<Storage> make_storage(size_t nbytes);
std::shared_ptr<Storage> make_storage(size_t nbytes, Device device);

// Bytes currently held by the cache, its limit, and a way to empty it. set_storage_cache_limit
// fixes the limit (0: no cache); kStorageCacheAuto restores the default, which follows the work.
inline constexpr size_t kStorageCacheAuto = ~size_t{0};
size_t storage_cache_bytes();
size_t storage_cache_limit();
void set_storage_cache_limit(size_t bytes);
void empty_storage_cache();
// Bytes held by live storages (for tests of memory release), and the most held at once since
// the last reset_storage_peak() (for benchmarks of peak memory).
size_t storage_live_bytes();
size_t storage_peak_bytes();
void reset_storage_peak();

}  // namespace tg
