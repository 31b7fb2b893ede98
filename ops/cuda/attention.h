#pragma once
// Attention and rotary embedding on the GPU (attention.cu; attention_none.cc without CUDA).
// Two kernels: the plain one (any head size up to 256, float32 and float64: one block a query
// row, keys in chunks with an online softmax) and, for bfloat16 with head sizes 32, 64 and 128, a
// tensor-core FlashAttention-2 kernel (attention_tc.cu). Neither stores the T x S weights.
#include <cstdint>
#include <initializer_list>

#include "elementwise.h"
#include "hd.h"

namespace tg::cuda_ops {

// Where row r (a query or key position) of head n starts, in elements, for heads of `len` rows of
// `width` elements: heads = 1 is [n, len, width] (each head's rows together); heads = H is
// [B, len, H, width] with n = b H + h (AttentionLayout::kTokensFirst: the rows of a batch's H heads
// interleaved, as a projection [B, len, H width] reshaped).
TG_HD int64_t head_row_offset(int64_t n, int64_t r, int64_t len, int64_t heads, int64_t width) {
  return ((n / heads) * len + r) * heads * width + (n % heads) * width;
}

constexpr int kMaxLeadRank = 8;
constexpr int64_t kMaxHeadSize = 256;

struct AttentionArgs {
  int device = 0;
  const char* op = "";
  Scalar type = Scalar::kF32;
  const void* q = nullptr;  // [n, T, d]
  const void* k = nullptr;  // [n / group, rows, d]
  const void* v = nullptr;  // [n / group, rows, dv]
  void* out = nullptr;      // [n, T, dv]
  void* lse = nullptr;      // [n, T]: the log-sum-exp of each row's weights (-inf where no key is seen);
                            // float32 for bfloat16 q, k, v
  int64_t n = 0, T = 0, S = 0, rows = 0, d = 0, dv = 0, group = 1;
  // Heads interleaved per row (head_row_offset): 1 for the [n, T, d] layouts above; with
  // AttentionLayout::kTokensFirst, H for q and out ([B, T, H, d]) and H_kv for k and v ([B, rows,
  // H_kv, d]). The tensor-core kernels read both layouts; the plain kernel takes 1 only.
  int64_t q_heads = 1, kv_heads = 1;
  double scale = 1;
  bool causal = false;
  int64_t causal_offset = 0;
  // An optional bool mask (true = hidden) broadcast to [lead..., T, S]: its element for head n, row
  // i, key j sits at base(n) + i * mask_row + j * mask_col, base(n) from n's coordinates in `lead`
  // and the mask's strides over those dims (0 where it broadcasts).
  const bool* mask = nullptr;
  int lead_rank = 0;
  int64_t lead[kMaxLeadRank] = {};
  int64_t mask_lead_stride[kMaxLeadRank] = {};
  int64_t mask_row = 0, mask_col = 0;
  // Dropout on the weights (AttentionOptions::dropout): weight (i, j) of head n is kept, times
  // drop_scale, when math::dropout_keeps(drop_key, (n T + i) S + j) — or, with row keys (dropout
  // keyed by sample), dropout_keeps(drop_row_keys[n T + i], j); the row sums count every weight.
  bool dropout = false;
  int32_t drop_thr31 = 0;
  double drop_scale = 1;
  uint64_t drop_key = 0;
  const uint64_t* drop_row_keys = nullptr;  // device memory, [n T]
  const uint64_t* drop_key_at = nullptr;    // device memory: drop_key read there when set (a CUDA graph's step value)
};
void attention(const AttentionArgs& args);

// The tensor-core kernels' backward (attention_tc_bwd.cu): bfloat16 q, k, v, the forward's output
// o and its gradient g, with the float32 log-sum-exp the forward saved; writes bfloat16 dq, dk, dv
// (dk and dv for all `rows` keys: zeros past S). Three launches: delta = rowsum(g * o) (into the
// float32 scratch [n, T]), dk and dv by key block (a key head's query heads summed in order), dq
// by query block; no atomics, so the same bits every run. Masks as AttentionArgs.
struct AttentionBackwardArgs {
  AttentionArgs fwd;  // q, k, v, out (= o), lse, sizes, scale and masks as the forward had them
  const void* g = nullptr;  // [n, T, dv]
  void* delta = nullptr;    // float32 [n, T], scratch
  void* dq = nullptr;       // [n, T, d]
  void* dk = nullptr;       // [n / group, rows, d]
  void* dv = nullptr;       // [n / group, rows, dv]
};
void attention_backward(const AttentionBackwardArgs& args);

// Whether bfloat16 attention of these head sizes and pointers runs on the tensor-core kernel: d = dv
// in {32, 64, 128}, every pointer at a 16-byte boundary. Other bfloat16 attention runs in float32.
inline bool attention_takes_tensor_cores(int64_t d, int64_t dv, std::initializer_list<const void*> pointers) {
  if (d != dv || (d != 32 && d != 64 && d != 128)) return false;
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// Rotary embedding, half-split: rows of d = 2h at positions r mod T, rotated by cos/sin [T, h]
// (sign -1 rotates back), as ops/kernels/rope.h.
struct RopeArgs {
  int device = 0;
  const char* op = "";
  Scalar type = Scalar::kF32;
  const void* x = nullptr;
  const void* cos = nullptr;
  const void* sin = nullptr;
  void* y = nullptr;
  int64_t rows = 0, T = 0, h = 0;
  double sign = 1;
};
void rope(const RopeArgs& args);

}  // namespace tg::cuda_ops
