// Strided copies and index ops on the GPU: one grid-stride loop each, moving elements as unsigned
// integers of their size (any dtype).
#include <cstdint>

#include <cub/device/device_radix_sort.cuh>

#include "ops/cuda/launch.cuh"
#include "ops/cuda/shape.h"

namespace tg::cuda_ops {
namespace {

struct Layout {
  int rank;
  int64_t size[kMaxCopyRank];
  int64_t stride[kMaxCopyRank];
};
__device__ __forceinline__ int64_t offset_of(const Layout& l, int64_t i) {
  int64_t off = 0;
  for (int d = l.rank - 1; d >= 0; --d) {
    off += (i % l.size[d]) * l.stride[d];
    i /= l.size[d];
  }
  return off;
}

template <class T>
__global__ void copy_kernel(Layout l, int64_t n, const T* src, T* dst, bool scatter) {
  TG_GRID_LOOP(i, n) {
    const int64_t o = offset_of(l, i);
    if (scatter) dst[o] = src[i];
    else dst[i] = src[o];
  }
}

template <class T>
__global__ void index_select_kernel(const T* src, T* dst, const int64_t* index, int64_t n, int64_t R, int64_t inner,
                                    int64_t total, cuda_rt::IndexError* flag, const char* op) {
  TG_GRID_LOOP(t, total) {
    const int64_t j = t % inner;
    const int64_t oi = t / inner;  // o * n + i
    const int64_t i = oi % n, o = oi / n;
    const int64_t id = index[i];
    if (id < 0 || id >= R) {
      if (j == 0) flag_bad_index(flag, op, id, R);
      dst[t] = T(0);
    } else {
      dst[t] = src[(o * R + id) * inner + j];
    }
  }
}

template <class T>
__global__ void gather_kernel(Layout l, int dim, int64_t limit, int64_t n, const T* src, T* dst, const int64_t* index,
                              cuda_rt::IndexError* flag, const char* op) {
  TG_GRID_LOOP(i, n) {
    int64_t rest = i, base = 0;
    for (int d = l.rank - 1; d >= 0; --d) {
      if (d != dim) base += (rest % l.size[d]) * l.stride[d];
      rest /= l.size[d];
    }
    const int64_t id = index[i];
    if (id < 0 || id >= limit) {
      flag_bad_index(flag, op, id, limit);
      dst[i] = T(0);
    } else {
      dst[i] = src[base + id * l.stride[dim]];
    }
  }
}

template <class T>
__global__ void index_add_columns(const T* src, T* dst, const int64_t* index, int64_t outer, int64_t n, int64_t inner,
                                  int64_t R, T alpha, cuda_rt::IndexError* flag, const char* op) {
  TG_GRID_LOOP(c, outer * inner) {
    const int64_t o = c / inner, j = c % inner;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t id = index[k];
      if (id < 0 || id >= R) {
        flag_bad_index(flag, op, id, R);
        continue;
      }
      T* d = dst + (o * R + id) * inner + j;
      *d = *d + alpha * src[(o * n + k) * inner + j];
    }
  }
}

struct ScatterLayout {
  int rank, dim;
  int64_t size[kMaxCopyRank], dst_stride[kMaxCopyRank], src_stride[kMaxCopyRank];
};

template <class T>
__global__ void scatter_add_columns(ScatterLayout l, int64_t cols, int64_t R, const T* src, T* dst, const int64_t* index,
                                    cuda_rt::IndexError* flag, const char* op) {
  TG_GRID_LOOP(c, cols) {
    int64_t rem = c, dst_base = 0, src_base = 0;
    for (int d = l.rank - 1; d >= 0; --d) {
      if (d == l.dim) continue;
      const int64_t x = rem % l.size[d];
      rem /= l.size[d];
      dst_base += x * l.dst_stride[d];
      src_base += x * l.src_stride[d];
    }
    for (int64_t k = 0; k < l.size[l.dim]; ++k) {
      const int64_t off = src_base + k * l.src_stride[l.dim], id = index[off];
      if (id < 0 || id >= R) {
        flag_bad_index(flag, op, id, R);
        continue;
      }
      T* d = dst + dst_base + id * l.dst_stride[l.dim];
      *d = *d + src[off];
    }
  }
}

// Sorted index_add: keys (rows; R for an index out of range, flagged) and positions, then after the
// stable sort one thread per (outer, run start, column) adds the run in position order.
constexpr int64_t kSortAbove = 64;  // positions from which index_add sorts

__global__ void sort_keys_kernel(const int64_t* index, int64_t n, int64_t R, int64_t* keys, int64_t* positions,
                                 cuda_rt::IndexError* flag, const char* op) {
  TG_GRID_LOOP(k, n) {
    const int64_t id = index[k];
    if (id < 0 || id >= R) flag_bad_index(flag, op, id, R);
    keys[k] = id >= 0 && id < R ? id : R;
    positions[k] = k;
  }
}

template <class T>
__global__ void sorted_runs_kernel(const int64_t* keys, const int64_t* positions, const T* src, T* dst, int64_t outer,
                                   int64_t n, int64_t inner, int64_t R, T alpha) {
  TG_GRID_LOOP(t, outer * n * inner) {
    const int64_t j = t % inner, p = (t / inner) % n, o = t / (inner * n);
    const int64_t key = keys[p];
    if ((p > 0 && keys[p - 1] == key) || key == R) continue;  // not a run's start, or out of range
    T* d = dst + (o * R + key) * inner + j;
    // The run's end first (its keys are hot in cache), then a counted loop the compiler can unroll
    // and pipeline: the same sums in the same order.
    int64_t end = p + 1;
    while (end < n && keys[end] == key) ++end;
    const T* base = src + o * n * inner + j;
    T acc = *d;
#pragma unroll 4
    for (int64_t q = p; q < end; ++q) acc = acc + alpha * base[positions[q] * inner];
    *d = acc;
  }
}

int key_bits(int64_t R) {  // bits that hold 0 .. R
  int b = 1;
  while (b < 63 && (int64_t{1} << b) <= R) ++b;
  return b;
}

template <class F>
void by_size(int bytes, F&& f) {
  switch (bytes) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    default: f(uint64_t{}); break;
  }
}

}  // namespace

