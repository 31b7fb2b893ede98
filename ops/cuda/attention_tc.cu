// Attention forward on tensor cores (FlashAttention-2's scheme): bfloat16 q, k, v with head size
// 32, 64 or 128, float32 accumulation, the weights never stored. A block takes 16 query rows a warp
// (64 or 128 rows) and walks the keys 64 at a time: k and v tiles arrive by cp.async into a double
// buffer while the previous tile is computed; S = q kᵀ and O += P v are mma.sync m16n8k16 products
// on fragments loaded by ldmatrix, the online softmax runs on S's accumulator registers (a row's
// four lanes agree on its maximum by two shuffles), and P goes from those registers straight into
// the next product's A fragment, rounded to bfloat16. Shared rows are padded by 16 bytes, so the
// eight rows an ldmatrix phase reads fall in eight different bank groups. Sums run in a fixed order
// (no atomics): the same bits every run.
#include <atomic>
#include <cstdint>

#include "ops/cuda/attention.h"
#include "ops/cuda/attention_tc.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/mma.cuh"

namespace tg::cuda_ops {
namespace {

constexpr int kBc = 64;  // keys a tile

// Blocks an SM should hold at once (registers permitting): two for head sizes up to 64 without
// dropout (at most 128 registers a thread at 8 warps), else one (dropout's hashes need more).
template <int D, int kWarps, bool kDropout>
constexpr int kMinBlocks = D <= 64 && !kDropout ? 2 : 1;

template <int D, int kWarps, bool kDropout>
__global__ void __launch_bounds__(kWarps * 32, (kMinBlocks<D, kWarps, kDropout>)) attention_tc_kernel(const TcAttentionParams p) {
  constexpr int kBr = 16 * kWarps;   // query rows a block
  constexpr int kPitch = D + 8;      // bf16 elements a shared row
  constexpr int kChunks = D / 8;     // 16-byte pieces a row
  constexpr int kThreads = kWarps * 32;
  const float kInf = INFINITY;
  extern __shared__ __align__(16) uint16_t smem[];
  uint16_t* const sq = smem;                     // [kBr][kPitch]
  uint16_t* const sk = sq + kBr * kPitch;        // [2][kBc][kPitch]
  uint16_t* const sv = sk + 2 * kBc * kPitch;    // [2][kBc][kPitch]

  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t n = static_cast<int64_t>(blockIdx.y) + static_cast<int64_t>(blockIdx.z) * 65535;  // head
  if (n >= p.n) return;  // (the z spill's last layer is partly past the heads)
  // Under the causal mask the last query blocks see the most keys: they go first.
  const int64_t qb = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int64_t q0 = qb * kBr;
  const int64_t kvh = n / p.group;
  // Head n's rows and its key/value head's (head_row_offset: rows `pitch` elements apart).
  const uint16_t* const qg = p.q + head_row_offset(n, 0, p.T, p.q_heads, D);
  const int64_t kv_at = head_row_offset(kvh, 0, p.rows, p.kv_heads, D);
  const uint16_t* const kg = p.k + kv_at;
  const uint16_t* const vg = p.v + kv_at;
  const int64_t mbase = p.mask != nullptr ? mma::mask_base(n, p.lead_rank, p.lead, p.lead_stride) : 0;
  // Keys this block can see: all S, or under the causal mask those up to its last row's diagonal.
  int64_t s_end = p.S;
  if (p.causal && q0 + kBr + p.offset < s_end) s_end = q0 + kBr + p.offset;
  const int tiles = static_cast<int>((s_end + kBc - 1) / kBc);

  for (int c = tid; c < kBr * kChunks; c += kThreads) {
    const int r = c / kChunks, e = (c % kChunks) * 8;
    const bool ok = q0 + r < p.T;
    mma::cp_async16(sq + r * kPitch + e, qg + (ok ? (q0 + r) * p.q_heads * D + e : 0), ok);
  }
  auto load_kv = [&](int tile, int buf) {
    const int64_t k0 = static_cast<int64_t>(tile) * kBc;
    for (int c = tid; c < kBc * kChunks; c += kThreads) {
      const int r = c / kChunks, e = (c % kChunks) * 8;
      const bool ok = k0 + r < p.S;  // keys past S: zeros (their weights are 0, and 0 * 0 stays 0)
      const int64_t off = ok ? (k0 + r) * p.kv_heads * D + e : 0;  // (the pitch read from the parameters)
      mma::cp_async16(sk + (buf * kBc + r) * kPitch + e, kg + off, ok);
      mma::cp_async16(sv + (buf * kBc + r) * kPitch + e, vg + off, ok);
    }
  };
  if (tiles > 0) load_kv(0, 0);
  mma::cp_async_commit();

  const int64_t row_a = q0 + warp * 16 + g, row_b = row_a + 8;  // this lane's two query rows
  const mma::Cell qa = mma::a_fragment_address(lane), kb = mma::bt_fragment_address(lane),
                  vb = mma::b_trans_fragment_address(lane);
  const bool warp_live = q0 + warp * 16 < p.T;
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m_a = -kInf, m_b = -kInf, l_a = 0.f, l_b = 0.f;  // running maxima (log2 units) and partial sums

  for (int j = 0; j < tiles; ++j) {
    mma::next_tile_and_wait(j + 1 < tiles, [&] { load_kv(j + 1, (j + 1) & 1); });
    if (warp_live) {
      const uint16_t* const kt = sk + (j & 1) * kBc * kPitch;
      const uint16_t* const vt = sv + (j & 1) * kBc * kPitch;
      float s[kBc / 8][4];
#pragma unroll
      for (int i = 0; i < kBc / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t a[4];  // q rows warp*16 + 0..15, dims kk*16 + 0..15
        mma::ldmatrix_x4(a, sq + (warp * 16 + qa.row) * kPitch + kk * 16 + qa.col);
#pragma unroll
        for (int nb = 0; nb < kBc / 16; ++nb) {
          uint32_t b[4];  // k rows (keys) nb*16 + 0..15, dims kk*16 + 0..15: b[0..1] keys 0..7, b[2..3] keys 8..15
          mma::ldmatrix_x4(b, kt + (nb * 16 + kb.row) * kPitch + kk * 16 + kb.col);
          mma::mma_bf16(s[2 * nb], a, b[0], b[1]);
          mma::mma_bf16(s[2 * nb + 1], a, b[2], b[3]);
        }
      }
      // Scale to log2 units and hide what the masks hide (only where this tile needs it).
      const int64_t k0 = static_cast<int64_t>(j) * kBc;
      const bool whole = p.mask == nullptr && k0 + kBc <= p.S && (!p.causal || k0 + kBc - 1 <= q0 + warp * 16 + p.offset);
      float mx_a = -kInf, mx_b = -kInf;
#pragma unroll
      for (int nt = 0; nt < kBc / 8; ++nt) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          float x = s[nt][r] * p.scale_log2;
          if (!whole) {
            const mma::Cell c = mma::accumulator_cell(lane, r);
            const int64_t i = q0 + warp * 16 + c.row, key = k0 + nt * 8 + c.col;
            bool hidden = key >= p.S || (p.causal && key > i + p.offset);
            if (!hidden && p.mask != nullptr && i < p.T) hidden = p.mask[mbase + i * p.mask_row + key * p.mask_col];
            if (hidden) x = -kInf;
          }
          s[nt][r] = x;
          if (r < 2) mx_a = fmaxf(mx_a, x);
          else mx_b = fmaxf(mx_b, x);
        }
      }
      mx_a = mma::quad_max(mx_a);
      mx_b = mma::quad_max(mx_b);
      const float new_a = fmaxf(m_a, mx_a), new_b = fmaxf(m_b, mx_b);
      const float base_a = new_a == -kInf ? 0.f : new_a, base_b = new_b == -kInf ? 0.f : new_b;
      const float keep_a = exp2f(m_a - base_a), keep_b = exp2f(m_b - base_b);  // 0 while nothing was seen
      float sum_a = 0.f, sum_b = 0.f;
#pragma unroll
      for (int nt = 0; nt < kBc / 8; ++nt) {
        s[nt][0] = exp2f(s[nt][0] - base_a);
        s[nt][1] = exp2f(s[nt][1] - base_a);
        s[nt][2] = exp2f(s[nt][2] - base_b);
        s[nt][3] = exp2f(s[nt][3] - base_b);
        sum_a += s[nt][0] + s[nt][1];
        sum_b += s[nt][2] + s[nt][3];
      }
      if constexpr (kDropout) {  // (after the row sums: the dropped weights still count in them)
#pragma unroll
        for (int nt = 0; nt < kBc / 8; ++nt) {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const mma::Cell c = mma::accumulator_cell(lane, r);
            const int64_t i = q0 + warp * 16 + c.row, key = k0 + nt * 8 + c.col;
            const bool kept = p.drop_row_keys != nullptr
                                  ? math::dropout_keeps(p.drop_row_keys[n * p.T + (i < p.T ? i : 0)], key, p.drop_thr31)
                                  : math::dropout_keeps(p.drop_key_at != nullptr ? *p.drop_key_at : p.drop_key,
                                                        (n * p.T + i) * p.S + key, p.drop_thr31);
            s[nt][r] = kept ? s[nt][r] * p.drop_scale : 0.f;
          }
        }
      }
      l_a = l_a * keep_a + sum_a;
      l_b = l_b * keep_b + sum_b;
      m_a = new_a;
      m_b = new_b;
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        o[i][0] *= keep_a;
        o[i][1] *= keep_a;
        o[i][2] *= keep_b;
        o[i][3] *= keep_b;
      }
      // O += P v: P's accumulator layout is the A fragment of the next product (keys kk*16 + 0..15).
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        uint32_t a[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const mma::Cell src = mma::p_fragment_source(kk, i);
          a[i] = mma::pack_bf16(s[src.row][src.col], s[src.row][src.col + 1]);
        }
#pragma unroll
        for (int db = 0; db < D / 16; ++db) {
          uint32_t b[4];  // v rows (keys) kk*16 + 0..15, columns db*16 + 0..15: b[0..1] columns 0..7, b[2..3] 8..15
          mma::ldmatrix_x4_trans(b, vt + (kk * 16 + vb.row) * kPitch + db * 16 + vb.col);
          mma::mma_bf16(o[2 * db], a, b[0], b[1]);
          mma::mma_bf16(o[2 * db + 1], a, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // the buffer just read is the one the next iteration loads into
  }
  mma::cp_async_wait<0>();  // (no tile: q's copy must land before its rows are reused below)
  __syncthreads();
  if (!warp_live) return;

  // The output through this warp's own q rows in shared memory, then 16-byte stores.
  l_a = mma::quad_sum(l_a);
  l_b = mma::quad_sum(l_b);
  const float inv_a = l_a > 0.f ? 1.f / l_a : 0.f, inv_b = l_b > 0.f ? 1.f / l_b : 0.f;  // no key seen: zeros
  uint16_t* const so = sq + warp * 16 * kPitch;
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    *reinterpret_cast<uint32_t*>(so + g * kPitch + i * 8 + 2 * t) = mma::pack_bf16(o[i][0] * inv_a, o[i][1] * inv_a);
    *reinterpret_cast<uint32_t*>(so + (g + 8) * kPitch + i * 8 + 2 * t) = mma::pack_bf16(o[i][2] * inv_b, o[i][3] * inv_b);
  }
  __syncwarp();
  for (int c = lane; c < 16 * kChunks; c += 32) {
    const int r = c / kChunks, e = (c % kChunks) * 8;
    const int64_t i = q0 + warp * 16 + r;
    if (i < p.T)
      *reinterpret_cast<uint4*>(p.out + head_row_offset(n, i, p.T, p.q_heads, D) + e) = *reinterpret_cast<const uint4*>(so + r * kPitch + e);
  }
  if (t == 0) {
    constexpr float kLn2 = 0.6931471805599453f;
    if (row_a < p.T) p.lse[n * p.T + row_a] = l_a > 0.f ? m_a * kLn2 + logf(l_a) : -kInf;
    if (row_b < p.T) p.lse[n * p.T + row_b] = l_b > 0.f ? m_b * kLn2 + logf(l_b) : -kInf;
  }
}

