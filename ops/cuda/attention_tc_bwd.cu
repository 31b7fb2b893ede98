// Attention backward on tensor cores (FlashAttention-2's scheme, without atomics): bfloat16 q, k,
// v, o and g = dL/do with head size 32, 64 or 128; the weights are recomputed from the forward's
// log-sum-exp, P = exp(s q kᵀ - lse), never stored. With delta = rowsum(g o) (first launch):
//   dV = Pᵀ g,  dP = g vᵀ,  dS = P (dP - delta),  dK = s dSᵀ q,  dQ = s dS k
// (with dropout on the weights, mask Z: dV = (Z P)ᵀ g and dS = P (Z dP - delta)).
// The second launch owns a block of keys (16 a warp) and walks every query tile of the key head's
// query heads in order, so dK and dV are sums in a fixed order; the third owns a block of queries
// (16 a warp) and walks the keys for dQ. Each warp computes its products transposed as needed
// (kᵀ-major for dK and dV), so every operand comes from shared memory by ldmatrix and every
// accumulator becomes the next product's A fragment in registers (mma_layout.h).
#include <atomic>
#include <cstdint>

#include "ops/cuda/attention.h"
#include "ops/cuda/attention_tc.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/mma.cuh"

namespace tg::cuda_ops {
namespace {

using u16 = uint16_t;

// The forward's parameters (out: the forward's output o) and the backward's own.
struct BwdParams : TcAttentionParams {
  const u16* g;
  float* delta;
  u16 *dq, *dk, *dv;
  float scale;
};

constexpr float kLog2e = 1.4426950408889634f;

// Whether query i of head n (mask offset mbase) does not see key j.
__device__ __forceinline__ bool hidden(const BwdParams& p, int64_t mbase, int64_t i, int64_t j) {
  if (i >= p.T || j >= p.S || (p.causal && j > i + p.offset)) return true;
  return p.mask != nullptr && p.mask[mbase + i * p.mask_row + j * p.mask_col];
}

// The dropout factor of weight (i, j) of head n: drop_scale where kept, 0 where dropped; 1 without
// dropout (rows past T read row 0's key: their weights are 0 anyway).
__device__ __forceinline__ float drop_factor(const BwdParams& p, int64_t n, int64_t i, int64_t j) {
  if (!p.dropout) return 1.f;
  const bool kept = p.drop_row_keys != nullptr ? math::dropout_keeps(p.drop_row_keys[n * p.T + (i < p.T ? i : 0)], j, p.drop_thr31)
                                               : math::dropout_keeps(p.drop_key_at != nullptr ? *p.drop_key_at : p.drop_key,
                                                                    (n * p.T + i) * p.S + j, p.drop_thr31);
  return kept ? p.drop_scale : 0.f;
}

__device__ __forceinline__ float bf16_lo(uint32_t x) { return __uint_as_float(x << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t x) { return __uint_as_float(x & 0xffff0000u); }

// delta[r] = sum_e g[r][e] o[r][e] in float32: a warp a row, lanes over 8-element pieces, then a
// fixed shuffle tree.
template <int D>
__global__ void delta_kernel(const BwdParams p) {
  const int64_t rows = p.n * p.T;
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int64_t r = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x / 32) {
    float acc = 0.f;
    for (int e = lane * 8; e < D; e += 32 * 8) {
      const int64_t at = head_row_offset(r / p.T, r % p.T, p.T, p.q_heads, D) + e;
      const uint4 gv = *reinterpret_cast<const uint4*>(p.g + at);
      const uint4 ov = *reinterpret_cast<const uint4*>(p.out + at);
      const uint32_t gw[4] = {gv.x, gv.y, gv.z, gv.w}, ow[4] = {ov.x, ov.y, ov.z, ov.w};
#pragma unroll
      for (int w = 0; w < 4; ++w) acc += bf16_lo(gw[w]) * bf16_lo(ow[w]) + bf16_hi(gw[w]) * bf16_hi(ow[w]);
    }
#pragma unroll
    for (int s = 16; s > 0; s /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, s);
    if (lane == 0) p.delta[r] = acc;
  }
}

// Writes a warp's 16 x D float32 accumulators (times `mul`) as bfloat16 rows r0.. of head `head`
// of `dst` (heads of `limit` rows, `heads` interleaved: head_row_offset; rows < limit), through the
// warp's own 16 rows of shared memory `stage`.
template <int D>
__device__ __forceinline__ void store_rows(float (&acc)[D / 8][4], float mul, u16* stage, int pitch, u16* dst,
                                           int64_t head, int64_t heads, int64_t r0, int64_t limit, int lane) {
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    const mma::Cell c0 = mma::accumulator_cell(lane, 0), c2 = mma::accumulator_cell(lane, 2);
    *reinterpret_cast<uint32_t*>(stage + c0.row * pitch + i * 8 + c0.col) = mma::pack_bf16(acc[i][0] * mul, acc[i][1] * mul);
    *reinterpret_cast<uint32_t*>(stage + c2.row * pitch + i * 8 + c2.col) = mma::pack_bf16(acc[i][2] * mul, acc[i][3] * mul);
  }
  __syncwarp();
  for (int c = lane; c < 16 * (D / 8); c += 32) {
    const int r = c / (D / 8), e = (c % (D / 8)) * 8;
    if (r0 + r < limit)
      *reinterpret_cast<uint4*>(dst + head_row_offset(head, r0 + r, limit, heads, D) + e) =
          *reinterpret_cast<const uint4*>(stage + r * pitch + e);
  }
}

// dK and dV for a block of 16 * kWarps keys of key head blockIdx.y (+ 65535 blockIdx.z), over
// query tiles of kBr rows of each of its query heads in turn.
template <int D, int kWarps, int kBr>
__global__ void __launch_bounds__(kWarps * 32) dk_dv_kernel(const BwdParams p) {
  constexpr int kBc = 16 * kWarps, kPitch = D + 8, kChunks = D / 8, kThreads = kWarps * 32;
  extern __shared__ __align__(16) u16 smem[];
  u16* const sk = smem;                  // [kBc][kPitch]
  u16* const sv = sk + kBc * kPitch;     // [kBc][kPitch]
  u16* const sq = sv + kBc * kPitch;     // [2][kBr][kPitch]
  u16* const sg = sq + 2 * kBr * kPitch; // [2][kBr][kPitch]
  float* const slse = reinterpret_cast<float*>(sg + 2 * kBr * kPitch);  // [2][kBr]
  float* const sdelta = slse + 2 * kBr;                                  // [2][kBr]
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int64_t kvh = static_cast<int64_t>(blockIdx.y) + static_cast<int64_t>(blockIdx.z) * 65535;
  if (kvh >= p.n / p.group) return;  // (the z spill's last layer is partly past the heads)
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kBc;
  for (int c = tid; c < kBc * kChunks; c += kThreads) {
    const int r = c / kChunks, e = (c % kChunks) * 8;
    const bool ok = k0 + r < p.S;
    const int64_t off = ok ? head_row_offset(kvh, k0 + r, p.rows, p.kv_heads, D) + e : 0;
    mma::cp_async16(sk + r * kPitch + e, p.k + off, ok);
    mma::cp_async16(sv + r * kPitch + e, p.v + off, ok);
  }
  // Query tiles that can see a key of this block: under the causal mask from k0 - offset on.
  int64_t first = 0;
  if (p.causal && k0 - p.offset > 0) first = (k0 - p.offset) / kBr;
  const int64_t per_head = k0 < p.S ? (p.T + kBr - 1) / kBr - first : 0;
  const int64_t steps = per_head > 0 ? per_head * p.group : 0;
  auto load_q = [&](int64_t step, int buf) {
    const int64_t n = kvh * p.group + step / per_head, q0 = (first + step % per_head) * kBr;
    const int64_t at = head_row_offset(n, 0, p.T, p.q_heads, D);  // (rows q_heads D apart)
    const int pitch = static_cast<int>(p.q_heads) * D;
    for (int c = tid; c < kBr * kChunks; c += kThreads) {
      const int r = c / kChunks, e = (c % kChunks) * 8;
      const bool ok = q0 + r < p.T;
      const int64_t off = ok ? at + (q0 + r) * pitch + e : 0;
      mma::cp_async16(sq + (buf * kBr + r) * kPitch + e, p.q + off, ok);
      mma::cp_async16(sg + (buf * kBr + r) * kPitch + e, p.g + off, ok);
    }
    for (int r = tid; r < kBr; r += kThreads) {
      const bool ok = q0 + r < p.T;
      mma::cp_async4(slse + buf * kBr + r, p.lse + (ok ? n * p.T + q0 + r : 0), ok);
      mma::cp_async4(sdelta + buf * kBr + r, p.delta + (ok ? n * p.T + q0 + r : 0), ok);
    }
  };
  if (steps > 0) load_q(0, 0);
  mma::cp_async_commit();

  const mma::Cell qa = mma::a_fragment_address(lane), kb = mma::bt_fragment_address(lane),
                  vb = mma::b_trans_fragment_address(lane);
  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i)
#pragma unroll
    for (int r = 0; r < 4; ++r) dk[i][r] = dv[i][r] = 0.f;
  const bool warp_live = k0 + warp * 16 < p.S;
  for (int64_t step = 0; step < steps; ++step) {
    const int buf = static_cast<int>(step & 1);
    mma::next_tile_and_wait(step + 1 < steps, [&] { load_q(step + 1, buf ^ 1); });
    const int64_t n = kvh * p.group + step / per_head, q0 = (first + step % per_head) * kBr;
    if (warp_live) {
      const u16* const qt = sq + buf * kBr * kPitch;
      const u16* const gt = sg + buf * kBr * kPitch;
      const float* const lt = slse + buf * kBr;
      const float* const dt = sdelta + buf * kBr;
      // Sᵀ = k qᵀ and dPᵀ = v gᵀ for this warp's 16 keys (rows) and the tile's queries (columns).
      float st[kBr / 8][4], dpt[kBr / 8][4];
#pragma unroll
      for (int i = 0; i < kBr / 8; ++i)
#pragma unroll
        for (int r = 0; r < 4; ++r) st[i][r] = dpt[i][r] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t ak[4], av[4];
        mma::ldmatrix_x4(ak, sk + (warp * 16 + qa.row) * kPitch + kk * 16 + qa.col);
        mma::ldmatrix_x4(av, sv + (warp * 16 + qa.row) * kPitch + kk * 16 + qa.col);
#pragma unroll
        for (int nb = 0; nb < kBr / 16; ++nb) {
          uint32_t bq[4], bg[4];
          mma::ldmatrix_x4(bq, qt + (nb * 16 + kb.row) * kPitch + kk * 16 + kb.col);
          mma::ldmatrix_x4(bg, gt + (nb * 16 + kb.row) * kPitch + kk * 16 + kb.col);
          mma::mma_bf16(st[2 * nb], ak, bq[0], bq[1]);
          mma::mma_bf16(st[2 * nb + 1], ak, bq[2], bq[3]);
          mma::mma_bf16(dpt[2 * nb], av, bg[0], bg[1]);
          mma::mma_bf16(dpt[2 * nb + 1], av, bg[2], bg[3]);
        }
      }
      // Pᵀ and dSᵀ in place (0 where hidden, or where the query row saw no key at all).
      const int64_t mbase = p.mask != nullptr ? mma::mask_base(n, p.lead_rank, p.lead, p.lead_stride) : 0;
#pragma unroll
      for (int nt = 0; nt < kBr / 8; ++nt) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const mma::Cell c = mma::accumulator_cell(lane, r);
          const int qi = nt * 8 + c.col;
          const float lse2 = lt[qi] * kLog2e;
          const bool off = lse2 == -INFINITY || hidden(p, mbase, q0 + qi, k0 + warp * 16 + c.row);
          const float pr = off ? 0.f : exp2f(st[nt][r] * p.scale_log2 - lse2);
          const float z = off ? 0.f : drop_factor(p, n, q0 + qi, k0 + warp * 16 + c.row);
          st[nt][r] = pr * z;  // the weights that met v
          dpt[nt][r] = pr * (dpt[nt][r] * z - dt[qi]);
        }
      }
      // dV += Pᵀ g and dK += dSᵀ q (the tile's queries are the products' k index).
