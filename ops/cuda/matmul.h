#pragma once
// Products on the GPU through cuBLASLt (matmul_cuda.cc; matmul_none.cc without CUDA), and the
// mapping of tapegrad's row-major products onto cuBLAS's column-major ones (gemm_mapping, plain and
// tested on the CPU by tests/cuda_host_test.cc).
#include <cstdint>

#include "elementwise.h"

namespace tg::cuda_ops {

// C[M, N] = op(A) op(B), all row-major and contiguous: A is [M, K] ([K, M] with trans_a), B is
// [K, N] ([N, K] with trans_b). Column-major, that is Cᵀ = op(B)ᵀ op(A)ᵀ: cuBLAS's first operand is
// our B and its second our A. What cuBLAS is told, for each operand, is the stored matrix's rows,
// columns and leading dimension (column-major) and whether to transpose it.
struct ColumnMajorOperand {
  int64_t rows = 0, cols = 0, ld = 0;
  bool transpose = false;
};
struct GemmMapping {
  int64_t m = 0, n = 0, k = 0;    // cuBLAS's m, n, k: N, M, K
  ColumnMajorOperand first;       // our B
  ColumnMajorOperand second;      // our A
  int64_t ldc = 0;                // C as column-major [N, M]: N
};
inline GemmMapping gemm_mapping(int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b) {
  GemmMapping g;
  g.m = N;
  g.n = M;
  g.k = K;
  // B stored row-major [K, N] is column-major [N, K] with ld N: already op(B)ᵀ. Stored [N, K]
  // (trans_b) it is column-major [K, N] with ld K, to be transposed.
  g.first = trans_b ? ColumnMajorOperand{K, N, K, true} : ColumnMajorOperand{N, K, N, false};
  // A stored [M, K] is column-major [K, M] with ld K: already op(A)ᵀ; stored [K, M] (trans_a) it is
  // column-major [M, K] with ld M, to be transposed.
  g.second = trans_a ? ColumnMajorOperand{M, K, M, true} : ColumnMajorOperand{K, M, K, false};
  g.ldc = N;
  return g;
}

struct GemmArgs {
  int device = 0;
  const char* op = "";
  Scalar in_type = Scalar::kF32;   // A and B: float32, float64 or bfloat16
  Scalar out_type = Scalar::kF32;  // C: the same, or float32 for bfloat16 operands (autocast)
  bool tf32 = false;               // float32 products in TF32 (only when the user asked)
  int64_t M = 0, N = 0, K = 0, batch = 1;
  const void* A = nullptr;
  int64_t stride_a = 0;            // elements between the batch's A matrices (0: the same one)
  bool trans_a = false;
  const void* B = nullptr;
  int64_t stride_b = 0;
  bool trans_b = false;
  void* C = nullptr;
  int64_t stride_c = 0;
  // cuBLASLt's epilogue (one product): C = act(op(A) op(B) + bias), bias [N] (optional) in C's type
  // added to every row in the float32 (float64) sums before C is rounded, act ReLU where relu (a
  // linear layer in one call).
  const void* bias = nullptr;
  bool relu = false;
  // C += op(A) op(B) (beta = 1: a gradient added into the sum gathered before), without an epilogue.
  bool accumulate = false;
};
void gemm(const GemmArgs& args);

}  // namespace tg::cuda_ops
