// Row kernels of the nn family on the GPU: one block of 256 threads a row, each thread folding a
// strided share, combined by a fixed tree in shared memory (deterministic); and the elementwise
// kernels of the losses' targets and of dropout.
#include <cstdint>
#include <type_traits>

#include "ops/cuda/launch.cuh"
#include "ops/cuda/nn.h"

namespace tg::cuda_ops {
namespace {

constexpr unsigned kRowThreads = 256;  // one block a row

template <class T>
__global__ void softmax_rows(bool log, const T* x, T* y, int64_t D) {
  __shared__ T part[kRowThreads];
  const T* xr = x + static_cast<int64_t>(blockIdx.x) * D;
  T* yr = y + static_cast<int64_t>(blockIdx.x) * D;
  T m = -static_cast<T>(INFINITY);
  for (int64_t i = threadIdx.x; i < D; i += kRowThreads) m = math::binary<T>(math::Binary::kMax, m, xr[i]);
  m = block_fold<T, true>(m, part);
  T s = 0;
  for (int64_t i = threadIdx.x; i < D; i += kRowThreads) s += math::m_exp(xr[i] - m);
  s = block_fold<T, false>(s, part);
  if (log) {
    const T shift = m + math::m_log(s);
    for (int64_t i = threadIdx.x; i < D; i += kRowThreads) yr[i] = xr[i] - shift;
  } else {
    const T inv = T(1) / s;
    for (int64_t i = threadIdx.x; i < D; i += kRowThreads) yr[i] = math::m_exp(xr[i] - m) * inv;
  }
}

template <class T>
__global__ void softmax_columns(bool log, const T* x, T* y, int64_t outer, int64_t D, int64_t inner) {
  const int64_t n = outer * inner;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = t / inner, j = t % inner;
    const T* xr = x + o * D * inner + j;
    T* yr = y + o * D * inner + j;
    T m = -static_cast<T>(INFINITY);
    for (int64_t i = 0; i < D; ++i) m = math::binary<T>(math::Binary::kMax, m, xr[i * inner]);
    T s = 0;
    for (int64_t i = 0; i < D; ++i) s += math::m_exp(xr[i * inner] - m);
    const T ls = math::m_log(s);
    for (int64_t i = 0; i < D; ++i) {
      yr[i * inner] = log ? xr[i * inner] - m - ls : math::m_exp(xr[i * inner] - m) / s;
    }
  }
}

template <class T>
__global__ void softmax_backward_rows(bool log, const T* y, const T* g, T* dx, int64_t D) {
  __shared__ T part[kRowThreads];
  const int64_t r = blockIdx.x;
  const T* yr = y + r * D;
  const T* gr = g + r * D;
  T* dr = dx + r * D;
  T s = 0;
  for (int64_t i = threadIdx.x; i < D; i += kRowThreads) s += log ? gr[i] : gr[i] * yr[i];
  s = block_fold<T, false>(s, part);
  for (int64_t i = threadIdx.x; i < D; i += kRowThreads) dr[i] = log ? gr[i] - math::m_exp(yr[i]) * s : yr[i] * (gr[i] - s);
}

template <class T>
__global__ void softmax_backward_columns(bool log, const T* y, const T* g, T* dx, int64_t outer, int64_t D, int64_t inner) {
  TG_GRID_LOOP(t, outer * inner) {
    const int64_t base = (t / inner) * D * inner + t % inner;
    T s = 0;
    for (int64_t i = 0; i < D; ++i) s += log ? g[base + i * inner] : g[base + i * inner] * y[base + i * inner];
    for (int64_t i = 0; i < D; ++i) {
      const int64_t k = base + i * inner;
      dx[k] = log ? g[k] - math::m_exp(y[k]) * s : y[k] * (g[k] - s);
    }
  }
}

template <class T>
__global__ void norm_rows(bool rms, const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t D, T eps,
                          uint16_t* y16) {
  __shared__ T part[kRowThreads];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * D;
  T* yr = y + r * D;
  T m = 0;
  if (!rms) {
    T s = 0;
    for (int64_t i = threadIdx.x; i < D; i += kRowThreads) s += xr[i];
    m = block_fold<T, false>(s, part) / static_cast<T>(D);
  }
  T ss = 0;  // two-pass: squared deviations from the mean (from 0 for RMS norm)
  for (int64_t i = threadIdx.x; i < D; i += kRowThreads) {
    const T d = xr[i] - m;
    ss += d * d;
  }
  const T rs = T(1) / math::m_sqrt(block_fold<T, false>(ss, part) / static_cast<T>(D) + eps);
  if (threadIdx.x == 0) {
    if (!rms) mean[r] = m;
    rstd[r] = rs;
  }
  for (int64_t i = threadIdx.x; i < D; i += kRowThreads) {
    T v = (xr[i] - m) * rs;
    if (w != nullptr) v *= w[i];
    if (b != nullptr) v += b[i];
    yr[i] = v;
    if constexpr (std::is_same_v<T, float>) {
      if (y16 != nullptr) y16[r * D + i] = math::float_to_bf16(v);
    }
  }
}

template <class T>
__global__ void norm_backward_rows(bool rms, const T* x, const T* g, const T* w, const T* mean, const T* rstd, T* gx,
                                   int64_t D) {
  __shared__ T part[kRowThreads];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * D;
  const T* gr = g + r * D;
  const T m = rms ? T(0) : mean[r], rs = rstd[r];
  T s1 = 0, s2 = 0;
  for (int64_t i = threadIdx.x; i < D; i += kRowThreads) {
    const T xh = (xr[i] - m) * rs, dxh = w != nullptr ? gr[i] * w[i] : gr[i];
    s1 += dxh;
    s2 += dxh * xh;
  }
  const T mean_dxh = block_fold<T, false>(s1, part) / static_cast<T>(D);
  const T mean_dxh_xh = block_fold<T, false>(s2, part) / static_cast<T>(D);
  T* out = gx + r * D;
  for (int64_t i = threadIdx.x; i < D; i += kRowThreads) {
    const T xh = (xr[i] - m) * rs, dxh = w != nullptr ? gr[i] * w[i] : gr[i];
    out[i] = rms ? rs * (dxh - xh * mean_dxh_xh) : rs * ((dxh - mean_dxh) - xh * mean_dxh_xh);
  }
}

constexpr int64_t kNormChunk = 64;  // rows a partial sum of the parameters' gradients covers

template <class T>
__global__ void norm_param_partials(bool rms, const T* x, const T* g, const T* mean, const T* rstd, T* pw, T* pb,
                                    int64_t rows, int64_t D) {
  const int64_t c = blockIdx.x, j = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (j >= D) return;
  const int64_t r0 = c * kNormChunk, r1 = r0 + kNormChunk < rows ? r0 + kNormChunk : rows;
  T sw = 0, sb = 0;
  if (pw == nullptr) {  // column sums alone (a bias): 8 loads in flight, added in row order
    for (int64_t r = r0; r < r1; r += 8) {
      T v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = r + u < r1 ? g[(r + u) * D + j] : T(0);
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (r + u < r1) sb += v[u];
    }
  } else {  // 8 rows' loads in flight, then added in row order (the same sums as one row at a time)
    for (int64_t r = r0; r < r1; r += 8) {
      T gv[8], xh[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int64_t ru = r + u < r1 ? r + u : r;
        gv[u] = g[ru * D + j];
        xh[u] = (x[ru * D + j] - (rms ? T(0) : mean[ru])) * rstd[ru];
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        if (r + u < r1) {
          sw += gv[u] * xh[u];
          sb += gv[u];
        }
      }
    }
  }
  if (pw != nullptr) pw[c * D + j] = sw;
  if (pb != nullptr) pb[c * D + j] = sb;
}

// d = g where y > 0 (y null: d = g; d null: not written), bfloat16, for a chunk of kNormChunk rows
// and a column a thread, and that chunk's column sums of d in float32 (8 rows' loads in flight,
// added in row order).
__global__ void bf16_backward_partials(const uint16_t* g, const uint16_t* y, uint16_t* d, float* pb, int64_t rows,
                                       int64_t D) {
  const int64_t c = blockIdx.x, j = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (j >= D) return;
  const int64_t r0 = c * kNormChunk, r1 = r0 + kNormChunk < rows ? r0 + kNormChunk : rows;
  float s = 0;
  for (int64_t r = r0; r < r1; r += 8) {
    uint16_t v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int64_t ru = r + u < r1 ? r + u : r;
      const uint16_t gv = g[ru * D + j];
      v[u] = y == nullptr || math::bf16_to_float(y[ru * D + j]) > 0.0f ? gv : uint16_t{0};
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      if (r + u < r1) {
        if (d != nullptr) d[(r + u) * D + j] = v[u];
        s += math::bf16_to_float(v[u]);
      }
    }
  }
  pb[c * D + j] = s;
}

