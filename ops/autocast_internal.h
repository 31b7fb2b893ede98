#pragma once
// GPU autocast's bfloat16 chains, as under PyTorch's CUDA autocast, with no float32 copies between
// the products: around attention (models/attention.cc) the Q, K and V projections return bfloat16,
// the tensor-core kernel reads and writes bfloat16, and the output projection takes that bfloat16
// input; in the feed-forward block (models/transformer.cc) the hidden layer comes out of its product
// in bfloat16 (ReLU in the epilogue), dropout keeps it bfloat16 and the second product reads it as
// it is. Not a public header.
#include <cstdint>

#include "../graph/tensor.h"

namespace tg::detail {

// linear(x, weight, bias) under autocast with a bfloat16 output: x, weight and bias float32, the
// products in bfloat16 with float32 sums, the bias (rounded to bfloat16) added, ReLU where relu,
// and the sum rounded once. Its gradient arrives in bfloat16. (ops/matmul.cc)
Tensor linear_bf16_output(const Tensor& x, const Tensor& weight, const Tensor& bias, bool relu = false);

// Whether a float32 input like `x` is on a GPU under autocast now (trained or not). (ops/attention.cc)
bool autocast_on_gpu(const Tensor& x);

// Whether a float32 input like `x` is being trained under autocast on a GPU now (the bfloat16
// chains above apply). (ops/attention.cc)
bool autocast_trains_on_gpu(const Tensor& x, bool needs_grad);

// Whether flash_attention trains float32 q, k, v like `x` (on its device) with head size d in
// bfloat16 on tensor cores under the autocast in force now. (ops/attention.cc)
bool autocast_attention_on_tensor_cores(const Tensor& x, int64_t d, bool needs_grad);

}  // namespace tg::detail
