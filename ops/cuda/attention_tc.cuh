#pragma once
// The tensor-core attention kernels' parameters (attention_tc.cu, attention_tc_bwd.cu), for
// attention.cu, which picks them for bfloat16 with head size 32, 64 or 128
// (attention_takes_tensor_cores in attention.h).
#include <cstdint>

#include "ops/cuda/attention.h"

namespace tg::cuda_ops {

struct TcAttentionParams {
  const uint16_t* q = nullptr;  // bfloat16 [n, T, D]
  const uint16_t* k = nullptr;  // bfloat16 [n / group, rows, D]
  const uint16_t* v = nullptr;  // bfloat16 [n / group, rows, D]
  uint16_t* out = nullptr;      // bfloat16 [n, T, D]
  float* lse = nullptr;         // [n, T]
  int64_t n = 0, T = 0, S = 0, rows = 0, group = 1;  // n: query heads
  int64_t q_heads = 1, kv_heads = 1;  // rows of q, out (g, dq) and of k, v (dk, dv): head_row_offset
  float scale_log2 = 1;  // the scale times log2(e): the softmax runs in powers of two
  bool causal = false;
  int64_t offset = 0;
  const bool* mask = nullptr;  // as AttentionArgs
  int lead_rank = 0;
  int64_t lead[kMaxLeadRank] = {};
  int64_t lead_stride[kMaxLeadRank] = {};
  int64_t mask_row = 0, mask_col = 0;
  bool dropout = false;  // as AttentionArgs
  int32_t drop_thr31 = 0;
  float drop_scale = 1;
  uint64_t drop_key = 0;
  const uint64_t* drop_row_keys = nullptr;
  const uint64_t* drop_key_at = nullptr;
};

// The parameters of AttentionArgs as the tensor-core kernels take them (forward and backward).
TcAttentionParams tc_attention_params(const AttentionArgs& a);

// Launches the kernel for a.d = a.dv in {32, 64, 128}, a.type bfloat16, a.lse float32.
void attention_tc(const AttentionArgs& a);

}  // namespace tg::cuda_ops