#pragma unroll
      for (int kk = 0; kk < kBr / 16; ++kk) {
        uint32_t ap[4], ads[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const mma::Cell src = mma::p_fragment_source(kk, i);
          ap[i] = mma::pack_bf16(st[src.row][src.col], st[src.row][src.col + 1]);
          ads[i] = mma::pack_bf16(dpt[src.row][src.col], dpt[src.row][src.col + 1]);
        }
#pragma unroll
        for (int db = 0; db < D / 16; ++db) {
          uint32_t bg[4], bq[4];
          mma::ldmatrix_x4_trans(bg, gt + (kk * 16 + vb.row) * kPitch + db * 16 + vb.col);
          mma::ldmatrix_x4_trans(bq, qt + (kk * 16 + vb.row) * kPitch + db * 16 + vb.col);
          mma::mma_bf16(dv[2 * db], ap, bg[0], bg[1]);
          mma::mma_bf16(dv[2 * db + 1], ap, bg[2], bg[3]);
          mma::mma_bf16(dk[2 * db], ads, bq[0], bq[1]);
          mma::mma_bf16(dk[2 * db + 1], ads, bq[2], bq[3]);
        }
      }
    }
    __syncthreads();  // the buffer just read is the one the next step loads into
  }
  mma::cp_async_wait<0>();
  __syncthreads();
  // Every key row of the block is written (zeros past S and where no query sees it), through the
  // warp's own k and v rows.
  store_rows<D>(dk, p.scale, sk + warp * 16 * kPitch, kPitch, p.dk, kvh, p.kv_heads, k0 + warp * 16, p.rows, lane);
  store_rows<D>(dv, 1.f, sv + warp * 16 * kPitch, kPitch, p.dv, kvh, p.kv_heads, k0 + warp * 16, p.rows, lane);
}

