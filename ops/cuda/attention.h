#pragma once
// Attention and rotary embedding on the GPU (attention.cu; attention_none.cc without CUDA).
// This is the plain kernel of the design (any head size up to 256, float32 and float64): one
// block a query row, keys in chunks with an online softmax, the T x S weights never stored. The
// tensor-core FlashAttention-2 kernel for head sizes 32/64/128 in bfloat16 comes with the speed
// work (issues 47 and 48).
#include <cstdint>

#include "elementwise.h"

namespace tg::cuda_ops {

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
  void* lse = nullptr;      // [n, T]: the log-sum-exp of each row's weights (-inf where no key is seen)
  int64_t n = 0, T = 0, S = 0, rows = 0, d = 0, dv = 0, group = 1;
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
};
void attention(const AttentionArgs& args);

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
