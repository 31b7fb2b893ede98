#include "train/sampler.h"

#include <algorithm>
#include <cstddef>
#include <numeric>

#include "distributed/dist.h"
#include "graph/error.h"
#include "graph/random.h"

namespace tg::train {

namespace {
// Fisher-Yates with the generator seeded by seed + epoch: the same order for the same pair (the
// generator's seeding mixes the bits, so neighbouring seeds give unrelated orders).
template <class T>
void shuffle(std::vector<T>& v, uint64_t seed, int64_t epoch) {
  Generator g(seed + static_cast<uint64_t>(epoch));
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[g.next_u64() % i]);
}
}  // namespace

ShuffledSampler::ShuffledSampler(int64_t n, int64_t batch_size, bool drop_last)
    : n_(n), batch_size_(batch_size), drop_last_(drop_last) {
  TG_CHECK(n >= 1 && batch_size >= 1, "ShuffledSampler", "expected n >= 1 and batch_size >= 1, got n = {}, batch_size = {}", n,
           batch_size);
  TG_CHECK(!drop_last || n >= batch_size, "ShuffledSampler", "drop_last with {} samples and batch_size {} leaves no batch", n,
           batch_size);
}

std::vector<std::vector<int64_t>> ShuffledSampler::batches(uint64_t seed, int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(n_));
  std::iota(order.begin(), order.end(), 0);
  shuffle(order, seed, epoch);
  std::vector<std::vector<int64_t>> out;
  for (int64_t i = 0; i < n_; i += batch_size_) {
    if (drop_last_ && i + batch_size_ > n_) break;
    out.emplace_back(order.begin() + i, order.begin() + std::min(n_, i + batch_size_));
  }
  return out;
}

BatchListSampler::BatchListSampler(std::vector<std::vector<int64_t>> batches, bool shuffle)
    : batches_(std::move(batches)), shuffle_(shuffle) {
  TG_CHECK(!batches_.empty(), "BatchListSampler", "expected at least one batch");
  for (size_t i = 0; i < batches_.size(); ++i)
    TG_CHECK(!batches_[i].empty(), "BatchListSampler", "batch {} is empty", i);
}

std::vector<std::vector<int64_t>> BatchListSampler::batches(uint64_t seed, int64_t epoch) const {
  std::vector<size_t> order(batches_.size());
  std::iota(order.begin(), order.end(), 0);
  if (shuffle_) shuffle(order, seed, epoch);
  std::vector<std::vector<int64_t>> out;
  out.reserve(order.size());
  for (size_t i : order) out.push_back(batches_[i]);
  return out;
}

DistributedSampler::DistributedSampler(const Sampler& global, int rank, int size) : global_(global), rank_(rank), size_(size) {
  TG_CHECK(size >= 1 && rank >= 0 && rank < size, "DistributedSampler", "rank {} of {} processes is not valid", rank, size);
}

std::vector<std::vector<int64_t>> DistributedSampler::batches(uint64_t seed, int64_t epoch) const {
  std::vector<std::vector<int64_t>> out = global_.batches(seed, epoch);
  for (auto& b : out) b = dist::shard(b, rank_, size_);
  return out;
}

std::vector<std::vector<int64_t>> sequential_batches(int64_t n, int64_t batch_size) {
  TG_CHECK(n >= 0 && batch_size >= 1, "sequential_batches", "expected n >= 0 and batch_size >= 1, got {} and {}", n, batch_size);
  std::vector<std::vector<int64_t>> out;
  for (int64_t i = 0; i < n; i += batch_size) {
    out.emplace_back();
    for (int64_t j = i; j < std::min(n, i + batch_size); ++j) out.back().push_back(j);
  }
  return out;
}

}  // namespace tg::train
