#pragma once
// Matrix products: matmul and linear. The op families, lowest first: elementwise < reduce <
// shape_ops < nn < matmul < attention. A family's header includes only lower families' headers
// (tools/check_layers.py checks it); its .cc may call any public op (backward formulas are ops).
#include "../graph/tensor.h"
#include "nn.h"  // Activation

namespace tg {

// Matrix product, as torch.matmul: 1-D operands are treated as a row (left) or column (right)
// vector; operands of rank >= 3 are batches whose leading dims broadcast. transpose_a / _b use
// the transpose of the last two dims of a / b (so q kᵀ is matmul(q, k, false, true)).
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

// A linear layer, as torch.nn.functional.linear followed by the activation: act(x weightᵀ + bias),
// x [..., in], weight [out, in], bias [out] (or undefined: none); returns [..., out]. With a bias and
// Identity or ReLU it is one op whose product adds the bias and applies the activation to each
// block of the output as the block is finished (under autocast, in the bfloat16 kernel's epilogue),
// so the output is written once and only it is kept for the backward; otherwise matmul then
// bias_act. The same values as matmul then bias_act, in every precision.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), Activation act = Activation::kIdentity);

// After an optimizer has updated a float32 weight in place (its version bumped): remakes the
// bfloat16 packs autocast keeps for it — those that served a product since they were made — now,
// while the weight is in cache, instead of at its next use (step C in bf16 on AMX, 2 threads: about
// 3% faster).
// A no-op for a weight without packs. The optimizers call it after each parameter's update.
void refresh_autocast_packs(const Tensor& weight);

namespace detail {
// On a GPU, autocast keeps a bfloat16 copy of each float32 weight (a leaf that requires grad) with
// its storage, made at its first product and valid for the storage's version; the optimizers
// rewrite it in their update pass. gpu_bf16_copy: the copy if one exists (of any version), else an
// undefined tensor; mark_gpu_bf16_copy_fresh: the update just queued wrote it for the new version.
Tensor gpu_bf16_copy(const Tensor& weight);
void mark_gpu_bf16_copy_fresh(const Tensor& weight);
// An op that wrote its float32 GPU output x and, in the same pass, x rounded to bfloat16 (`copy`)
// hands the copy over: under autocast, the products that read x take it instead of casting x.
void keep_gpu_bf16_copy(const Tensor& x, const Tensor& copy);
}  // namespace detail

}  // namespace tg
