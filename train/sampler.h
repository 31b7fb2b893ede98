#pragma once
// Samplers: which samples each batch holds, epoch by epoch, for tg::train::Trainer::fit (and for
// loops of your own). The same (seed, epoch) gives the same batches on every process.
#include <cstdint>
#include <vector>

namespace tg::train {

// Which samples each batch holds, epoch by epoch; the same for the same (seed, epoch).
class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::vector<std::vector<int64_t>> batches(uint64_t seed, int64_t epoch) const = 0;
};
// Samples 0..n-1 reshuffled every epoch, batch_size at a time (the last batch smaller unless drop_last).
class ShuffledSampler : public Sampler {
 public:
  ShuffledSampler(int64_t n, int64_t batch_size, bool drop_last = false);
  std::vector<std::vector<int64_t>> batches(uint64_t seed, int64_t epoch) const override;

 private:
  int64_t n_, batch_size_;
  bool drop_last_;
};
// Fixed batches (e.g. text::bucket_batches' length buckets) in an order reshuffled every epoch.
class BatchListSampler : public Sampler {
 public:
  explicit BatchListSampler(std::vector<std::vector<int64_t>> batches, bool shuffle = true);
  std::vector<std::vector<int64_t>> batches(uint64_t seed, int64_t epoch) const override;

 private:
  std::vector<std::vector<int64_t>> batches_{};
  bool shuffle_;
};
// This process's share of another sampler's batches, for a loop of your own (the Trainer shards by
// itself, so give it the global sampler). Every process draws the same global batches (shared seed
// and epoch) and keeps its cut of each (dist::shard), so every process has as many batches, some
// possibly empty at an uneven end. It keeps a reference: `global` must outlive it.
class DistributedSampler : public Sampler {
 public:
  DistributedSampler(const Sampler& global, int rank, int size);
  std::vector<std::vector<int64_t>> batches(uint64_t seed, int64_t epoch) const override;

 private:
  const Sampler& global_;
  int rank_, size_;
};
// 0..n-1 in order, batch_size at a time: evaluation batches.
std::vector<std::vector<int64_t>> sequential_batches(int64_t n, int64_t batch_size);

}  // namespace tg::train