// dQ for a block of 16 * kWarps query rows of head blockIdx.y (+ 65535 blockIdx.z), over its keys
// 64 at a time.
template <int D, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) dq_kernel(const BwdParams p) {
  constexpr int kBr = 16 * kWarps, kBc = 64, kPitch = D + 8, kChunks = D / 8, kThreads = kWarps * 32;
  extern __shared__ __align__(16) u16 smem[];
  u16* const sq = smem;                  // [kBr][kPitch]
  u16* const sg = sq + kBr * kPitch;     // [kBr][kPitch]
  u16* const sk = sg + kBr * kPitch;     // [2][kBc][kPitch]
  u16* const sv = sk + 2 * kBc * kPitch; // [2][kBc][kPitch]
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int64_t n = static_cast<int64_t>(blockIdx.y) + static_cast<int64_t>(blockIdx.z) * 65535;
  if (n >= p.n) return;
  const int64_t qb = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;  // (the busiest blocks first)
  const int64_t q0 = qb * kBr;
  const int64_t kvh = n / p.group;
  const int64_t kv_at = head_row_offset(kvh, 0, p.rows, p.kv_heads, D);
  const u16* const kg = p.k + kv_at;
  const u16* const vg = p.v + kv_at;
  const int kv_pitch = static_cast<int>(p.kv_heads) * D;
  for (int c = tid; c < kBr * kChunks; c += kThreads) {
    const int r = c / kChunks, e = (c % kChunks) * 8;
    const bool ok = q0 + r < p.T;
    const int64_t off = ok ? head_row_offset(n, q0 + r, p.T, p.q_heads, D) + e : 0;
    mma::cp_async16(sq + r * kPitch + e, p.q + off, ok);
    mma::cp_async16(sg + r * kPitch + e, p.g + off, ok);
  }
  int64_t s_end = p.S;
  if (p.causal && q0 + kBr + p.offset < s_end) s_end = q0 + kBr + p.offset;
  const int tiles = s_end > 0 ? static_cast<int>((s_end + kBc - 1) / kBc) : 0;
  auto load_kv = [&](int tile, int buf) {
    const int64_t j0 = static_cast<int64_t>(tile) * kBc;
    for (int c = tid; c < kBc * kChunks; c += kThreads) {
      const int r = c / kChunks, e = (c % kChunks) * 8;
      const bool ok = j0 + r < p.S;
      const int64_t off = ok ? (j0 + r) * kv_pitch + e : 0;
      mma::cp_async16(sk + (buf * kBc + r) * kPitch + e, kg + off, ok);
      mma::cp_async16(sv + (buf * kBc + r) * kPitch + e, vg + off, ok);
    }
  };
  if (tiles > 0) load_kv(0, 0);
  mma::cp_async_commit();

  const mma::Cell qa = mma::a_fragment_address(lane), kb = mma::bt_fragment_address(lane),
                  vb = mma::b_trans_fragment_address(lane);
  const mma::Cell ca = mma::accumulator_cell(lane, 0), cb = mma::accumulator_cell(lane, 2);
  const int64_t row_a = q0 + warp * 16 + ca.row, row_b = q0 + warp * 16 + cb.row;
  const float lse_a = row_a < p.T ? p.lse[n * p.T + row_a] * kLog2e : -INFINITY;
  const float lse_b = row_b < p.T ? p.lse[n * p.T + row_b] * kLog2e : -INFINITY;
  const float delta_a = row_a < p.T ? p.delta[n * p.T + row_a] : 0.f;
  const float delta_b = row_b < p.T ? p.delta[n * p.T + row_b] : 0.f;
  const int64_t mbase = p.mask != nullptr ? mma::mask_base(n, p.lead_rank, p.lead, p.lead_stride) : 0;
  const bool warp_live = q0 + warp * 16 < p.T;
  float dq[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.f;
  for (int j = 0; j < tiles; ++j) {
    mma::next_tile_and_wait(j + 1 < tiles, [&] { load_kv(j + 1, (j + 1) & 1); });
    if (warp_live) {
      const u16* const kt = sk + (j & 1) * kBc * kPitch;
      const u16* const vt = sv + (j & 1) * kBc * kPitch;
      float s[kBc / 8][4], dp[kBc / 8][4];
#pragma unroll
      for (int i = 0; i < kBc / 8; ++i)
#pragma unroll
        for (int r = 0; r < 4; ++r) s[i][r] = dp[i][r] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t aq[4], ag[4];
        mma::ldmatrix_x4(aq, sq + (warp * 16 + qa.row) * kPitch + kk * 16 + qa.col);
        mma::ldmatrix_x4(ag, sg + (warp * 16 + qa.row) * kPitch + kk * 16 + qa.col);
#pragma unroll
        for (int nb = 0; nb < kBc / 16; ++nb) {
          uint32_t bk[4], bv[4];
          mma::ldmatrix_x4(bk, kt + (nb * 16 + kb.row) * kPitch + kk * 16 + kb.col);
          mma::ldmatrix_x4(bv, vt + (nb * 16 + kb.row) * kPitch + kk * 16 + kb.col);
          mma::mma_bf16(s[2 * nb], aq, bk[0], bk[1]);
          mma::mma_bf16(s[2 * nb + 1], aq, bk[2], bk[3]);
          mma::mma_bf16(dp[2 * nb], ag, bv[0], bv[1]);
          mma::mma_bf16(dp[2 * nb + 1], ag, bv[2], bv[3]);
        }
      }
      const int64_t j0 = static_cast<int64_t>(j) * kBc;
#pragma unroll
      for (int nt = 0; nt < kBc / 8; ++nt) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const mma::Cell c = mma::accumulator_cell(lane, r);
          const float lse2 = r < 2 ? lse_a : lse_b;
          const bool off = lse2 == -INFINITY || hidden(p, mbase, q0 + warp * 16 + c.row, j0 + nt * 8 + c.col);
          const float pr = off ? 0.f : exp2f(s[nt][r] * p.scale_log2 - lse2);
          const float z = off ? 0.f : drop_factor(p, n, q0 + warp * 16 + c.row, j0 + nt * 8 + c.col);
          dp[nt][r] = pr * (dp[nt][r] * z - (r < 2 ? delta_a : delta_b));
        }
      }
      // dQ += dS k (the tile's keys are the product's k index).
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        uint32_t ads[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const mma::Cell src = mma::p_fragment_source(kk, i);
          ads[i] = mma::pack_bf16(dp[src.row][src.col], dp[src.row][src.col + 1]);
        }
#pragma unroll
        for (int db = 0; db < D / 16; ++db) {
          uint32_t bk[4];
          mma::ldmatrix_x4_trans(bk, kt + (kk * 16 + vb.row) * kPitch + db * 16 + vb.col);
          mma::mma_bf16(dq[2 * db], ads, bk[0], bk[1]);
          mma::mma_bf16(dq[2 * db + 1], ads, bk[2], bk[3]);
        }
      }
    }
    __syncthreads();
  }
  mma::cp_async_wait<0>();
  __syncthreads();
  if (!warp_live) return;
  store_rows<D>(dq, p.scale, sq + warp * 16 * kPitch, kPitch, p.dq, n, p.q_heads, q0 + warp * 16, p.T, lane);
}

