// matmul: 2-D and batched (broadcast batch dims), 1-D vectors, transpose flags. Transposed
// operands are read through strides by the packed GEMM (ops/kernels/gemm.h), never copied, and
// the backward picks transpose flags instead of transposing.
#include "ops/matmul.h"

#include "graph/factory.h"
#include "ops/cpu_capability.h"
#include "ops/kernels/bf16.h"
#include "ops/kernels/gemm.h"
#include "ops/op_util.h"
#include "ops/reduce.h"
#include "ops/shape_ops.h"

namespace tg {
namespace {

// Both operands of rank >= 2 and the same float dtype. With ta, a holds [..., K, M]; with tb,
// b holds [..., N, K].
Tensor matmul_nd(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  const int64_t ar = as[as.rank() - 2], ac = as[as.rank() - 1];
  const int64_t br = bs[bs.rank() - 2], bc = bs[bs.rank() - 1];
  const int64_t M = ta ? ac : ar, K = ta ? ar : ac;
  const int64_t K2 = tb ? bc : br, N = tb ? br : bc;
  TG_CHECK(K == K2, "matmul", "shapes {}{} and {}{} cannot be multiplied (inner dimensions {} and {} differ)", as,
           ta ? " (transposed)" : "", bs, tb ? " (transposed)" : "", K, K2);
  Shape abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
  Shape batch = broadcast_shapes(abatch, bbatch, "matmul");
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor out = Tensor::empty(out_shape, a.dtype());
  // Batch offsets of a and b for every output batch index (stride 0 where broadcast).
  const int64_t nb = batch.numel();
  BroadcastPlan plan = make_broadcast_plan(batch, {abatch, bbatch});
  std::vector<int64_t> aoff(static_cast<size_t>(nb)), boff(static_cast<size_t>(nb));
  for_each_run(plan, [&](int64_t o, const int64_t* in, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      aoff[o + i] = in[0] + i * plan.inner_stride[0];
      boff[o + i] = in[1] + i * plan.inner_stride[1];
    }
  });
  if (a.dtype() == kBFloat16) {
    // bfloat16 x bfloat16: float32 sums on the path ops/kernels/bf16.h chose, rounded once to bfloat16.
    Tensor acc = Tensor::empty(out_shape, kFloat32);
    const auto* pa = reinterpret_cast<const uint16_t*>(a.data<bfloat16>());
    const auto* pb = reinterpret_cast<const uint16_t*>(b.data<bfloat16>());
    float* pc = acc.data<float>();
    const auto path = static_cast<kernels::CpuPath>(cpu_capability());
    auto one = [&](int64_t i) {
      kernels::gemm_bf16(M, N, K, {pa + aoff[i] * M * K, true, ac, ta}, {pb + boff[i] * K * N, true, bc, tb}, pc + i * M * N, N,
                         false, path);
    };
    if (nb > 1 && M * N * K <= (int64_t{1} << 21)) {
      kernels::parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t i = b0; i < b1; ++i) one(i);
      });
    } else {
      for (int64_t i = 0; i < nb; ++i) one(i);
    }
    kernels::float_to_bf16(pc, reinterpret_cast<uint16_t*>(out.data<bfloat16>()), out.numel());
  } else dispatch_float(a.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    auto one = [&](int64_t i) {
      kernels::gemm<T>(ta, tb, M, N, K, pa + aoff[i] * M * K, ac, pb + boff[i] * K * N, bc, po + i * M * N, N);
    };
    // Many small products (attention): one thread per product. Few large ones: threads inside.
    if (nb > 1 && M * N * K <= (int64_t{1} << 21)) {
      kernels::parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t i = b0; i < b1; ++i) one(i);
      });
    } else {
      for (int64_t i = 0; i < nb; ++i) one(i);
    }
  });
  return record("matmul", out, {a, b}, [a, b, ta, tb](const Tensor& g, const Node& n) {
    // C = op(A) op(B): d op(A) = g op(B)^T, d op(B) = op(A)^T g, then undo the op.
    Tensor ga, gb;
    if (n.needs(0)) ga = sum_to(ta ? matmul(b, g, tb, true) : matmul(g, b, false, !tb), a.shape());
    if (n.needs(1)) gb = sum_to(tb ? matmul(g, a, true, ta) : matmul(a, g, !ta, false), b.shape());
    return Grads{ga, gb};
  });
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  detail::check_float(a, "matmul");
  detail::check_float(b, "matmul");
  TG_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul", "both operands need at least one dimension, got shapes {} and {}",
           a.shape(), b.shape());
  TG_CHECK(a.dtype() == b.dtype(), "matmul", "operands have different dtypes ({} and {})", a.dtype(), b.dtype());
  TG_CHECK(!(transpose_a && a.dim() < 2) && !(transpose_b && b.dim() < 2), "matmul",
           "a transpose flag needs an operand of rank >= 2, got shapes {} and {}", a.shape(), b.shape());
  if (a.dim() == 1 && b.dim() == 1) {
    TG_CHECK(a.numel() == b.numel(), "matmul", "vectors of lengths {} and {} differ", a.numel(), b.numel());
    return reshape(matmul_nd(reshape(a, {1, a.numel()}), reshape(b, {b.numel(), 1}), false, false), Shape{});
  }
  if (a.dim() == 1) return squeeze(matmul_nd(unsqueeze(a, 0), b, false, transpose_b), -2);
  if (b.dim() == 1) return squeeze(matmul_nd(a, unsqueeze(b, -1), transpose_a, false), -1);
  return matmul_nd(a, b, transpose_a, transpose_b);
}

}  // namespace tg