template <class T>
__global__ void norm_param_finish(const T* pw, const T* pb, T* gw, T* gb, int64_t chunks, int64_t D) {
  TG_GRID_LOOP(j, D) {
    T sw = 0, sb = 0;
    for (int64_t c = 0; c < chunks; c += 8) {  // 8 partials' loads in flight, added in order
      T vw[8], vb[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int64_t cu = c + u < chunks ? c + u : c;
        vw[u] = gw != nullptr ? pw[cu * D + j] : T(0);
        vb[u] = gb != nullptr ? pb[cu * D + j] : T(0);
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        if (c + u < chunks) {
          sw += vw[u];
          sb += vb[u];
        }
      }
    }
    if (gw != nullptr) gw[j] = sw;
    if (gb != nullptr) gb[j] = sb;
  }
}

template <class T>
__global__ void bias_act_kernel(math::Unary act, const T* x, const T* bias, T* y, int64_t n, int64_t D) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = math::unary<T>(act, x[i] + bias[i % D], T(1), T(0));
  }
}

template <class T>
__global__ void class_targets_kernel(const int64_t* target, int64_t* safe, T* valid, int64_t n, int64_t C,
                                     int64_t ignore_index, cuda_rt::IndexError* flag, const char* op) {
  TG_GRID_LOOP(i, n) {
    const int64_t t = target[i];
    const bool ignored = t == ignore_index, ok = !ignored && t >= 0 && t < C;
    if (!ignored && !ok) flag_bad_index(flag, op, t, C);
    safe[i] = ok ? t : 0;
    valid[i] = ok ? T(1) : T(0);
  }
}

