#include "graph/device_memory_internal.h"

#include <algorithm>

#include "graph/error.h"

namespace tg::detail {

std::string format_bytes(size_t b) {
  constexpr double kKiB = 1024.0, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
  const double d = static_cast<double>(b);
  if (d >= kGiB) return fmt::format("{:.2f} GiB", d / kGiB);
  if (d >= kMiB) return fmt::format("{:.1f} MiB", d / kMiB);
  if (d >= kKiB) return fmt::format("{:.1f} KiB", d / kKiB);
  return fmt::format("{} bytes", b);
}

size_t CachingDeviceAllocator::round(size_t n) {
  constexpr size_t kSmall = 512, kLarge = size_t{1} << 20;
  if (n == 0) n = 1;
  if (n <= kLarge) return (n + kSmall - 1) / kSmall * kSmall;
  size_t p = kLarge;
  while (p <= n / 2) p *= 2;  // the largest power of two <= n
  const size_t step = p / 4;
  return (n + step - 1) / step * step;
}

void* CachingDeviceAllocator::take_locked(size_t r, bool reuse_capture_frees) {
  if (capturing_ >= 0 && reuse_capture_frees) {  // first a buffer the capture freed itself: its graph already owns it
    auto own = capture_free_.find(r);
    if (own != capture_free_.end() && !own->second.empty()) {
      void* p = own->second.back();
      own->second.pop_back();
      held_.erase(p);
      held_bytes_ -= r;
      return p;
    }
  }
  auto it = cache_.find(r);
  if (it == cache_.end() || it->second.empty()) return nullptr;
  void* p = it->second.back();
  it->second.pop_back();
  cached_ -= r;
  return p;
}

void* CachingDeviceAllocator::allocate(size_t bytes, size_t* rounded, const char* op, bool reuse_capture_frees) {
  const size_t r = caching_ ? round(bytes) : std::max<size_t>(bytes, 1);
  *rounded = r;
  std::lock_guard<std::mutex> lock(mu_);
  void* p = take_locked(r, reuse_capture_frees);
  if (p == nullptr) {
    // During a capture nothing goes back to the driver (cudaFree waits for the device).
    const bool may_release = capturing_ < 0;
    if (limit_ != 0 && c_.reserved + r > limit_) {
      if (may_release) release_cache_locked();
      if (c_.reserved + r > limit_) fail_out_of_memory(bytes, op, /*over_limit=*/true);
    }
    p = backend_->allocate(r);
    if (p == nullptr && may_release) {  // the cache may hold what is missing: give it back and try once more
      backend_->synchronize();
      release_cache_locked();
      p = backend_->allocate(r);
    }
    if (p == nullptr) fail_out_of_memory(bytes, op, /*over_limit=*/false);
    c_.reserved += r;
    ++c_.device_mallocs;
  }
  Block& b = live_[p];
  b.size = r;
  b.owners.clear();
  b.born = capturing_;
  if (capturing_ >= 0) b.owners.push_back(capturing_);
  c_.allocated += r;
  c_.peak_allocated = std::max(c_.peak_allocated, c_.allocated);
  return p;
}

void CachingDeviceAllocator::free(void* p, size_t rounded) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  c_.allocated -= rounded;
  Block b;
  b.size = rounded;
  if (auto it = live_.find(p); it != live_.end()) {
    b.owners = std::move(it->second.owners);
    b.born = it->second.born;
    live_.erase(it);
  }
  if (!b.owners.empty()) {  // a graph's replays write it: held until every such graph is gone
    held_bytes_ += rounded;
    if (capturing_ >= 0 && b.born == capturing_ && b.owners.size() == 1 && b.owners[0] == capturing_)
      capture_free_[rounded].push_back(p);
    held_.emplace(p, std::move(b));
    return;
  }
  // The cap was lowered below what is held, or nothing is cached: back to the driver.
  if (((limit_ != 0 && c_.reserved > limit_) || !caching_) && capturing_ < 0) {
    backend_->release(p, rounded);
    c_.reserved -= rounded;
    return;
  }
  cache_[rounded].push_back(p);
  cached_ += rounded;
}

void CachingDeviceAllocator::begin_capture(int graph) {
  std::lock_guard<std::mutex> lock(mu_);
  capturing_ = graph;
  capture_free_.clear();
  for (auto& [p, b] : live_) b.owners.push_back(graph);
}

void CachingDeviceAllocator::end_capture() {
  std::lock_guard<std::mutex> lock(mu_);
  capturing_ = -1;
  capture_free_.clear();  // (still held: the graph owns them)
  if (!caching_) release_cache_locked();  // what the capture freed and no graph owns
}

void CachingDeviceAllocator::release_graph(int graph) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capturing_ == graph) {
    capturing_ = -1;
    capture_free_.clear();
  }
  auto drop = [graph](std::vector<int>& owners) { owners.erase(std::remove(owners.begin(), owners.end(), graph), owners.end()); };
  for (auto& [p, b] : live_) drop(b.owners);
  for (auto it = held_.begin(); it != held_.end();) {
    drop(it->second.owners);
    if (!it->second.owners.empty()) {
      ++it;
      continue;
    }
    cache_[it->second.size].push_back(it->first);
    cached_ += it->second.size;
    held_bytes_ -= it->second.size;
    it = held_.erase(it);
  }
  if (!caching_ && capturing_ < 0) release_cache_locked();
}

size_t CachingDeviceAllocator::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_bytes_;
}

void CachingDeviceAllocator::release_cache_locked() {
  for (auto& [size, list] : cache_) {
    for (void* p : list) backend_->release(p, size);
    c_.reserved -= size * list.size();
    list.clear();
  }
  cache_.clear();
  cached_ = 0;
}

void CachingDeviceAllocator::fail_out_of_memory(size_t bytes, const char* op, bool over_limit) {
  size_t free_bytes = 0, total = 0;
  backend_->mem_info(&free_bytes, &total);
  std::string held = fmt::format("tapegrad holds {} in tensors and {} in its cache", format_bytes(c_.allocated),
                                 format_bytes(cached_));
  if (held_bytes_ != 0) held += fmt::format(", and keeps {} for CUDA graphs", format_bytes(held_bytes_));
  if (capturing_ >= 0) held += " (while capturing a CUDA graph, nothing is given back to the driver)";
  if (over_limit) {
    fail(op, "{}: out of memory: {} asked for, past the limit of {} set by tg::cuda::set_memory_limit ({}; the card "
         "has {} in all, {} free)", backend_->name(), format_bytes(bytes), format_bytes(limit_), held,
         format_bytes(total), format_bytes(free_bytes));
  }
  fail(op, "{}: out of memory: {} asked for; the card has {} in all, {} free; {} (a smaller batch or model, or "
       "bfloat16, needs less)", backend_->name(), format_bytes(bytes), format_bytes(total), format_bytes(free_bytes),
       held);
}

DeviceMemoryCounters CachingDeviceAllocator::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return c_;
}

void CachingDeviceAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  c_.peak_allocated = c_.allocated;
}

void CachingDeviceAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  if (capturing_ < 0) release_cache_locked();  // (during a capture: later)
}

void CachingDeviceAllocator::set_limit(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  limit_ = bytes;
  if (limit_ != 0 && c_.reserved > limit_ && capturing_ < 0) release_cache_locked();
}

size_t CachingDeviceAllocator::limit() const {
  std::lock_guard<std::mutex> lock(mu_);
  return limit_;
}

}  // namespace tg::detail
