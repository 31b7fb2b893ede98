// matmul: 2-D and batched (broadcast batch dims), 1-D vectors, transpose flags.
#include "ops/matmul.h"

#include "graph/factory.h"
#include "ops/kernels/matmul.h"
#include "ops/op_util.h"
#include "ops/reduce.h"
#include "ops/shape_ops.h"

namespace tg {
namespace {

// Both operands of rank >= 2, same float dtype, no transposes left.
Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  const int64_t M = as[as.rank() - 2], K = as[as.rank() - 1];
  const int64_t K2 = bs[bs.rank() - 2], N = bs[bs.rank() - 1];
  TG_CHECK(K == K2, "matmul", "shapes {} and {} cannot be multiplied (inner dimensions {} and {} differ)", as, bs, K, K2);
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
  dispatch_float(a.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    for (int64_t i = 0; i < nb; ++i)
      kernels::gemm(pa + aoff[i] * M * K, pb + boff[i] * K * N, po + i * M * N, M, N, K);
  });
  return record("matmul", out, {a, b}, [a, b](const Tensor& g, const Node& n) {
    Tensor ga, gb;
    if (n.needs(0)) ga = sum_to(matmul(g, b, false, true), a.shape());
    if (n.needs(1)) gb = sum_to(matmul(a, g, true, false), b.shape());
    return Grads{ga, gb};
  });
}

}  // namespace

Tensor matmul(const Tensor& a0, const Tensor& b0, bool transpose_a, bool transpose_b) {
  detail::check_float(a0, "matmul");
  detail::check_float(b0, "matmul");
  TG_CHECK(a0.dim() >= 1 && b0.dim() >= 1, "matmul", "both operands need at least one dimension, got shapes {} and {}",
           a0.shape(), b0.shape());
  TG_CHECK(a0.dtype() == b0.dtype(), "matmul", "operands have different dtypes ({} and {})", a0.dtype(), b0.dtype());
  TG_CHECK(!(transpose_a && a0.dim() < 2) && !(transpose_b && b0.dim() < 2), "matmul",
           "a transpose flag needs a operand of rank >= 2, got shapes {} and {}", a0.shape(), b0.shape());
  Tensor a = transpose_a ? transpose(a0, -1, -2) : a0;
  Tensor b = transpose_b ? transpose(b0, -1, -2) : b0;
  if (a.dim() == 1 && b.dim() == 1) {
    TG_CHECK(a.numel() == b.numel(), "matmul", "vectors of lengths {} and {} differ", a.numel(), b.numel());
    return reshape(matmul_nd(reshape(a, {1, a.numel()}), reshape(b, {b.numel(), 1})), Shape{});
  }
  if (a.dim() == 1) return squeeze(matmul_nd(unsqueeze(a, 0), b), -2);
  if (b.dim() == 1) return squeeze(matmul_nd(a, unsqueeze(b, -1)), -1);
  return matmul_nd(a, b);
}

}  // namespace tg