template <class T>
__global__ void cross_entropy_rows(const T* x, const int64_t* target, const T* valid, T* loss, T* lse, int64_t C, T eps) {
  __shared__ T part[kRowThreads];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * C;
  T m = -static_cast<T>(INFINITY);
  for (int64_t i = threadIdx.x; i < C; i += kRowThreads) m = math::binary<T>(math::Binary::kMax, m, xr[i]);
  m = block_fold<T, true>(m, part);
  T s = 0;
  for (int64_t i = threadIdx.x; i < C; i += kRowThreads) s += math::m_exp(xr[i] - m);
  const T l = m + math::m_log(block_fold<T, false>(s, part));
  T sum_x = 0;
  if (eps != T(0)) {
    for (int64_t i = threadIdx.x; i < C; i += kRowThreads) sum_x += xr[i];
    sum_x = block_fold<T, false>(sum_x, part);
  }
  if (threadIdx.x == 0) {
    lse[r] = l;
    T nll = -(xr[target[r]] - l);
    if (eps != T(0)) nll = (T(1) - eps) * nll - eps / static_cast<T>(C) * (sum_x - static_cast<T>(C) * l);
    loss[r] = valid[r] != T(0) ? nll : T(0);
  }
}

template <class T>
__global__ void cross_entropy_backward_rows(const T* x, const T* lse, const int64_t* target, const T* valid, const T* g,
                                            T* dx, int64_t C, T eps) {
  const int64_t r = blockIdx.x;
  const T* xr = x + r * C;
  T* dr = dx + r * C;
  const bool counts = valid[r] != T(0);
  const T gr = g[r], l = lse[r], off = eps / static_cast<T>(C);
  const int64_t t = target[r];
  for (int64_t i = threadIdx.x; i < C; i += kRowThreads) {
    T d = counts ? gr * (math::m_exp(xr[i] - l) - off) : T(0);
    if (counts && i == t) d -= gr * (T(1) - eps);
    dr[i] = d;
  }
}

// a + b rounded on its own, never merged with the product before it into a fused multiply-add.
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }

