#pragma once
// tg::cuda: the GPU as a user sees it. Nothing here needs a CUDA header, and nothing initialises
// CUDA until a GPU is asked for: a CUDA-enabled build runs CPU programs where there is no GPU or
// driver exactly as a CPU-only build does.
//
//   if (tg::cuda::available()) model.to(tg::Device::cuda());
//   ...
//   tg::cuda::MemoryStats m = tg::cuda::memory_stats();   // allocated, reserved, peak
//
// Work on a GPU is queued on one in-order stream per device, in the order ops are called (from any
// host thread); copies to the CPU (to(cpu), item(), to_vector(), printing) wait for it.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "device.h"

namespace tg::detail {
struct GraphState;
}  // namespace tg::detail

namespace tg::cuda {

bool built();            // this library was compiled with CUDA
bool available();        // built() and at least one usable GPU (never throws)
int device_count();      // usable GPUs (0 without CUDA, driver or GPU)
// Why no GPU is usable: "built without CUDA", "no NVIDIA driver", "no CUDA device", a driver older
// than the toolkit needs ...; "" when one is.
std::string unavailable_reason();
// The GPU's name and compute capability, e.g. "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)".
std::string describe(int device = 0);
// The CUDA architectures this build has code for, e.g. "80-real;90-real;90-virtual" ("" without CUDA).
const char* built_architectures();

// Waits until every op queued on the device has finished.
void synchronize(int device = 0);

// The caching allocator: GPU buffers freed by tensors go back to a cache by size class and serve
// the next request of that class without cudaMalloc.
struct MemoryStats {
  size_t allocated = 0;       // bytes held by live tensors (rounded to their size class)
  size_t reserved = 0;        // allocated + cached, all obtained from cudaMalloc
  size_t peak_allocated = 0;  // the most `allocated` since the start or reset_peak_memory()
  size_t device_mallocs = 0;  // cudaMalloc calls so far (steady loops should add none)
  size_t graph_held = 0;      // freed buffers that CUDA graphs keep for their replays (in reserved)
};
MemoryStats memory_stats(int device = 0);
void reset_peak_memory(int device = 0);
void empty_cache(int device = 0);  // returns cached (unused) buffers to the driver
// Caps what the allocator may hold from the driver (tensors + cache); past it a request fails with
// one line, as a real out-of-memory does. 0: no cap (the default).
void set_memory_limit(size_t bytes, int device = 0);

// Float32 products on the GPU are exact float32 by default; TF32 (10-bit mantissas, much faster
// on Ampere and later) only when allowed here (also TG_CUDA_TF32=1), as torch's allow_tf32.
void set_allow_tf32(bool on);
bool allow_tf32();

// Debugging: after every GPU op, wait for it and check for errors, so that an asynchronous fault is
// blamed on the op that caused it (also TG_CUDA_SYNC=1 in the environment). Slow.
void set_sync_debug(bool on);
bool sync_debug();
// Testing: fill every GPU buffer tapegrad allocates with 0xFF bytes (NaN in floats, true in bools,
// -1 in int64), so that a kernel that skips an element of its output shows (also TG_CUDA_POISON=1).
void set_poison_allocations(bool on);
bool poison_allocations();
// Kernels (and copies, fills, cuBLASLt calls) launched so far by tapegrad, all devices, each kernel
// of an op counted (tests check an op really ran on the GPU; benchmarks count kernels a step).
uint64_t kernel_launches();

// Times the host has waited for a GPU so far (synchronize, item, to_vector, copies to the CPU),
// all devices. A training step that keeps the GPU busy makes none between its log steps.
uint64_t host_waits();
// While one is alive on this thread, a host wait for a GPU throws one line naming the op that
// asked for it instead of waiting (what a step that must not sync can be checked with).
class ForbidHostWaits {
 public:
  ForbidHostWaits();
  ~ForbidHostWaits();
  ForbidHostWaits(const ForbidHostWaits&) = delete;
  ForbidHostWaits& operator=(const ForbidHostWaits&) = delete;

