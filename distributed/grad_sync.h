#pragma once
// Gradients summed across processes in buckets, while backward still runs (as PyTorch's
// DistributedDataParallel). tg::train::Trainer drives it; a loop of your own can too:
//
//   std::vector<std::pair<std::string, tg::Tensor>> params;   // the trainable ones only
//   for (auto& [name, p] : model.named_parameters()) if (p.requires_grad()) params.emplace_back(name, p);
//   tg::dist::GradientSync sync(tg::dist::world(), params);   // must outlive the hooks' use
//   bool last = false;                                        // the step's last micro-batch
//   for (size_t i = 0; i < params.size(); ++i)                // once
//     params[i].second.register_post_accumulate_grad_hook([&, i](const tg::Tensor&) { if (last) sync.ready(i); });
//   last = true;
//   loss.backward();   // each bucket starts its all-reduce as soon as its gradients are complete
//   sync.finish();     // the rest; then every process holds the same summed gradients
//
// Call ready() only during the step's last backward (with gradient accumulation the earlier
// micro-batches only accumulate); once a bucket has started, finish() must follow.
//
// Buckets hold parameters in reverse order (the order backward usually completes them) up to
// `bucket_bytes` each, and start strictly in bucket order on every process, so the collectives
// match whatever order gradients arrive in. A parameter that received no gradient on a process
// counts as zero there; one that received none anywhere keeps no gradient (the optimizer skips it,
// as it would in one process).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../graph/tensor.h"
#include "dist.h"

namespace tg::dist {

struct GradSyncOptions {
  int64_t bucket_bytes = int64_t{4} << 20;  // gradient bytes per all-reduce (PyTorch's default is 25 MB)
  bool overlap = true;  // start buckets during backward (false: everything after it, for measuring)
};

// What the last step's synchronisation cost.
struct SyncStats {
  int64_t bytes = 0;       // gradient bytes all-reduced (per process)
  int64_t buckets = 0;
  int64_t started_early = 0;  // buckets started during backward
  double wait_seconds = 0;    // time finish() spent waiting: the communication backward did not hide
  double finish_seconds = 0;  // all of finish() (waits, copies, the buckets it started)
};

class GradientSync {
 public:
  GradientSync(Communicator& comm, std::vector<std::pair<std::string, Tensor>> params, GradSyncOptions options = {});
  // Parameter i's gradient is complete for this step (its post-accumulate hook).
  void ready(size_t i);
  // Starts what is left, waits, and leaves every parameter's gradient summed over the processes.
  void finish();
  // Drops what ready() collected without communicating (a step abandoned on every process).
  void reset();
  const SyncStats& last_stats() const { return stats_; }
  size_t num_buckets() const { return buckets_.size(); }
  const std::vector<std::pair<std::string, Tensor>>& params() const { return params_; }

 private:
  struct Bucket {
    DType dtype;
    std::vector<size_t> members;  // parameter indices
    std::vector<int64_t> offsets;  // each member's first element
    int64_t elements = 0;         // gradient elements, then one "had a gradient" flag per member
    std::vector<float> f32;
    std::vector<double> f64;
    size_t filled = 0;
    bool started = false;
    Request request;
  };
  void fill(size_t i, bool from_hook);
  void start(Bucket& b);
  void poll();

  Communicator& comm_;
  std::vector<std::pair<std::string, Tensor>> params_;
  GradSyncOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<size_t, size_t>> where_;  // parameter -> (bucket, member)
  std::vector<char> filled_;
  size_t next_ = 0;  // the next bucket to start
  bool in_step_ = false;
  SyncStats stats_;
};

}  // namespace tg::dist