// Element i of a dropout call: x kept times scale, or 0, by the call's key (or its row's key, the
// counter then the position in the row).
template <class T>
__device__ __forceinline__ T dropped(T x, int64_t i, int64_t len, const uint64_t* row_keys, uint64_t key, int32_t thr31,
                                     T scale) {
  uint64_t k = key;
  uint32_t c = static_cast<uint32_t>(i);
  if (row_keys != nullptr) {
    k = row_keys[i / len];
    c = static_cast<uint32_t>(i % len);
  }
  return math::dropout_element<T>(x, c, static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32), thr31, scale);
}

template <class T>
__global__ void dropout_kernel(const T* x, T* y, int64_t n, int64_t len, const uint64_t* row_keys, uint64_t key,
                               const uint64_t* key_at, int32_t thr31, T scale, const T* residual, uint16_t* y_bf16) {
  if (key_at != nullptr) key = *key_at;  // (a CUDA graph's step value)
  TG_GRID_LOOP(i, n) {
    const T d = dropped<T>(x[i], i, len, row_keys, key, thr31, scale);
    const T out = residual != nullptr ? add_rn(residual[i], d) : d;
    y[i] = out;
    if constexpr (sizeof(T) == sizeof(float)) {
      if (y_bf16 != nullptr) y_bf16[i] = math::float_to_bf16(out);
    }
  }
}

// bfloat16 (its bits): computed in float32 and rounded once, as the CPU's bfloat16 dropout.
__global__ void dropout_bf16_kernel(const uint16_t* x, uint16_t* y, int64_t n, int64_t len, const uint64_t* row_keys,
                                    uint64_t key, const uint64_t* key_at, int32_t thr31, float scale) {
  if (key_at != nullptr) key = *key_at;
  TG_GRID_LOOP(i, n) {
    y[i] = math::float_to_bf16(dropped<float>(math::bf16_to_float(x[i]), i, len, row_keys, key, thr31, scale));
  }
}

// d = g where y > 0, else 0, all bfloat16 (the backward of a ReLU whose output y was kept).
__global__ void relu_backward_bf16_kernel(const uint16_t* g, const uint16_t* y, uint16_t* d, int64_t n) {
  TG_GRID_LOOP(i, n) { d[i] = math::bf16_to_float(y[i]) > 0.0f ? g[i] : uint16_t{0}; }
}

template <class T>
__global__ void bias_act_backward_kernel(math::Unary act, const T* g, const T* x, const T* bias, T* dx, int64_t n, int64_t D) {
  TG_GRID_LOOP(i, n) {
    const T pre = act == math::Unary::kAffine ? T(0) : bias != nullptr ? x[i] + bias[i % D] : x[i];  // (no bias: x is pre)
    T d = g[i];
    if (act == math::Unary::kRelu) d = pre > T(0) ? g[i] : T(0);
    else if (act == math::Unary::kGeluErf) d = math::binary<T>(math::Binary::kGeluErfGrad, g[i], pre);
    else if (act == math::Unary::kGeluTanh) d = math::binary<T>(math::Binary::kGeluTanhGrad, g[i], pre);
    dx[i] = d;
  }
}

template <class F>
void float_types(Scalar t, F&& f) {
  if (t == Scalar::kF64) f(double{});
  else f(float{});
}

// Launches f(first_row, rows) over chunks of at most 65535 rows (one block a row).
template <class F>
void by_row_chunks(int64_t rows, F&& f) {
  for (int64_t r = 0; r < rows; r += 65535) f(r, static_cast<unsigned>(rows - r < 65535 ? rows - r : 65535));
}

}  // namespace

void softmax(const SoftmaxArgs& a) {
  if (a.outer * a.D * a.inner == 0) return;
  cudaStream_t s = stream_of(a.device);
  float_types(a.type, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(a.x);
    T* y = static_cast<T*>(a.y);
    if (a.inner == 1) {
      for (int64_t o = 0; o < a.outer; o += 65535) {
        const int64_t rows = a.outer - o < 65535 ? a.outer - o : 65535;
        softmax_rows<T><<<static_cast<unsigned>(rows), kRowThreads, 0, s>>>(a.log, x + o * a.D, y + o * a.D, a.D), cuda_rt::count_launch();
      }
    } else {
      softmax_columns<T><<<blocks_for(a.outer * a.inner), kThreads, 0, s>>>(a.log, x, y, a.outer, a.D, a.inner), cuda_rt::count_launch();
    }
  });
  cuda_rt::after_launch(a.device, a.op);
}

