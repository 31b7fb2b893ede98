// Reductions on the GPU. Rows (inner == 1): one block a row, each thread folding a strided share,
// then a fixed tree in shared memory. Columns (inner > 1): one thread an output, folding R in order
// (neighbouring threads read neighbouring columns: coalesced). Few outputs over a long R take two
// passes (reduce_plan in reduce.h): pieces of R folded in parallel, then the pieces in order. Every
// order is fixed by the shape: deterministic.
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

// Block b (first + blockIdx.x) folds piece b % chunks (positions [c chunk, (c + 1) chunk) of R) of
// row b / chunks into out[b]; chunks == 1, chunk == R: a whole row.
template <class T>
__global__ void reduce_rows(Reduce f, const T* x, T* out, int64_t R, int64_t chunk, int64_t chunks, int64_t first) {
  __shared__ T part[kRowThreads];
  const int64_t b = first + static_cast<int64_t>(blockIdx.x), c = b % chunks;
  const T* row = x + (b / chunks) * R;
  const int64_t r0 = c * chunk, r1 = r0 + chunk < R ? r0 + chunk : R;
  T acc = identity<T>(f);
  for (int64_t r = r0 + threadIdx.x; r < r1; r += kRowThreads) acc = combine(f, acc, row[r]);
  part[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned s = kRowThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) part[threadIdx.x] = combine(f, part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) out[b] = part[0];
}

// Thread t folds piece c of column (o, j) — positions [c chunk, (c + 1) chunk) of R — into
// partial[(o chunks + c) inner + j]: the layout [outer, chunks, inner] reduce_columns then folds.
template <class T>
__global__ void reduce_column_pieces(Reduce f, const T* x, T* partial, int64_t outer, int64_t R, int64_t inner,
                                     int64_t chunk, int64_t chunks) {
  const int64_t n = outer * chunks * inner;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = t % inner, c = (t / inner) % chunks, o = t / (inner * chunks);
    const int64_t r0 = c * chunk, r1 = r0 + chunk < R ? r0 + chunk : R;
    const T* p = x + (o * R + r0) * inner + j;
    T acc = identity<T>(f);
    for (int64_t r = r0; r < r1; r += 8, p += 8 * inner) {  // 8 loads in flight, folded in order
      T v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = r + u < r1 ? p[u * inner] : identity<T>(f);
#pragma unroll
      for (int u = 0; u < 8; ++u) acc = r + u < r1 ? combine(f, acc, v[u]) : acc;
    }
    partial[t] = acc;
  }
}

template <class T>
__global__ void reduce_columns(Reduce f, const T* x, T* out, int64_t outer, int64_t R, int64_t inner) {
  const int64_t n = outer * inner;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = t / inner, j = t % inner;
    const T* p = x + o * R * inner + j;
    T acc = identity<T>(f);
    for (int64_t r = 0; r < R; r += 8, p += 8 * inner) {  // 8 loads in flight, folded in order
      T v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = r + u < R ? p[u * inner] : identity<T>(f);
#pragma unroll
      for (int u = 0; u < 8; ++u) acc = r + u < R ? combine(f, acc, v[u]) : acc;
    }
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
    const ReducePlan plan = reduce_plan(a.outer, a.R, a.inner);
    const bool split = plan.chunks > 1 && a.scratch != nullptr;
    // Blocks of rows (each a row or a piece of one), 65,535 a launch (gridDim.x may be larger; this keeps it plain).
    auto rows = [&](const T* src, T* dst, int64_t R, int64_t chunk, int64_t chunks, int64_t blocks) {
      for (int64_t b = 0; b < blocks; b += 65535) {
        const int64_t nb = blocks - b < 65535 ? blocks - b : 65535;
        reduce_rows<T><<<static_cast<unsigned>(nb), kRowThreads, 0, s>>>(a.f, src, dst, R, chunk, chunks, b), cuda_rt::count_launch();
      }
    };
    if (a.inner == 1 && a.R > 1) {
      if (split) {  // pieces of each row, then each row's pieces in order
        T* part = static_cast<T*>(a.scratch);
        rows(x, part, a.R, plan.chunk, plan.chunks, a.outer * plan.chunks);
        rows(part, out, plan.chunks, plan.chunks, 1, a.outer);
      } else {
        rows(x, out, a.R, a.R, 1, a.outer);
      }
    } else if (split) {  // pieces of each column, then each column's pieces in order
      T* part = static_cast<T*>(a.scratch);
      reduce_column_pieces<T><<<blocks_for(plan.scratch), kThreads, 0, s>>>(a.f, x, part, a.outer, a.R, a.inner,
                                                                             plan.chunk, plan.chunks), cuda_rt::count_launch();
      reduce_columns<T><<<blocks_for(n), kThreads, 0, s>>>(a.f, part, out, a.outer, plan.chunks, a.inner), cuda_rt::count_launch();
    } else {
      reduce_columns<T><<<blocks_for(n), kThreads, 0, s>>>(a.f, x, out, a.outer, a.R, a.inner), cuda_rt::count_launch();
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
        arg_rows<T><<<static_cast<unsigned>(rows), kRowThreads, 0, s>>>(a.max, x + o * a.R, values + o, a.indices + o, a.R), cuda_rt::count_launch();
      }
    } else {
      arg_columns<T><<<blocks_for(n), kThreads, 0, s>>>(a.max, x, values, a.indices, a.outer, a.R, a.inner), cuda_rt::count_launch();
    }
  };
  if (a.type == Scalar::kF64) run(double{});
  else run(float{});
  cuda_rt::after_launch(a.device, a.op);
}

}  // namespace tg::cuda_ops
