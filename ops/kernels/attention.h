#pragma once
// Fused scaled-dot-product attention, forward and backward, in the FlashAttention-2 manner:
// queries and keys are walked in blocks; a block of scores S = Q_i K_j^T * scale lives only in a
// small per-thread buffer; the forward keeps a running row maximum m and row sum l (online
// softmax) and saves only the log-sum-exp L = m + log l per query row; the backward recomputes
// each score block from Q, K and L. No T x S matrix is ever stored, so memory grows linearly in T.
//
// One call handles one (batch, head) pair: q [T, d], k [S, d], v [S, dv], o [T, dv]. The caller
// runs pairs in parallel; inside a pair everything is sequential, so results do not depend on
// the thread count.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "dropout.h"
#include "gemm.h"
#include "softmax.h"

namespace tg::kernels {

inline constexpr int64_t kAttnBlockQ = 64;
inline constexpr int64_t kAttnBlockK = 64;

// Which scores are masked: causal (key j > query i + offset: with a key/value cache the T queries
// are the last T of offset + T positions), and/or a bool mask read at
// mask[i * mask_row + j * mask_col] (strides 0 where it broadcasts); true means masked out.
struct AttnMask {
  bool causal = false;
  const bool* mask = nullptr;
  int64_t mask_row = 0, mask_col = 0;
  int64_t offset = 0;  // causal: query i sees keys j <= i + offset
  bool masked(int64_t i, int64_t j) const {
    return (causal && j > i + offset) || (mask && mask[i * mask_row + j * mask_col]);
  }
  bool any() const { return causal || mask; }
};

// Dropout on the weights (training): weight (i, j) of this head is kept, times scale, when the mask
// dropout() would draw over the [..., T, S] weights keeps it: element counter first + i * row_len + j
// under `key`, or counter j under row_keys[i] (dropout keyed by sample). The row sums of the
// softmax count every weight; only what meets v is dropped (as PyTorch's dropout on the weights).
struct AttnDropout {
  bool on = false;
  int32_t thr31 = 0;  // kept when the top 31 bits of the hash are >= this
  double scale = 1;
  uint64_t key = 0;
  int64_t first = 0, row_len = 0;
  const uint64_t* row_keys = nullptr;
  // out[c] = scale where weight (i, j0 + c) is kept, else 0, for c < n; bits: n of scratch.
  template <class T>
  void factors(int64_t i, int64_t j0, int64_t n, T* out, uint32_t* bits) const {
    if (row_keys) dropout_bits(row_keys[i], j0, bits, n);
    else dropout_bits(key, first + i * row_len + j0, bits, n);
    const T sc = static_cast<T>(scale);
    for (int64_t c = 0; c < n; ++c) out[c] = static_cast<int32_t>(bits[c] >> 1) >= thr31 ? sc : T(0);
  }
};

template <class T>
struct AttnScratch {
  std::vector<T> s, p, o, dp;
  std::vector<T> m, l;
  std::vector<T> z, pd;        // dropout: keep factors and the dropped weights of a block
  std::vector<uint32_t> bits;  // dropout: one row's hash bits
  void reserve_dropout() {
    const size_t blk = static_cast<size_t>(kAttnBlockQ * kAttnBlockK);
    z.resize(blk);
    pd.resize(blk);
    bits.resize(static_cast<size_t>(kAttnBlockK));
  }
  void reserve(int64_t dv, int64_t d) {
    const size_t blk = static_cast<size_t>(kAttnBlockQ * kAttnBlockK);
    s.resize(blk);
    p.resize(blk);
    dp.resize(blk);
    o.resize(static_cast<size_t>(kAttnBlockQ * std::max(dv, d)));
    m.resize(kAttnBlockQ);
    l.resize(kAttnBlockQ);
  }
};

// S[bq, bk] = scale * Q_i K_j^T, then masked entries set to -inf.
template <class T>
void attn_scores(const T* q, const T* k, int64_t d, int64_t i0, int64_t bq, int64_t j0, int64_t bk, T scale,
                 const AttnMask& mask, T* S) {
  gemm<T>(false, true, bq, bk, d, q + i0 * d, d, k + j0 * d, d, S, kAttnBlockK);
  const T ninf = -std::numeric_limits<T>::infinity();
  for (int64_t r = 0; r < bq; ++r) {
    T* row = S + r * kAttnBlockK;
    unary_loop(row, row, bk, Affine<T>{scale, T(0)});
    if (mask.any())
      for (int64_t c = 0; c < bk; ++c)
        if (mask.masked(i0 + r, j0 + c)) row[c] = ninf;
  }
}

// Forward for one (batch, head): o = softmax(scale q k^T + mask) v; lse[t] = log-sum-exp of row t
// (+inf for a row with no visible key, whose output is 0).
template <class T>
void attention_forward(const T* q, const T* k, const T* v, T* o, T* lse, int64_t Tq, int64_t Sk, int64_t d,
                       int64_t dv, T scale, const AttnMask& mask, AttnScratch<T>& w, const AttnDropout& drop = {}) {
  const T ninf = -std::numeric_limits<T>::infinity();
  w.reserve(dv, d);
  if (drop.on) w.reserve_dropout();
  for (int64_t i0 = 0; i0 < Tq; i0 += kAttnBlockQ) {
    const int64_t bq = std::min(kAttnBlockQ, Tq - i0);
    std::fill(w.m.begin(), w.m.end(), ninf);
    std::fill(w.l.begin(), w.l.end(), T(0));
    std::fill(w.o.begin(), w.o.begin() + bq * dv, T(0));
    const int64_t j_end = mask.causal ? std::min(Sk, i0 + bq + mask.offset) : Sk;  // keys after the last query's are all masked
    for (int64_t j0 = 0; j0 < j_end; j0 += kAttnBlockK) {
      const int64_t bk = std::min(kAttnBlockK, j_end - j0);
      attn_scores(q, k, d, i0, bq, j0, bk, scale, mask, w.s.data());
      for (int64_t r = 0; r < bq; ++r) {
        T* srow = w.s.data() + r * kAttnBlockK;
        T* prow = w.p.data() + r * kAttnBlockK;
        const T mnew = std::max(w.m[r], fold_run(srow, bk, Max{}, ninf));
        if (mnew == ninf) {  // nothing visible yet in this row
          std::fill(prow, prow + bk, T(0));
          continue;
        }
        const T sum = exp_shift_sum(srow, mnew, prow, bk);
        const T alpha = std::exp(w.m[r] - mnew);  // 0 when the old maximum was -inf
        w.l[r] = w.l[r] * alpha + sum;
        w.m[r] = mnew;
        if (alpha != T(1)) unary_loop(w.o.data() + r * dv, w.o.data() + r * dv, dv, Affine<T>{alpha, T(0)});
        if (drop.on) {  // (after the row sum: the dropped weights still count in it)
          drop.factors(i0 + r, j0, bk, w.z.data(), w.bits.data());
          for (int64_t c = 0; c < bk; ++c) prow[c] *= w.z[c];
        }
      }
      gemm<T>(false, false, bq, dv, bk, w.p.data(), kAttnBlockK, v + j0 * dv, dv, w.o.data(), dv, true);
    }
    for (int64_t r = 0; r < bq; ++r) {
      const T lr = w.l[r];
      const T inv = lr > T(0) ? T(1) / lr : T(0);
      unary_loop(w.o.data() + r * dv, o + (i0 + r) * dv, dv, Affine<T>{inv, T(0)});
      lse[i0 + r] = lr > T(0) ? w.m[r] + std::log(lr) : std::numeric_limits<T>::infinity();
    }
  }
}

// Backward for one (batch, head). Given o, lse and do (the output's gradient), writes dq, dk, dv
// (each overwritten; dk and dv added to instead when accumulate is set: the query heads of a
// group that share one key/value head, in grouped-query attention). Key blocks outside, query blocks inside: dk and dv of a key block are
// finished before moving on; dq accumulates across key blocks in its own buffer.
template <class T>
void attention_backward(const T* q, const T* k, const T* v, const T* o, const T* lse, const T* dout, T* dq, T* dk,
                        T* dvv, int64_t Tq, int64_t Sk, int64_t d, int64_t dv, T scale, const AttnMask& mask,
                        AttnScratch<T>& w, std::vector<T>& drow, bool accumulate = false, const AttnDropout& drop = {}) {
  using B = xsimd::batch<T>;
  constexpr int64_t L = static_cast<int64_t>(B::size);
  w.reserve(dv, d);
  if (drop.on) w.reserve_dropout();
  // D[t] = sum_c dO[t, c] O[t, c]: the row term of the softmax gradient.
  drow.resize(static_cast<size_t>(Tq));
  for (int64_t t = 0; t < Tq; ++t) {
    B acc(T(0));
    T s = 0;
    int64_t c = 0;
    for (; c + L <= dv; c += L) acc = xsimd::fma(B::load_unaligned(dout + t * dv + c), B::load_unaligned(o + t * dv + c), acc);
    for (; c < dv; ++c) s += dout[t * dv + c] * o[t * dv + c];
    drow[t] = s + hsum(acc);
  }
  std::fill(dq, dq + Tq * d, T(0));
  if (!accumulate) {
    std::fill(dk, dk + Sk * d, T(0));
    std::fill(dvv, dvv + Sk * dv, T(0));
  }
  for (int64_t j0 = 0; j0 < Sk; j0 += kAttnBlockK) {
    const int64_t bk = std::min(kAttnBlockK, Sk - j0);
    // Earlier queries see none of these keys.
    const int64_t i_start = mask.causal ? std::max<int64_t>(0, j0 - mask.offset) / kAttnBlockQ * kAttnBlockQ : 0;
    for (int64_t i0 = i_start; i0 < Tq; i0 += kAttnBlockQ) {
      const int64_t bq = std::min(kAttnBlockQ, Tq - i0);
      attn_scores(q, k, d, i0, bq, j0, bk, scale, mask, w.s.data());
      // P = exp(S - L): the attention weights of this block.
      for (int64_t r = 0; r < bq; ++r) {
        const T* srow = w.s.data() + r * kAttnBlockK;
        T* prow = w.p.data() + r * kAttnBlockK;
        const B vl(lse[i0 + r]);
        int64_t c = 0;
        for (; c + L <= bk; c += L) xsimd::exp(B::load_unaligned(srow + c) - vl).store_unaligned(prow + c);
        for (; c < bk; ++c) prow[c] = std::exp(srow[c] - lse[i0 + r]);
      }
      // dV_j += P^T dO_i (with dropout: the dropped weights Z P)
      if (drop.on) {
        for (int64_t r = 0; r < bq; ++r) {
          T* zrow = w.z.data() + r * kAttnBlockK;
          drop.factors(i0 + r, j0, bk, zrow, w.bits.data());
          for (int64_t c = 0; c < bk; ++c) w.pd[r * kAttnBlockK + c] = w.p[r * kAttnBlockK + c] * zrow[c];
        }
      }
      gemm<T>(true, false, bk, dv, bq, (drop.on ? w.pd : w.p).data(), kAttnBlockK, dout + i0 * dv, dv, dvv + j0 * dv, dv,
              true);
      // dP = dO_i V_j^T (with dropout: times Z), then dS = P (dP - D) * scale (in place in dp)
      gemm<T>(false, true, bq, bk, dv, dout + i0 * dv, dv, v + j0 * dv, dv, w.dp.data(), kAttnBlockK);
      if (drop.on) {
        for (int64_t r = 0; r < bq; ++r)
          for (int64_t c = 0; c < bk; ++c) w.dp[r * kAttnBlockK + c] *= w.z[r * kAttnBlockK + c];
      }
      for (int64_t r = 0; r < bq; ++r) {
        T* dprow = w.dp.data() + r * kAttnBlockK;
        const T* prow = w.p.data() + r * kAttnBlockK;
        const B vd(drow[i0 + r]), vs(scale);
        int64_t c = 0;
        for (; c + L <= bk; c += L)
          (B::load_unaligned(prow + c) * (B::load_unaligned(dprow + c) - vd) * vs).store_unaligned(dprow + c);
        for (; c < bk; ++c) dprow[c] = prow[c] * (dprow[c] - drow[i0 + r]) * scale;
      }
      // dQ_i += dS K_j ; dK_j += dS^T Q_i
      gemm<T>(false, false, bq, d, bk, w.dp.data(), kAttnBlockK, k + j0 * d, d, dq + i0 * d, d, true);
      gemm<T>(true, false, bk, d, bq, w.dp.data(), kAttnBlockK, q + i0 * d, d, dk + j0 * d, d, true);
    }
  }
}

}  // namespace tg::kernels