void softmax_backward(const SoftmaxArgs& a, const void* g) {
  if (a.outer * a.D * a.inner == 0) return;
  cudaStream_t s = stream_of(a.device);
  float_types(a.type, [&](auto tag) {
    using T = decltype(tag);
    const T* y = static_cast<const T*>(a.x);
    const T* gt = static_cast<const T*>(g);
    T* dx = static_cast<T*>(a.y);
    if (a.inner == 1) {
      by_row_chunks(a.outer, [&](int64_t o, unsigned n) {
        softmax_backward_rows<T><<<n, kRowThreads, 0, s>>>(a.log, y + o * a.D, gt + o * a.D, dx + o * a.D, a.D), cuda_rt::count_launch();
      });
    } else {
      softmax_backward_columns<T><<<blocks_for(a.outer * a.inner), kThreads, 0, s>>>(a.log, y, gt, dx, a.outer, a.D, a.inner), cuda_rt::count_launch();
    }
  });
  cuda_rt::after_launch(a.device, a.op);
}

void norm(const NormArgs& a) {
  if (a.rows == 0) return;
  cudaStream_t s = stream_of(a.device);
  float_types(a.type, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t r = 0; r < a.rows; r += 65535) {
      const int64_t rows = a.rows - r < 65535 ? a.rows - r : 65535;
      norm_rows<T><<<static_cast<unsigned>(rows), kRowThreads, 0, s>>>(
          a.rms, static_cast<const T*>(a.x) + r * a.D, static_cast<const T*>(a.w), static_cast<const T*>(a.b),
          static_cast<T*>(a.y) + r * a.D, a.rms ? nullptr : static_cast<T*>(a.mean) + r, static_cast<T*>(a.rstd) + r, a.D,
          static_cast<T>(a.eps), a.y_bf16 != nullptr ? static_cast<uint16_t*>(a.y_bf16) + r * a.D : nullptr),
          cuda_rt::count_launch();
    }
  });
  cuda_rt::after_launch(a.device, a.op);
}

int64_t norm_backward_scratch(int64_t rows, int64_t D) { return 2 * ((rows + kNormChunk - 1) / kNormChunk) * D; }

void norm_backward(const NormBackwardArgs& a) {
  if (a.rows == 0 && a.D > 0) {  // sums over no rows: zeros, as on the CPU
    const size_t bytes = static_cast<size_t>(a.D) * (a.type == Scalar::kF64 ? sizeof(double) : sizeof(float));
    if (a.gw != nullptr) cuda_rt::fill_bytes(a.device, a.gw, bytes, 0, a.op);
    if (a.gb != nullptr) cuda_rt::fill_bytes(a.device, a.gb, bytes, 0, a.op);
    return;
  }
  if (a.rows * a.D == 0) return;
  cudaStream_t s = stream_of(a.device);
  float_types(a.type, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(a.x);
    const T* g = static_cast<const T*>(a.g);
    const T* mean = static_cast<const T*>(a.mean);
    const T* rstd = static_cast<const T*>(a.rstd);
    if (a.gx != nullptr) {
      by_row_chunks(a.rows, [&](int64_t r, unsigned n) {
        norm_backward_rows<T><<<n, kRowThreads, 0, s>>>(a.rms, x + r * a.D, g + r * a.D, static_cast<const T*>(a.w),
                                                        a.rms ? nullptr : mean + r, rstd + r, static_cast<T*>(a.gx) + r * a.D,
                                                        a.D), cuda_rt::count_launch();
      });
    }
    if (a.gw != nullptr || a.gb != nullptr) {
      const int64_t chunks = (a.rows + kNormChunk - 1) / kNormChunk;
      T* pw = static_cast<T*>(a.partial);
      T* pb = pw + chunks * a.D;
      const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>((a.D + kThreads - 1) / kThreads));
      norm_param_partials<T><<<grid, kThreads, 0, s>>>(a.rms, x, g, mean, rstd, a.gw != nullptr ? pw : nullptr,
                                                       a.gb != nullptr ? pb : nullptr, a.rows, a.D), cuda_rt::count_launch();
      norm_param_finish<T><<<blocks_for(a.D), kThreads, 0, s>>>(pw, pb, static_cast<T*>(a.gw), static_cast<T*>(a.gb),
                                                                chunks, a.D), cuda_rt::count_launch();
    }
  });
  cuda_rt::after_launch(a.device, a.op);
}

