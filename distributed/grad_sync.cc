#include "distributed/grad_sync.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "graph/error.h"

namespace tg::dist {

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

GradientSync::GradientSync(Communicator& comm, std::vector<std::pair<std::string, Tensor>> params, GradSyncOptions options)
    : comm_(comm), params_(std::move(params)), options_(options) {
  TG_CHECK(options_.bucket_bytes >= 1, "GradientSync", "bucket_bytes must be >= 1, got {}", options_.bucket_bytes);
  where_.resize(params_.size());
  filled_.assign(params_.size(), 0);
  // Reverse order: the last layers' gradients are complete first.
  for (size_t k = params_.size(); k-- > 0;) {
    const Tensor& p = params_[k].second;
    TG_CHECK(p.dtype() == kFloat32 || p.dtype() == kFloat64, "GradientSync",
             "parameter '{}' is {}; data-parallel training sums float32 or float64 gradients", params_[k].first,
             dtype_name(p.dtype()));
    const int64_t bytes = p.numel() * static_cast<int64_t>(dtype_size(p.dtype()));
    if (buckets_.empty() || buckets_.back().dtype != p.dtype() ||
        (buckets_.back().elements * static_cast<int64_t>(dtype_size(p.dtype())) + bytes > options_.bucket_bytes &&
         !buckets_.back().members.empty())) {
      buckets_.emplace_back();
      buckets_.back().dtype = p.dtype();
    }
    Bucket& b = buckets_.back();
    where_[k] = {buckets_.size() - 1, b.members.size()};
    b.members.push_back(k);
    b.offsets.push_back(b.elements);
    b.elements += p.numel();
  }
  for (Bucket& b : buckets_) {  // gradients, then a flag per member
    const size_t n = static_cast<size_t>(b.elements) + b.members.size();
    if (b.dtype == kFloat32) b.f32.assign(n, 0.f);
    else b.f64.assign(n, 0.0);
  }
}

void GradientSync::fill(size_t i, bool from_hook) {
  (void)from_hook;
  auto [bi, m] = where_[i];
  Bucket& b = buckets_[bi];
  const Tensor& p = params_[i].second;
  const Tensor g = p.grad();
  const int64_t n = p.numel(), off = b.offsets[m];
  const size_t flag = static_cast<size_t>(b.elements) + m;
  if (g.defined()) {
    TG_CHECK(g.numel() == n, "GradientSync", "the gradient of '{}' has {} elements, the parameter {}", params_[i].first,
             g.numel(), n);
    const Tensor gg = g.dtype() == b.dtype ? g : g.to(b.dtype);
    if (b.dtype == kFloat32) std::memcpy(b.f32.data() + off, gg.data<float>(), static_cast<size_t>(n) * sizeof(float));
    else std::memcpy(b.f64.data() + off, gg.data<double>(), static_cast<size_t>(n) * sizeof(double));
  } else if (b.dtype == kFloat32) {
    std::memset(b.f32.data() + off, 0, static_cast<size_t>(n) * sizeof(float));
  } else {
    std::memset(b.f64.data() + off, 0, static_cast<size_t>(n) * sizeof(double));
  }
  if (b.dtype == kFloat32) b.f32[flag] = g.defined() ? 1.f : 0.f;
  else b.f64[flag] = g.defined() ? 1.0 : 0.0;
  filled_[i] = 1;
  ++b.filled;
}

void GradientSync::start(Bucket& b) {
  const int64_t n = b.elements + static_cast<int64_t>(b.members.size());
  b.request = b.dtype == kFloat32 ? comm_.all_reduce_sum_async(b.f32.data(), n) : comm_.all_reduce_sum_async(b.f64.data(), n);
  b.started = true;
  stats_.bytes += b.elements * static_cast<int64_t>(dtype_size(b.dtype));
  ++stats_.buckets;
}

void GradientSync::poll() {
  for (size_t k = 0; k < next_; ++k)
    if (buckets_[k].request.active()) comm_.test(buckets_[k].request);
}

void GradientSync::ready(size_t i) {
  TG_CHECK(i < params_.size(), "GradientSync::ready", "parameter index {} of {}", i, params_.size());
  if (!in_step_) {
    in_step_ = true;
    stats_ = {};
  }
  if (filled_[i]) return;  // a second hook call in the same step changes nothing
  fill(i, true);
  if (!options_.overlap) return;
  // Start buckets strictly in order, so every process issues the same collectives in the same order.
  while (next_ < buckets_.size() && buckets_[next_].filled == buckets_[next_].members.size()) {
    start(buckets_[next_++]);
    ++stats_.started_early;
  }
  poll();  // MPI progresses non-blocking collectives only inside MPI calls
}

void GradientSync::finish() {
  const double t0 = now();
  if (!in_step_) stats_ = {};
  for (; next_ < buckets_.size(); ++next_) {
    Bucket& b = buckets_[next_];
    for (size_t k : b.members)
      if (!filled_[k]) fill(k, false);
    start(b);
  }
  std::vector<Request> rs;
  for (Bucket& b : buckets_) rs.push_back(std::move(b.request));
  const double t1 = now();
  comm_.wait(rs, "the gradient all-reduce");
  stats_.wait_seconds = now() - t1;
  for (Bucket& b : buckets_) {
    for (size_t m = 0; m < b.members.size(); ++m) {
      Tensor& p = params_[b.members[m]].second;
      const size_t flag = static_cast<size_t>(b.elements) + m;
      const bool any = b.dtype == kFloat32 ? b.f32[flag] > 0 : b.f64[flag] > 0;
      if (!any) {
        p.zero_grad();
        continue;
      }
      Tensor g = Tensor::empty(p.shape(), b.dtype);
      const size_t n = static_cast<size_t>(p.numel());
      if (b.dtype == kFloat32) std::memcpy(g.data<float>(), b.f32.data() + b.offsets[m], n * sizeof(float));
      else std::memcpy(g.data<double>(), b.f64.data() + b.offsets[m], n * sizeof(double));
      p.set_grad(g);
    }
    b.filled = 0;
    b.started = false;
  }
  reset();
  stats_.finish_seconds = now() - t0;
}

void GradientSync::reset() {
  for (Bucket& b : buckets_) {
    TG_CHECK(!b.request.active(), "GradientSync::reset", "a bucket's all-reduce is still in flight");
    b.filled = 0;
    b.started = false;
  }
  std::fill(filled_.begin(), filled_.end(), 0);
  next_ = 0;
  in_step_ = false;
}

}  // namespace tg::dist
