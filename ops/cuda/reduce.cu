// Reductions on the GPU. Rows (inner == 1): one block a row, each thread folding a strided share,
// then a fixed tree in shared memory. Columns (inner > 1): one thread an output, folding R in order
// (neighbouring threads read neighbouring columns: coalesced). Both orders are fixed: deterministic.
#include <cstdint>

#include "ops/cuda/launch.cuh"
#include "ops/cuda/reduce.h"

namespace tg::cuda_ops {
namespace {

constexpr unsigned kRowThreads = 256;  // one block a row

template <class T>
__device__ __forceinline__ T combine(Reduce f, T a, T b) {
  switch (f) {
    case Reduce::kSum: return a + b;
    case Reduce::kMax: return math::binary<T>(math::Binary::kMax, a, b);
    case Reduce::kMin: return math::binary<T>(math::Binary::kMin, a, b);
  }
  return a;
}
template <class T>
__device__ __forceinline__ T identity(Reduce f) {
  if (f == Reduce::kMax) return -static_cast<T>(INFINITY);
  if (f == Reduce::kMin) return static_cast<T>(INFINITY);
  return T(0);
}

template <class T>
__global__ void reduce_rows(Reduce f, const T* x, T* out, int64_t R) {
  __shared__ T part[kRowThreads];
  const T* row = x + static_cast<int64_t>(blockIdx.x) * R;
  T acc = identity<T>(f);
  for (int64_t r = threadIdx.x; r < R; r += kRowThreads) acc = combine(f, acc, row[r]);
  part[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned s = kRowThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) part[threadIdx.x] = combine(f, part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}

template <class T>
__global__ void reduce_columns(Reduce f, const T* x, T* out, int64_t outer, int64_t R, int64_t inner) {
  const int64_t n = outer * inner;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = t / inner, j = t % inner;
    const T* p = x + o * R * inner + j;
    T acc = identity<T>(f);
    for (int64_t r = 0; r < R; ++r) acc = combine(f, acc, p[r * inner]);
    out[t] = acc;
  }
}

// (value, index) pairs: is b the better extreme than a? NaN first, then the extreme, ties to the lower index.
template <class T>
__device__ __forceinline__ bool better(bool max, T bv, int64_t bi, T av, int64_t ai) {
  const bool an = av != av, bn = bv != bv;
  if (an || bn) return bn && (!an || bi < ai);
  if (bv == av) return bi < ai;
  return max ? bv > av : bv < av;
}

template <class T>
__global__ void arg_rows(bool max, const T* x, T* values, int64_t* indices, int64_t R) {
  __shared__ T pv[kRowThreads];
  __shared__ int64_t pi[kRowThreads];
  const T* row = x + static_cast<int64_t>(blockIdx.x) * R;
  T bv = row[0];
  int64_t bi = 0;
  for (int64_t r = threadIdx.x; r < R; r += kRowThreads) {
    if (better(max, row[r], r, bv, bi)) {
      bv = row[r];
      bi = r;
    }
  }
  pv[threadIdx.x] = bv;
  pi[threadIdx.x] = bi;
  __syncthreads();
  for (unsigned s = kRowThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s && better(max, pv[threadIdx.x + s], pi[threadIdx.x + s], pv[threadIdx.x], pi[threadIdx.x])) {
      pv[threadIdx.x] = pv[threadIdx.x + s];
      pi[threadIdx.x] = pi[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    values[blockIdx.x] = pv[0];
    indices[blockIdx.x] = pi[0];
  }
}

template <class T>
__global__ void arg_columns(bool max, const T* x, T* values, int64_t* indices, int64_t outer, int64_t R, int64_t inner) {
  const int64_t n = outer * inner;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = t / inner, j = t % inner;
    const T* p = x + o * R * inner + j;
    T bv = p[0];
    int64_t bi = 0;
    for (int64_t r = 1; r < R && bv == bv; ++r) {
      const T v = p[r * inner];
      if (v != v || (max ? v > bv : v < bv)) {
        bv = v;
        bi = r;
      }
    }
    values[t] = bv;
    indices[t] = bi;
  }
}

}  // namespace

void reduce(const ReduceArgs& a) {
  const int64_t n = a.outer * a.inner;
  if (n == 0) return;
  cudaStream_t s = stream_of(a.device);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(a.x);
    T* out = static_cast<T*>(a.out);
    if (a.inner == 1 && a.R > 1) {
      for (int64_t o = 0; o < a.outer; o += 65535) {  // gridDim.x may be larger; chunks keep it plain
        const int64_t rows = a.outer - o < 65535 ? a.outer - o : 65535;
        reduce_rows<T><<<static_cast<unsigned>(rows), kRowThreads, 0, s>>>(a.f, x + o * a.R, out + o, a.R);
      }
    } else {
      reduce_columns<T><<<blocks_for(n), kThreads, 0, s>>>(a.f, x, out, a.outer, a.R, a.inner);
    }
  };
  if (a.type == Scalar::kF64) run(double{});
  else run(float{});
  cuda_rt::after_launch(a.device, a.op);
}

void arg_reduce(const ArgReduceArgs& a) {
  const int64_t n = a.outer * a.inner;
  if (n == 0 || a.R == 0) return;
  cudaStream_t s = stream_of(a.device);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(a.x);
    T* values = static_cast<T*>(a.values);
    if (a.inner == 1) {
      for (int64_t o = 0; o < a.outer; o += 65535) {
        const int64_t rows = a.outer - o < 65535 ? a.outer - o : 65535;
        arg_rows<T><<<static_cast<unsigned>(rows), kRowThreads, 0, s>>>(a.max, x + o * a.R, values + o, a.indices + o, a.R);
      }
    } else {
      arg_columns<T><<<blocks_for(n), kThreads, 0, s>>>(a.max, x, values, a.indices, a.outer, a.R, a.inner);
    }
  };
  if (a.type == Scalar::kF64) run(double{});
  else run(float{});
  cuda_rt::after_launch(a.device, a.op);
}

}  // namespace tg::cuda_ops