void bias_act(const BiasActArgs& a) {
  const int64_t n = a.rows * a.D;
  if (n == 0) return;
  cudaStream_t s = stream_of(a.device);
  float_types(a.type, [&](auto tag) {
    using T = decltype(tag);
    bias_act_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(a.act, static_cast<const T*>(a.x), static_cast<const T*>(a.bias),
                                                          static_cast<T*>(a.y), n, a.D), cuda_rt::count_launch();
  });
  cuda_rt::after_launch(a.device, a.op);
}

void class_targets(const TargetArgs& a) {
  if (a.n == 0) return;
  cudaStream_t s = stream_of(a.device);
  cuda_rt::IndexError* flag = cuda_rt::index_error_flag(a.device);
  float_types(a.type, [&](auto tag) {
    using T = decltype(tag);
    class_targets_kernel<T><<<blocks_for(a.n), kThreads, 0, s>>>(a.target, a.safe, static_cast<T*>(a.valid), a.n, a.C,
                                                                 a.ignore_index, flag, a.op), cuda_rt::count_launch();
  });
  cuda_rt::after_launch(a.device, a.op);
}

void cross_entropy(const CrossEntropyArgs& a) {
  if (a.rows == 0) return;
  cudaStream_t s = stream_of(a.device);
  float_types(a.type, [&](auto tag) {
    using T = decltype(tag);
    by_row_chunks(a.rows, [&](int64_t r, unsigned n) {
      cross_entropy_rows<T><<<n, kRowThreads, 0, s>>>(static_cast<const T*>(a.x) + r * a.C, a.target + r,
                                                      static_cast<const T*>(a.valid) + r, static_cast<T*>(a.loss) + r,
                                                      static_cast<T*>(a.lse) + r, a.C, static_cast<T>(a.eps)), cuda_rt::count_launch();
    });
  });
  cuda_rt::after_launch(a.device, a.op);
}

void cross_entropy_backward(const CrossEntropyArgs& a) {
  if (a.rows * a.C == 0) return;
  cudaStream_t s = stream_of(a.device);
  float_types(a.type, [&](auto tag) {
    using T = decltype(tag);
    by_row_chunks(a.rows, [&](int64_t r, unsigned n) {
      cross_entropy_backward_rows<T><<<n, kRowThreads, 0, s>>>(
          static_cast<const T*>(a.x) + r * a.C, static_cast<const T*>(a.lse) + r, a.target + r,
          static_cast<const T*>(a.valid) + r, static_cast<const T*>(a.g) + r, static_cast<T*>(a.dx) + r * a.C, a.C,
          static_cast<T>(a.eps)), cuda_rt::count_launch();
    });
  });
  cuda_rt::after_launch(a.device, a.op);
}

void dropout(const DropoutArgs& a) {
  if (a.n == 0) return;
  cudaStream_t s = stream_of(a.device);
  const int32_t thr31 = static_cast<int32_t>(a.threshold >> 1);
  if (a.type == Scalar::kBF16) {  // (no residual form)
    dropout_bf16_kernel<<<blocks_for(a.n), kThreads, 0, s>>>(static_cast<const uint16_t*>(a.x), static_cast<uint16_t*>(a.y), a.n,
                                                             a.len > 0 ? a.len : 1, a.row_keys, a.key, a.key_at, thr31,
                                                             static_cast<float>(a.scale)), cuda_rt::count_launch();
    cuda_rt::after_launch(a.device, a.op);
    return;
  }
  float_types(a.type, [&](auto tag) {
    using T = decltype(tag);
    dropout_kernel<T><<<blocks_for(a.n), kThreads, 0, s>>>(static_cast<const T*>(a.x), static_cast<T*>(a.y), a.n,
                                                           a.len > 0 ? a.len : 1, a.row_keys, a.key, a.key_at, thr31,
                                                           static_cast<T>(a.scale), static_cast<const T*>(a.residual),
                                                           sizeof(T) == sizeof(float) ? static_cast<uint16_t*>(a.y_bf16) : nullptr),
        cuda_rt::count_launch();
  });
  cuda_rt::after_launch(a.device, a.op);
}

