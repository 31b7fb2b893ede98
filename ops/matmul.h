#pragma once
#include "../graph/tensor.h"

namespace tg {

// Matrix product, as torch.matmul: 1-D operands are treated as a row (left) or column (right)
// vector; operands of rank >= 3 are batches whose leading dims broadcast. transpose_a / _b use
// the transpose of the last two dims of a / b (so q kᵀ is matmul(q, k, false, true)).
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

}  // namespace tg