template <int D, int kWarps, bool kDropout>
void launch_tc_kernel(const TcAttentionParams& p, int64_t n, int device, cudaStream_t stream) {
  constexpr int kBr = 16 * kWarps;
  constexpr int bytes = (kBr + 4 * kBc) * (D + 8) * 2;
  // Above 48 KiB of shared memory must be asked for, once a device (a failure shows as the
  // launch's error, named by after_launch).
  static std::atomic<bool> configured[64];
  if (device < 0 || device >= 64 || !configured[device].load(std::memory_order_relaxed)) {
    cudaFuncSetAttribute(attention_tc_kernel<D, kWarps, kDropout>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (device >= 0 && device < 64) configured[device].store(true, std::memory_order_relaxed);
  }
  const int64_t heads_y = n < 65535 ? n : 65535;
  const dim3 grid(static_cast<unsigned>((p.T + kBr - 1) / kBr), static_cast<unsigned>(heads_y),
                  static_cast<unsigned>((n + 65534) / 65535));
  dry_pointers({p.q, p.k, p.v, p.out, p.lse, p.mask, p.drop_row_keys, p.drop_key_at});
  attention_tc_kernel<D, kWarps, kDropout><<<grid, kWarps * 32, bytes, stream>>>(p), cuda_rt::count_launch();
}
// (dropout is a template argument: without it the kernel keeps its registers for the products)
template <int D, int kWarps>
void launch_tc(const TcAttentionParams& p, int64_t n, int device, cudaStream_t stream) {
  if (p.dropout) launch_tc_kernel<D, kWarps, true>(p, n, device, stream);
  else launch_tc_kernel<D, kWarps, false>(p, n, device, stream);
}

}  // namespace