void strided_copy(const CopyArgs& a) {
  Layout l{a.rank, {}, {}};
  int64_t n = 1;
  for (int d = 0; d < a.rank; ++d) {
    l.size[d] = a.size[d];
    l.stride[d] = a.stride[d];
    n *= a.size[d];
  }
  if (n == 0) return;
  cudaStream_t s = stream_of(a.device);
  by_size(a.elem_bytes, [&](auto tag) {
    using T = decltype(tag);
    copy_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(l, n, static_cast<const T*>(a.src), static_cast<T*>(a.dst), a.scatter), cuda_rt::count_launch();
  });
  cuda_rt::after_launch(a.device, a.op);
}

void index_select(const IndexSelectArgs& a) {
  const int64_t total = a.outer * a.n * a.inner;
  if (total == 0) return;
  cudaStream_t s = stream_of(a.device);
  cuda_rt::IndexError* flag = cuda_rt::index_error_flag(a.device);
  by_size(a.elem_bytes, [&](auto tag) {
    using T = decltype(tag);
    index_select_kernel<T><<<blocks_for(total), kThreads, 0, s>>>(static_cast<const T*>(a.src), static_cast<T*>(a.dst),
                                                                  a.index, a.n, a.R, a.inner, total, flag, a.op), cuda_rt::count_launch();
  });
  cuda_rt::after_launch(a.device, a.op);
}

void gather(const GatherArgs& a) {
  Layout l{a.rank, {}, {}};
  int64_t n = 1;
  for (int d = 0; d < a.rank; ++d) {
    l.size[d] = a.index_size[d];
    l.stride[d] = a.src_stride[d];
    n *= a.index_size[d];
  }
  if (n == 0) return;
  cudaStream_t s = stream_of(a.device);
  cuda_rt::IndexError* flag = cuda_rt::index_error_flag(a.device);
  by_size(a.elem_bytes, [&](auto tag) {
    using T = decltype(tag);
    gather_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(l, a.dim, a.limit, n, static_cast<const T*>(a.src),
                                                        static_cast<T*>(a.dst), a.index, flag, a.op), cuda_rt::count_launch();
  });
  cuda_rt::after_launch(a.device, a.op);
}