// Grids over blocks x heads (heads past 65535 spill into z).
dim3 grid_of(int64_t blocks, int64_t heads) {
  return dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(heads < 65535 ? heads : 65535),
              static_cast<unsigned>((heads + 65534) / 65535));
}

// Above 48 KiB of shared memory must be asked for: once a kernel and device (`done`, the call
// site's own flags), not on every backward (a failure shows as the launch's error).
template <class Kernel>
void allow_shared(Kernel kernel, int bytes, int device, std::atomic<bool> (&done)[64]) {
  if (bytes <= 48 * 1024) return;
  const bool known = device >= 0 && device < 64;
  if (known && done[device].load(std::memory_order_relaxed)) return;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (known) done[device].store(true, std::memory_order_relaxed);
}

template <int D>
void launch_backward(const BwdParams& p, int device, cudaStream_t stream) {
  static std::atomic<bool> kv_done[64], q_done[64];
  constexpr int kWarps = 4, kBrK = D == 128 ? 32 : 64;  // (dK and dV's query tile: fewer registers at D = 128)
  constexpr int kPitch = D + 8;
  auto note = [&p] {  // (for the dry run: what each launch's parameter block points to)
    dry_pointers({p.q, p.k, p.v, p.out, p.lse, p.mask, p.drop_row_keys, p.drop_key_at, p.g, p.delta, p.dq, p.dk, p.dv});
  };
  if (p.T > 0) note(), delta_kernel<D><<<blocks_for(p.n * p.T * 32), 256, 0, stream>>>(p), cuda_rt::count_launch();
  const int kv_bytes = (2 * 16 * kWarps + 4 * kBrK) * kPitch * 2 + 4 * kBrK * 4;
  allow_shared(dk_dv_kernel<D, kWarps, kBrK>, kv_bytes, device, kv_done);
  if (p.rows > 0)
    note(), dk_dv_kernel<D, kWarps, kBrK><<<grid_of((p.rows + 16 * kWarps - 1) / (16 * kWarps), p.n / p.group), kWarps * 32,
                                  kv_bytes, stream>>>(p), cuda_rt::count_launch();
  const int q_bytes = (2 * 16 * kWarps + 4 * 64) * kPitch * 2;
  allow_shared(dq_kernel<D, kWarps>, q_bytes, device, q_done);
  if (p.T > 0)
    note(), dq_kernel<D, kWarps><<<grid_of((p.T + 16 * kWarps - 1) / (16 * kWarps), p.n), kWarps * 32, q_bytes, stream>>>(p), cuda_rt::count_launch();
}

}  // namespace

void attention_backward(const AttentionBackwardArgs& b) {
  const AttentionArgs& a = b.fwd;
  if (a.n == 0) return;
  BwdParams p{};
  static_cast<TcAttentionParams&>(p) = tc_attention_params(a);
  p.g = static_cast<const u16*>(b.g);
  p.delta = static_cast<float*>(b.delta);
  p.dq = static_cast<u16*>(b.dq);
  p.dk = static_cast<u16*>(b.dk);
  p.dv = static_cast<u16*>(b.dv);
  p.scale = static_cast<float>(a.scale);
  cudaStream_t s = stream_of(a.device);
  switch (a.d) {
    case 32: launch_backward<32>(p, a.device, s); break;
    case 64: launch_backward<64>(p, a.device, s); break;
    default: launch_backward<128>(p, a.device, s); break;
  }
  cuda_rt::after_launch(a.device, a.op);
}

}  // namespace tg::cuda_ops
