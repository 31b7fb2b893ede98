// Attention forward (the plain kernel; bfloat16 goes to attention_tc.cu) and rotary embedding on the GPU.
#include <cstdint>

#include "ops/cuda/attention.h"
#include "ops/cuda/attention_tc.cuh"
#include "ops/cuda/launch.cuh"

namespace tg::cuda_ops {
namespace {

constexpr unsigned kRowThreads = 128;  // one block a query row
constexpr int64_t kChunk = 256;     // keys scored at a time

struct MaskSpec {
  const bool* mask;
  int lead_rank;
  int64_t lead[kMaxLeadRank];
  int64_t lead_stride[kMaxLeadRank];
  int64_t row, col;
  bool causal;
  int64_t offset;
  bool dropout;
  int32_t thr31;
  uint64_t key;
  const uint64_t* row_keys;
  const uint64_t* key_at;
};

// Weight (i, j) of head n after dropout: e kept (times scale) or 0 (AttentionArgs::dropout).
template <class T>
__device__ __forceinline__ T dropped(T e, const MaskSpec& m, T scale, int64_t n, int64_t T_, int64_t S, int64_t i, int64_t j) {
  const bool keep = m.row_keys != nullptr ? math::dropout_keeps(m.row_keys[n * T_ + i], j, m.thr31)
                                          : math::dropout_keeps(m.key_at != nullptr ? *m.key_at : m.key, (n * T_ + i) * S + j, m.thr31);
  return keep ? e * scale : T(0);
}

template <class T>
__global__ void attention_rows(const T* q, const T* k, const T* v, T* out, T* lse, int64_t T_, int64_t S, int64_t rows,
                               int64_t d, int64_t dv, int64_t group, int64_t heads, T scale, T drop_scale, MaskSpec m) {
  __shared__ T qrow[kMaxHeadSize];
  __shared__ T p[kChunk];
  __shared__ T part[kRowThreads];
  const int64_t i = blockIdx.x;                            // query row
  const int64_t n = static_cast<int64_t>(blockIdx.y) + static_cast<int64_t>(blockIdx.z) * 65535;  // head
  if (n >= heads) return;  // (the z spill's last layer is partly past the heads)
  const int64_t kv = n / group;
  const T* qr = q + (n * T_ + i) * d;
  const T* kb = k + kv * rows * d;
  const T* vb = v + kv * rows * dv;
  int64_t mbase = 0;
  if (m.mask != nullptr) {
    int64_t rest = n;
    for (int r = m.lead_rank - 1; r >= 0; --r) {
      mbase += (rest % m.lead[r]) * m.lead_stride[r];
      rest /= m.lead[r];
    }
  }
  for (int64_t j = threadIdx.x; j < d; j += kRowThreads) qrow[j] = qr[j];
  __syncthreads();
  // Each thread owns output dims threadIdx.x, + kRowThreads (dv <= 256: two at most).
  T acc0 = 0, acc1 = 0;
  T run_max = -static_cast<T>(INFINITY), run_sum = 0;
  for (int64_t s0 = 0; s0 < S; s0 += kChunk) {
    const int64_t len = S - s0 < kChunk ? S - s0 : kChunk;
    T local_max = -static_cast<T>(INFINITY);
    for (int64_t c = threadIdx.x; c < len; c += kRowThreads) {
      const int64_t j = s0 + c;
      const bool hidden = (m.causal && j > i + m.offset) || (m.mask != nullptr && m.mask[mbase + i * m.row + j * m.col]);
      T s = -static_cast<T>(INFINITY);
      if (!hidden) {
        const T* kr = kb + j * d;
        T dot = 0;
        for (int64_t e = 0; e < d; ++e) dot += qrow[e] * kr[e];
        s = dot * scale;
      }
      p[c] = s;
      local_max = math::binary<T>(math::Binary::kMax, local_max, s);
    }
    const T chunk_max = block_fold<T, true>(local_max, part);
    const T new_max = math::binary<T>(math::Binary::kMax, run_max, chunk_max);
    if (new_max == -static_cast<T>(INFINITY)) continue;  // nothing seen yet
    const T rescale = run_max == -static_cast<T>(INFINITY) ? T(0) : math::m_exp(run_max - new_max);
    T local_sum = 0;
    for (int64_t c = threadIdx.x; c < len; c += kRowThreads) {
      const T e = p[c] == -static_cast<T>(INFINITY) ? T(0) : math::m_exp(p[c] - new_max);
      p[c] = m.dropout ? dropped(e, m, drop_scale, n, T_, S, i, s0 + c) : e;
      local_sum += e;  // (the row sum counts dropped weights too)
    }
    const T chunk_sum = block_fold<T, false>(local_sum, part);  // (its barrier also publishes p)
    run_sum = run_sum * rescale + chunk_sum;
    acc0 *= rescale;
    acc1 *= rescale;
    const int64_t j0 = threadIdx.x, j1 = threadIdx.x + kRowThreads;
    for (int64_t c = 0; c < len; ++c) {
      const T pc = p[c];
      const T* vr = vb + (s0 + c) * dv;
      if (j0 < dv) acc0 += pc * vr[j0];
      if (j1 < dv) acc1 += pc * vr[j1];
    }
    run_max = new_max;
    __syncthreads();  // p is rewritten by the next chunk
  }
  // A row that sees no key outputs zeros (as on the CPU).
  const T inv = run_sum > T(0) ? T(1) / run_sum : T(0);
  T* o = out + (n * T_ + i) * dv;
  if (threadIdx.x < dv) o[threadIdx.x] = acc0 * inv;
  if (threadIdx.x + kRowThreads < dv) o[threadIdx.x + kRowThreads] = acc1 * inv;
  if (threadIdx.x == 0) lse[n * T_ + i] = run_sum > T(0) ? run_max + math::m_log(run_sum) : -static_cast<T>(INFINITY);
}

template <class T>
__global__ void rope_kernel(const T* x, const T* cos, const T* sin, T* y, int64_t rows, int64_t T_, int64_t h, T sign) {
  const int64_t n = rows * h;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = t / h, i = t % h;
    const T a = x[r * 2 * h + i], b = x[r * 2 * h + h + i];
    const T c = cos[(r % T_) * h + i], s = sin[(r % T_) * h + i] * sign;
    y[r * 2 * h + i] = a * c - b * s;
    y[r * 2 * h + h + i] = b * c + a * s;
  }
}

}  // namespace

