#pragma once
// What the GPU kernels of ops/cuda/ share: launch sizes, the device's stream, the grid-stride
// loop, the index flag, and a block's fold in a fixed tree (the same order every run: deterministic sums).
#include <cstdint>
#include <initializer_list>

#include <cuda_runtime.h>

#include "graph/cuda/runtime.h"
#include "ops/cuda/math.h"

namespace tg::cuda_ops {

constexpr unsigned kThreads = 256;  // threads a block of the elementwise-style kernels

// Blocks for n elements of a grid-stride loop: enough to fill the card, at most 8192.
inline unsigned blocks_for(int64_t n, unsigned threads = kThreads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 8192 ? (b > 0 ? b : 1) : 8192);
}
inline cudaStream_t stream_of(int device) { return static_cast<cudaStream_t>(cuda_rt::stream(device)); }

// The pointers the next kernel launched from this thread finds inside a struct argument, for the dry
// run (tools/cuda_dry checks them as it checks pointer parameters). Defined only by the dry runtime:
// a weak symbol, null in every other build, so the call costs one test.
extern "C" void tg_cuda_dry_pointers(const void* const* ptrs, int n) __attribute__((weak));
inline void dry_pointers(std::initializer_list<const void*> ptrs) {
  if (tg_cuda_dry_pointers != nullptr) tg_cuda_dry_pointers(ptrs.begin(), static_cast<int>(ptrs.size()));
}

#define TG_GRID_LOOP(i, n)                                                                      \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);        \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// The block's sum (or NaN-propagating max, with kMax) of every thread's v, returned to every
// thread; part: blockDim.x values of shared memory (a power of two), free again on return.
template <class T, bool kMax>
__device__ T block_fold(T v, T* part) {
  part[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) {
      part[threadIdx.x] = kMax ? math::binary<T>(math::Binary::kMax, part[threadIdx.x], part[threadIdx.x + s])
                               : part[threadIdx.x] + part[threadIdx.x + s];
    }
    __syncthreads();
  }
  const T r = part[0];
  __syncthreads();
  return r;
}

// Raises the device's index flag once (the first bad index wins) with what the host will report at
// the next synchronization (graph/cuda/runtime.h).
__device__ inline void flag_bad_index(cuda_rt::IndexError* flag, const char* op, int64_t value, int64_t limit) {
  if (atomicCAS(&flag->raised, 0, 1) == 0) {
    flag->op = op;
    flag->value = value;
    flag->limit = limit;
    __threadfence_system();
  }
}

}  // namespace tg::cuda_ops
