// The optimizers' GPU kernels: a block per chunk of kOptimChunk elements of one tensor of the
// table (which tensor: a binary search over the blocks' prefix), the update formulas of
// ops/cuda/math.h (the CPU kernels' scalar tails), and the norm's sums in a fixed tree (deterministic).
#include <cstdint>
#include <type_traits>

#include "ops/cuda/launch.cuh"
#include "ops/cuda/optim.h"

namespace tg::cuda_ops {
namespace {

// first[i]: the first block of tensor i; first[count]: the blocks in all.
struct BlockMap {
  int count = 0;
  int64_t first[kMaxTensors + 1] = {};
};

BlockMap block_map(const OptimTable& t) {
  BlockMap m;
  m.count = t.count;
  for (int i = 0; i < t.count; ++i) m.first[i + 1] = m.first[i] + (t.n[i] + kOptimChunk - 1) / kOptimChunk;
  return m;
}

// The tensor block b works on: the last i with first[i] <= b.
__device__ int tensor_of(const BlockMap& m, int64_t b) {
  int lo = 0, hi = m.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (m.first[mid] <= b) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// This block's tensor of the table and its range of elements [start, end).
struct Chunk {
  int tensor;
  int64_t start, end;
};
__device__ Chunk chunk_of(const OptimTable& t, const BlockMap& m) {
  const int64_t b = blockIdx.x;
  const int i = tensor_of(m, b);
  const int64_t start = (b - m.first[i]) * kOptimChunk;
  return {i, start, start + kOptimChunk < t.n[i] ? start + kOptimChunk : t.n[i]};
}

// Autocast's bfloat16 copy of a float32 parameter, rewritten with its update (float64: none).
template <class T>
__device__ void write_copy(void* copy, int64_t j, T value) {
  if constexpr (std::is_same_v<T, float>) {
    if (copy != nullptr) static_cast<uint16_t*>(copy)[j] = math::float_to_bf16(value);
  }
}

__device__ void raise_flag(int64_t* flag, int64_t step) {
  if (atomicCAS(reinterpret_cast<unsigned long long*>(flag), 0ull, 1ull) == 0ull) {
    flag[1] = step;
    __threadfence();
  }
}

template <class T>
__global__ void adam_kernel(__grid_constant__ const OptimTable t, __grid_constant__ const BlockMap map, T b1, T b2,
                            T eps, T wd_l2, T decay, const int64_t* skip, const double* scalars) {
  if (skip != nullptr && skip[0] != 0) return;
  const Chunk c = chunk_of(t, map);
  const int i = c.tensor;
  const int64_t start = c.start, end = c.end;
  T* p = static_cast<T*>(t.p[i]);
  const T* g = static_cast<const T*>(t.g[i]);
  T* m = static_cast<T*>(t.m[i]);
  T* v = static_cast<T*>(t.v[i]);
  T step_size = static_cast<T>(t.step_size[i]), inv = static_cast<T>(t.inv_sqrt_bc2[i]);
  if (scalars != nullptr) {  // (a CUDA graph's step values)
    decay = static_cast<T>(scalars[0]);
    step_size = static_cast<T>(scalars[1 + i]);
    inv = static_cast<T>(scalars[1 + t.count + i]);
  }
  for (int64_t j = start + threadIdx.x; j < end; j += blockDim.x) {
    T pj = p[j], mj = m[j], vj = v[j];
    math::adam_element(pj, g[j], mj, vj, b1, b2, eps, step_size, inv, wd_l2, decay);
    p[j] = pj;
    m[j] = mj;
    v[j] = vj;
    write_copy(t.bf16[i], j, pj);
  }
}

template <class T>
__global__ void sgd_kernel(__grid_constant__ const OptimTable t, __grid_constant__ const BlockMap map, T lr, T wd, T mu,
                           T dampening, bool nesterov, const int64_t* skip, const double* scalars) {
  if (skip != nullptr && skip[0] != 0) return;
  const Chunk c = chunk_of(t, map);
  const int i = c.tensor;
  const int64_t start = c.start, end = c.end;
  T* p = static_cast<T*>(t.p[i]);
  const T* g = static_cast<const T*>(t.g[i]);
  T* buf = static_cast<T*>(t.m[i]);
  bool first = t.first[i];
  if (scalars != nullptr) {  // (a CUDA graph's step values)
    lr = static_cast<T>(scalars[0]);
    first = scalars[1 + 2 * t.count + i] != 0;
  }
  for (int64_t j = start + threadIdx.x; j < end; j += blockDim.x) {
    T pj = p[j];
    math::sgd_element(pj, g[j], buf != nullptr ? buf + j : nullptr, lr, wd, mu, dampening, nesterov, first);
    p[j] = pj;
    write_copy(t.bf16[i], j, pj);
  }
}

template <class T>
__global__ void sum_squares_kernel(__grid_constant__ const OptimTable t, __grid_constant__ const BlockMap map, double* partial) {
  __shared__ double part[kThreads];
  const Chunk c = chunk_of(t, map);
  const int i = c.tensor;
  const int64_t start = c.start, end = c.end;
  const T* g = static_cast<const T*>(t.g[i]);
  double s = 0;
  for (int64_t j = start + threadIdx.x; j < end; j += blockDim.x) s += static_cast<double>(g[j]) * static_cast<double>(g[j]);
  s = block_fold<double, false>(s, part);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void finish_norm_kernel(const double* partial, int64_t blocks, double* norm, double max_norm, double scale,
                                   double* coef, int64_t* flag, int64_t step, const int64_t* step_at) {
  __shared__ double part[kThreads];
  double s = 0;
  for (int64_t j = threadIdx.x; j < blocks; j += blockDim.x) s += partial[j];
  s = block_fold<double, false>(s, part);
  if (threadIdx.x == 0) {
    const double n = sqrt(s) * scale;
    norm[0] = n;
    if (flag != nullptr && !isfinite(n)) raise_flag(flag, step_at != nullptr ? *step_at : step);
    const double c = max_norm > 0 ? max_norm / (n + 1e-6) : 1;
    coef[0] = scale * (c < 1 ? c : 1);
  }
}

template <class T>
__global__ void scale_kernel(__grid_constant__ const OptimTable t, __grid_constant__ const BlockMap map, const double* coef) {
  const double factor = coef[0];
  if (factor == 1) return;
  const Chunk c = chunk_of(t, map);
  const int i = c.tensor;
  const int64_t start = c.start, end = c.end;
  T* g = static_cast<T*>(const_cast<void*>(t.g[i]));
  const T ct = static_cast<T>(factor);
  for (int64_t j = start + threadIdx.x; j < end; j += blockDim.x) g[j] = g[j] * ct;
}

template <class T>
__global__ void check_finite_kernel(const T* x, int64_t n, int64_t* flag, int64_t step, const int64_t* step_at) {
  bool bad = false;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) bad = bad || !isfinite(x[j]);
  bad = __syncthreads_or(bad) != 0;
  if (bad && threadIdx.x == 0) raise_flag(flag, step_at != nullptr ? *step_at : step);
}

template <class F>
void float_types(Scalar t, F&& f) {
  if (t == Scalar::kF64) f(double{});
  else f(float{});
}

unsigned grid_of(const BlockMap& m) { return static_cast<unsigned>(m.first[m.count]); }

}  // namespace

static_assert(sizeof(OptimTable) + sizeof(BlockMap) + 64 <= 32764, "a launch's parameters must fit CUDA's 32,764 bytes");

// (for the dry run: every pointer of a table)
void dry_table(const OptimTable& t) {
  if (tg_cuda_dry_pointers == nullptr) return;
  const void* ptrs[5 * kMaxTensors];
  int n = 0;
  for (int i = 0; i < t.count; ++i)
    for (const void* q : {static_cast<const void*>(t.p[i]), t.g[i], static_cast<const void*>(t.m[i]),
                          static_cast<const void*>(t.v[i]), static_cast<const void*>(t.bf16[i])})
      ptrs[n++] = q;
  tg_cuda_dry_pointers(ptrs, n);
}

void optimizer_step(const OptimArgs& a) {
  const BlockMap map = block_map(a.table);
  if (a.table.count == 0 || grid_of(map) == 0) return;
  cudaStream_t s = stream_of(a.device);
  float_types(a.type, [&](auto tag) {
    using T = decltype(tag);
    dry_table(a.table);
    if (a.adam) {
      adam_kernel<T><<<grid_of(map), kThreads, 0, s>>>(a.table, map, static_cast<T>(a.b1), static_cast<T>(a.b2),
                                                        static_cast<T>(a.eps), static_cast<T>(a.wd_l2),
                                                        static_cast<T>(a.decay), a.skip_flag, a.scalars), cuda_rt::count_launch();
    } else {
      sgd_kernel<T><<<grid_of(map), kThreads, 0, s>>>(a.table, map, static_cast<T>(a.lr), static_cast<T>(a.wd),
                                                       static_cast<T>(a.mu), static_cast<T>(a.dampening), a.nesterov,
                                                       a.skip_flag, a.scalars), cuda_rt::count_launch();
    }
  });
  cuda_rt::after_launch(a.device, a.op);
}

int64_t blocks_for_norm(const OptimTable& t) { return block_map(t).first[t.count]; }

void grad_norm(const GradNormArgs& a) {
  cudaStream_t s = stream_of(a.device);
  int64_t offset = 0;
  float_types(a.type, [&](auto tag) {
    using T = decltype(tag);
    for (int k = 0; k < a.table_count; ++k) {
      const BlockMap map = block_map(a.tables[k]);
      if (grid_of(map) == 0) continue;
      dry_table(a.tables[k]);
      sum_squares_kernel<T><<<grid_of(map), kThreads, 0, s>>>(a.tables[k], map, a.partial + offset), cuda_rt::count_launch();
      offset += grid_of(map);
    }
  });
  finish_norm_kernel<<<1, kThreads, 0, s>>>(a.partial, offset, a.norm, a.max_norm, a.scale, a.coef, a.flag, a.step, a.step_at), cuda_rt::count_launch();
  cuda_rt::after_launch(a.device, a.op);
}

void scale_grads(int device, const char* op, Scalar type, const OptimTable& table, const double* coef) {
  const BlockMap map = block_map(table);
  if (grid_of(map) == 0) return;
  float_types(type, [&](auto tag) {
    using T = decltype(tag);
    dry_table(table);
    scale_kernel<T><<<grid_of(map), kThreads, 0, stream_of(device)>>>(table, map, coef), cuda_rt::count_launch();
  });
  cuda_rt::after_launch(device, op);
}

void check_finite(int device, const char* op, Scalar type, const void* x, int64_t n, int64_t* flag, int64_t step,
                  const int64_t* step_at) {
  if (n == 0) return;
  float_types(type, [&](auto tag) {
    using T = decltype(tag);
    check_finite_kernel<T><<<1, kThreads, 0, stream_of(device)>>>(static_cast<const T*>(x), n, flag, step, step_at), cuda_rt::count_launch();
  });
  cuda_rt::after_launch(device, op);
}

}  // namespace tg::cuda_ops