void attention(const AttentionArgs& a) {
  if (a.n == 0 || a.T == 0 || a.dv == 0) return;
  if (a.type == Scalar::kBF16) {
    attention_tc(a);
    cuda_rt::after_launch(a.device, a.op);
    return;
  }
  MaskSpec m{a.mask, a.lead_rank, {}, {}, a.mask_row, a.mask_col, a.causal, a.causal_offset,
             a.dropout, a.drop_thr31, a.drop_key, a.drop_row_keys, a.drop_key_at};
  for (int r = 0; r < a.lead_rank; ++r) {
    m.lead[r] = a.lead[r];
    m.lead_stride[r] = a.mask_lead_stride[r];
  }
  cudaStream_t s = stream_of(a.device);
  const int64_t heads_y = a.n < 65535 ? a.n : 65535;
  const dim3 grid(static_cast<unsigned>(a.T), static_cast<unsigned>(heads_y), static_cast<unsigned>((a.n + 65534) / 65535));
  dry_pointers({m.mask, m.row_keys, m.key_at});
  if (a.type == Scalar::kF64) {
    attention_rows<double><<<grid, kRowThreads, 0, s>>>(static_cast<const double*>(a.q), static_cast<const double*>(a.k),
                                                     static_cast<const double*>(a.v), static_cast<double*>(a.out),
                                                     static_cast<double*>(a.lse), a.T, a.S, a.rows, a.d, a.dv, a.group, a.n,
                                                     a.scale, a.drop_scale, m), cuda_rt::count_launch();
  } else {
    attention_rows<float><<<grid, kRowThreads, 0, s>>>(static_cast<const float*>(a.q), static_cast<const float*>(a.k),
                                                    static_cast<const float*>(a.v), static_cast<float*>(a.out),
                                                    static_cast<float*>(a.lse), a.T, a.S, a.rows, a.d, a.dv, a.group, a.n,
                                                    static_cast<float>(a.scale), static_cast<float>(a.drop_scale), m), cuda_rt::count_launch();
  }
  cuda_rt::after_launch(a.device, a.op);
}

void rope(const RopeArgs& a) {
  const int64_t n = a.rows * a.h;
  if (n == 0) return;
  cudaStream_t s = stream_of(a.device);
  const unsigned blocks = blocks_for(n);
  if (a.type == Scalar::kF64) {
    rope_kernel<double><<<blocks, 256, 0, s>>>(static_cast<const double*>(a.x), static_cast<const double*>(a.cos),
                                               static_cast<const double*>(a.sin), static_cast<double*>(a.y), a.rows, a.T,
                                               a.h, a.sign), cuda_rt::count_launch();
  } else {
    rope_kernel<float><<<blocks, 256, 0, s>>>(static_cast<const float*>(a.x), static_cast<const float*>(a.cos),
                                              static_cast<const float*>(a.sin), static_cast<float*>(a.y), a.rows, a.T, a.h,
                                              static_cast<float>(a.sign)), cuda_rt::count_launch();
  }
  cuda_rt::after_launch(a.device, a.op);
}

}  // namespace tg::cuda_ops
