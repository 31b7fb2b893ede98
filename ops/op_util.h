#pragma once
// Helpers shared by the op families (not part of the public API).
#include "../graph/node.h"
#include "broadcast.h"
#include "kernels/elementwise.h"

namespace tg::detail {

inline void check_defined(const Tensor& t, const char* op, const char* what = "input") {
  TG_CHECK(t.defined(), op, "{} is an undefined tensor", what);
}
// bfloat16 passes unless !bf16_ok (a composite op whose inner ops would refuse it under their names).
inline void check_float(const Tensor& t, const char* op, bool bf16_ok = true) {
  check_defined(t, op);
  TG_CHECK(is_floating(t.dtype()), op, "expected a float32 or float64 tensor, got {} of shape {}", t.dtype(),
           t.shape());
  if (!bf16_ok && t.dtype() == kBFloat16) fail_unsupported_dtype(op, t.dtype());
}
inline void check_index(const Tensor& t, const char* op) {
  check_defined(t, op, "index");
  TG_CHECK(t.dtype() == kInt64, op, "indices must be int64, got {} of shape {}", t.dtype(), t.shape());
}

// Applies a unary functor (made per element type by make(T{})) to a float tensor.
template <class Make>
Tensor unary_forward(const char* op, const Tensor& x, Make make) {
  check_float(x, op);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    kernels::unary(x.data<T>(), out.data<T>(), x.numel(), make(tag));
  });
  return out;
}

// Applies a binary functor with broadcasting; a and b must already share a float dtype.
template <class F>
Tensor binary_forward(const char* op, const Tensor& a, const Tensor& b, F f) {
  Shape shape = a.shape() == b.shape() ? a.shape() : broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = Tensor::empty(shape, a.dtype());
  dispatch_float(a.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    const int64_t bytes = (a.numel() + b.numel() + out.numel()) * static_cast<int64_t>(sizeof(T));
    const bool stream = bytes > kernels::stream_threshold_bytes();
    if (a.shape() == b.shape()) {
      kernels::parallel_for(0, out.numel(), kernels::kParallelGrain, [&](int64_t s, int64_t e) {
        if (stream) kernels::binary_run<true>(pa + s, 1, pb + s, 1, po + s, e - s, f);
        else kernels::binary_run<false>(pa + s, 1, pb + s, 1, po + s, e - s, f);
      });
      return;
    }
    BroadcastPlan p = make_broadcast_plan(shape, {a.shape(), b.shape()});
    for_each_run(p, [&](int64_t o, const int64_t* in, int64_t n) {
      if (stream) kernels::binary_run<true>(pa + in[0], p.inner_stride[0], pb + in[1], p.inner_stride[1], po + o, n, f);
      else kernels::binary_run<false>(pa + in[0], p.inner_stride[0], pb + in[1], p.inner_stride[1], po + o, n, f);
    });
  });
  return out;
}

}  // namespace tg::detail
