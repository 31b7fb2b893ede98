#pragma once
// GPU autocast's bfloat16 chain around attention (models/attention.cc): the Q, K and V projections
// return bfloat16, the tensor-core kernel reads and writes bfloat16, and the output projection takes
// that bfloat16 input — no float32 copies of q, k, v or the heads in between, as under PyTorch's
// CUDA autocast. Not a public header.
#include <cstdint>

#include "../graph/tensor.h"

namespace tg::detail {

// linear(x, weight, bias) under autocast with a bfloat16 output: x, weight and bias float32, the
// products in bfloat16 with float32 sums, the bias (rounded to bfloat16) added and the sum rounded
// once. Its gradient arrives in bfloat16. (ops/matmul.cc)
Tensor linear_bf16_output(const Tensor& x, const Tensor& weight, const Tensor& bias);

// Whether flash_attention trains float32 q, k, v like `x` (on its device) with head size d in
// bfloat16 on tensor cores under the autocast in force now. (ops/attention.cc)
bool autocast_attention_on_tensor_cores(const Tensor& x, int64_t d, bool needs_grad);

}  // namespace tg::detail