void bias_act_backward(const BiasActArgs& a, const void* g, void* dx, void* db, void* partial) {
  const int64_t n = a.rows * a.D;
  if (n == 0) {  // no rows: the bias gradient sums nothing (zeros, as on the CPU)
    if (db != nullptr && a.D > 0)
      cuda_rt::fill_bytes(a.device, db, static_cast<size_t>(a.D) * (a.type == Scalar::kF64 ? sizeof(double) : sizeof(float)), 0, a.op);
    return;
  }
  cudaStream_t s = stream_of(a.device);
  float_types(a.type, [&](auto tag) {
    using T = decltype(tag);
    bias_act_backward_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(a.act, static_cast<const T*>(g), static_cast<const T*>(a.x),
                                                                   static_cast<const T*>(a.bias), static_cast<T*>(dx), n, a.D), cuda_rt::count_launch();
    if (db != nullptr) {  // column sums of dx, as the norms' bias gradient
      const int64_t chunks = (a.rows + kNormChunk - 1) / kNormChunk;
      T* pb = static_cast<T*>(partial);
      const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>((a.D + kThreads - 1) / kThreads));
      norm_param_partials<T><<<grid, kThreads, 0, s>>>(true, nullptr, static_cast<const T*>(dx), nullptr, nullptr, nullptr, pb,
                                                       a.rows, a.D), cuda_rt::count_launch();
      norm_param_finish<T><<<blocks_for(a.D), kThreads, 0, s>>>(nullptr, pb, nullptr, static_cast<T*>(db), chunks, a.D), cuda_rt::count_launch();
    }
  });
  cuda_rt::after_launch(a.device, a.op);
}

namespace {
__global__ void causal_mask_kernel(bool* m, int64_t n, int64_t S, int64_t offset) {
  TG_GRID_LOOP(k, n) { m[k] = k % S > k / S + offset; }
}
}  // namespace

void causal_mask(int device, const char* op, bool* m, int64_t T, int64_t S, int64_t offset) {
  if (T == 0 || S == 0) return;
  causal_mask_kernel<<<blocks_for(T * S), kThreads, 0, stream_of(device)>>>(m, T * S, S, offset), cuda_rt::count_launch();
  cuda_rt::after_launch(device, op);
}

int64_t bf16_column_sums_scratch(int64_t rows, int64_t D) { return (rows + kNormChunk - 1) / kNormChunk * D; }

void bf16_backward_with_sums(int device, const char* op, const void* g, const void* y, void* d, float* db, float* partial,
                             int64_t rows, int64_t D) {
  if (D == 0) return;
  cudaStream_t s = stream_of(device);
  if (rows == 0) {  // no rows: the bias's gradient sums nothing
    cuda_rt::fill_bytes(device, db, static_cast<size_t>(D) * sizeof(float), 0, op);
    return;
  }
  const int64_t chunks = (rows + kNormChunk - 1) / kNormChunk;
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>((D + kThreads - 1) / kThreads));
  bf16_backward_partials<<<grid, kThreads, 0, s>>>(static_cast<const uint16_t*>(g), static_cast<const uint16_t*>(y),
                                                   static_cast<uint16_t*>(d), partial, rows, D), cuda_rt::count_launch();
  norm_param_finish<float><<<blocks_for(D), kThreads, 0, s>>>(nullptr, partial, nullptr, db, chunks, D),
      cuda_rt::count_launch();
  cuda_rt::after_launch(device, op);
}

void relu_backward_bf16(int device, const char* op, const void* g, const void* y, void* d, int64_t n) {
  if (n == 0) return;
  relu_backward_bf16_kernel<<<blocks_for(n), kThreads, 0, stream_of(device)>>>(
      static_cast<const uint16_t*>(g), static_cast<const uint16_t*>(y), static_cast<uint16_t*>(d), n), cuda_rt::count_launch();
  cuda_rt::after_launch(device, op);
}

}  // namespace tg::cuda_ops