TcAttentionParams tc_attention_params(const AttentionArgs& a) {
  TcAttentionParams p;
  p.q = static_cast<const uint16_t*>(a.q);
  p.k = static_cast<const uint16_t*>(a.k);
  p.v = static_cast<const uint16_t*>(a.v);
  p.out = static_cast<uint16_t*>(a.out);
  p.lse = static_cast<float*>(a.lse);
  p.n = a.n;
  p.T = a.T;
  p.S = a.S;
  p.rows = a.rows;
  p.group = a.group;
  p.q_heads = a.q_heads;
  p.kv_heads = a.kv_heads;
  p.scale_log2 = static_cast<float>(a.scale * 1.4426950408889634);
  p.causal = a.causal;
  p.offset = a.causal_offset;
  p.mask = a.mask;
  p.lead_rank = a.lead_rank;
  for (int r = 0; r < a.lead_rank; ++r) {
    p.lead[r] = a.lead[r];
    p.lead_stride[r] = a.mask_lead_stride[r];
  }
  p.mask_row = a.mask_row;
  p.mask_col = a.mask_col;
  p.dropout = a.dropout;
  p.drop_thr31 = a.drop_thr31;
  p.drop_scale = static_cast<float>(a.drop_scale);
  p.drop_key = a.drop_key;
  p.drop_row_keys = a.drop_row_keys;
  p.drop_key_at = a.drop_key_at;
  return p;
}

void attention_tc(const AttentionArgs& a) {
  const TcAttentionParams p = tc_attention_params(a);
  cudaStream_t s = stream_of(a.device);
  const bool short_rows = a.T <= 64;  // (decoding, short sequences: half the rows idle less)
  switch (a.d) {
    case 32: short_rows ? launch_tc<32, 4>(p, a.n, a.device, s) : launch_tc<32, 8>(p, a.n, a.device, s); break;
    case 64: short_rows ? launch_tc<64, 4>(p, a.n, a.device, s) : launch_tc<64, 8>(p, a.n, a.device, s); break;
    default: short_rows ? launch_tc<128, 4>(p, a.n, a.device, s) : launch_tc<128, 8>(p, a.n, a.device, s); break;
  }
}

}  // namespace tg::cuda_ops