namespace {
// CUB's temporary storage for sorting n keys below 2^key_bits(R), rounded up to 256 bytes: the
// scratch holds it first (at the allocation's alignment), then keys and positions in and out.
size_t cub_sort_bytes(int64_t n, int64_t R) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int64_t*>(nullptr), static_cast<int64_t*>(nullptr),
                                  static_cast<const int64_t*>(nullptr), static_cast<int64_t*>(nullptr), n, 0, key_bits(R));
  return (bytes + 255) / 256 * 256;
}
}  // namespace

size_t index_add_scratch_bytes(int64_t n, int64_t R) {
  if (n <= kSortAbove) return 0;
  return cub_sort_bytes(n, R) + 4 * static_cast<size_t>(n) * sizeof(int64_t);
}

void scatter_add(const ScatterAddArgs& a) {
  cudaStream_t s = stream_of(a.device);
  cuda_rt::IndexError* flag = cuda_rt::index_error_flag(a.device);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    if (a.rank == 0 && a.scratch != nullptr && a.n > kSortAbove) {
      if (a.outer * a.inner == 0) return;
      size_t cub_bytes = cub_sort_bytes(a.n, a.R);
      void* cub_temp = a.scratch;
      int64_t* keys_in = reinterpret_cast<int64_t*>(static_cast<char*>(a.scratch) + cub_bytes);
      int64_t* keys = keys_in + a.n;
      int64_t* pos_in = keys + a.n;
      int64_t* pos = pos_in + a.n;
      sort_keys_kernel<<<blocks_for(a.n), kThreads, 0, s>>>(a.index, a.n, a.R, keys_in, pos_in, flag, a.op), cuda_rt::count_launch();
      cuda_rt::check_status(static_cast<int>(cub::DeviceRadixSort::SortPairs(cub_temp, cub_bytes, keys_in, keys, pos_in,
                                                                             pos, a.n, 0, key_bits(a.R), s)),
                            a.device, a.op, "the index sort");
      cuda_rt::count_launch();  // (CUB's sort: counted as one)
      const int64_t total = a.outer * a.n * a.inner;
      sorted_runs_kernel<T><<<blocks_for(total), kThreads, 0, s>>>(keys, pos, static_cast<const T*>(a.src),
                                                                   static_cast<T*>(a.dst), a.outer, a.n, a.inner, a.R,
                                                                   static_cast<T>(a.alpha)), cuda_rt::count_launch();
      return;
    }
    if (a.rank == 0) {
      const int64_t cols = a.outer * a.inner;
      if (cols == 0 || a.n == 0) return;
      index_add_columns<T><<<blocks_for(cols), kThreads, 0, s>>>(static_cast<const T*>(a.src), static_cast<T*>(a.dst),
                                                                 a.index, a.outer, a.n, a.inner, a.R,
                                                                 static_cast<T>(a.alpha), flag, a.op), cuda_rt::count_launch();
      return;
    }
    ScatterLayout l{a.rank, a.dim, {}, {}, {}};
    int64_t cols = 1, stride = 1;
    for (int d = a.rank - 1; d >= 0; --d) {
      l.size[d] = a.size[d];
      l.dst_stride[d] = a.dst_stride[d];
      l.src_stride[d] = stride;
      stride *= a.size[d];
      if (d != a.dim) cols *= a.size[d];
    }
    if (cols == 0 || a.size[a.dim] == 0) return;
    scatter_add_columns<T><<<blocks_for(cols), kThreads, 0, s>>>(l, cols, a.R, static_cast<const T*>(a.src),
                                                                 static_cast<T*>(a.dst), a.index, flag, a.op), cuda_rt::count_launch();
  };
  if (a.type == Scalar::kF64) run(double{});
  else run(float{});
  cuda_rt::after_launch(a.device, a.op);
}

}  // namespace tg::cuda_ops