 private:
  bool outer_;
};

// Where a GPU's time goes, op by op (as torch.profiler's kernel table): while a KernelProfile is
// alive, every op launched on `device` is followed by a CUDA event on its stream; table() waits for
// the GPU and sums, by the op that launched them, the times from each event to the next. While the
// GPU is kept busy that is the op's kernel time; when the host falls behind, it includes the wait
// for the launch (time the GPU sat idle before that op). The events cost a few microseconds of host
// time a launch: profile a few steps, not a run. One profile at a time.
//
//   tg::cuda::KernelProfile prof;
//   for (int i = 0; i < 3; ++i) step();
//   for (const auto& row : prof.table()) fmt::print("{:<24} {:8.3f} ms {:6} launches\n", row.op, row.ms, row.launches);
struct OpTime {
  std::string op;
  double ms = 0;
  uint64_t launches = 0;
};
class KernelProfile {
 public:
  explicit KernelProfile(int device = 0);
  ~KernelProfile();  // stops profiling (if table() did not)
  KernelProfile(const KernelProfile&) = delete;
  KernelProfile& operator=(const KernelProfile&) = delete;
  // Stops profiling and returns each op's total time and launches, the largest time first (ties by
  // name). A second call returns the same table.
  const std::vector<OpTime>& table();

 private:
  int device_;
  bool done_ = false;
  std::vector<OpTime> table_;
};
// The table of launches (op, ms) in launch order: sums by op, largest first (ties by name).
std::vector<OpTime> op_time_table(const std::vector<std::pair<std::string, double>>& launches);

// A CUDA graph of one training step (what torch.cuda.CUDAGraph does): capture(step) runs `step`
// once, as usual, recording every kernel it queues on the device; replay() runs them all again with
// one launch and none of the host work. A step of a small model then costs the GPU's time, not
// ~3 microseconds of host time a kernel.
//
//   for (int i = 0; i < 3; ++i) step();        // warm-up: optimizer state, bf16 copies, caches
//   tg::cuda::Graph graph;
//   graph.capture(step);                       // step 4: run and recorded
//   for (int i = 0; i < 1000; ++i) {
//     src.copy_(next_src);                     // new inputs: copied into the tensors the step reads
//     graph.replay();                          // steps 5, 6, ...
//     if (i % 100 == 0) fmt::print("{}\n", loss.item());   // results: read from its tensors
//   }
//
// A replay gives the bits the step would give run eagerly, carrying over what changes from step
// to step: each dropout's next key (from the global generator or the thread's SampleKeyScope, which
// must then be open, for as many samples), the optimizers' step counts and bias corrections, their
// learning rate (set_lr between replays is seen), and the step number of clip_grad_norm_ and
// NonFiniteFlag::check (one more each replay). Everything else is as captured: shapes, the tensors
// read and written (the same memory), other arguments, and the host code of `step`, which does not
// run again (a schedule, a counter or a print belongs outside it). While capturing, reading a GPU
// value on the host, copying host data to the GPU and KernelProfile refuse with one line; use the
// device from this thread only. Every tensor, module and optimizer the step uses must outlive the
// graph (a replay updates the optimizer's counts), and the memory its capture allocated stays
// reserved for it until it is destroyed (memory_stats().graph_held).
// A refused capture has run the step's host code up to the refusal and none of its GPU work:
// gradients it made are unwritten (zero_grad before going on), dropout keys drawn. An optimizer's
// state must exist before the capture (an eager step first).
class Graph {
 public:
  explicit Graph(int device = 0);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void capture(const std::function<void()>& step);  // once per Graph
  void replay();
  bool captured() const;
  size_t nodes() const;  // kernels, copies and fills recorded (0 before capture)
  int device() const;

 private:
  std::unique_ptr<detail::GraphState> s_;
};

// For your own CUDA kernels: the stream tapegrad queues work on for `device`, as an opaque handle
// (a cudaStream_t: `static_cast<cudaStream_t>(tg::cuda::stream(0))`). Launch on it and tapegrad's
// ops before and after yours run in order. Tensor::cuda_data<T>() gives a GPU tensor's pointer.
void* stream(int device = 0);
// Call after launching your own kernel: throws one line naming `op` if the launch failed (and, in
// sync-debug mode, if the kernel did).
void check_launch(const char* op, int device = 0);

}  // namespace tg::cuda
