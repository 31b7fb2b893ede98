#pragma once
// Helpers shared by the op families (not part of the public API).
#include "../graph/node.h"
#include "broadcast.h"
#include "cuda/elementwise.h"
#include "kernels/elementwise.h"

namespace tg::detail {

inline void check_defined(const Tensor& t, const char* op, const char* what = "input") {
  TG_CHECK(t.defined(), op, "{} is an undefined tensor", what);
}
// Ops never copy between devices: tensors on two devices are refused, naming both.
[[noreturn]] void fail_two_devices(const char* op, const char* a_name, Device a, const char* b_name, Device b);
inline void check_same_device(const char* op, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) {
  const Device da = a.device(), db = b.device();
  if (!(da == db)) [[unlikely]] fail_two_devices(op, a_name, da, b_name, db);
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

// ---- The GPU side of the op families ------------------------------------------------------------
inline cuda_ops::Scalar gpu_scalar(DType d) {
  static_assert(static_cast<int>(cuda_ops::Scalar::kF32) == static_cast<int>(DType::kFloat32) &&
                static_cast<int>(cuda_ops::Scalar::kF64) == static_cast<int>(DType::kFloat64) &&
                static_cast<int>(cuda_ops::Scalar::kI64) == static_cast<int>(DType::kInt64) &&
                static_cast<int>(cuda_ops::Scalar::kBool) == static_cast<int>(DType::kBool) &&
                static_cast<int>(cuda_ops::Scalar::kBF16) == static_cast<int>(DType::kBFloat16));
  return static_cast<cuda_ops::Scalar>(d);
}
// A device pointer with the view's offset (the GPU kernels' inputs and outputs).
inline void* gpu_ptr(const Tensor& t) {
  return static_cast<char*>(t.impl().storage->data()) + t.impl().offset * static_cast<int64_t>(dtype_size(t.dtype()));
}
// The broadcast plan of a GPU elementwise kernel (ops/cuda/strided.h).
cuda_ops::StridedPlan gpu_plan(const char* op, const Shape& out, std::initializer_list<Shape> inputs);

// Applies a unary op to a float tensor: on the CPU the functor made per element type by
// make(T{}), on a GPU math::unary's code `gpu` with parameters a, b.
template <class Make>
Tensor unary_forward(const char* op, const Tensor& x, Make make, cuda_ops::math::Unary gpu, double a = 0, double b = 0) {
  check_float(x, op);
  if (x.is_cuda()) {
    Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
    TG_CHECK(x.dtype() != kBFloat16, op, "bfloat16 GPU tensors go through float32 (an op's caller converts)");
    cuda_ops::unary({x.device().index, op, gpu, gpu_scalar(x.dtype()), gpu_ptr(x), gpu_ptr(out), x.numel(), a, b});
    return out;
  }
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    kernels::unary(x.data<T>(), out.data<T>(), x.numel(), make(tag));
  });
  return out;
}

// Applies a binary functor with broadcasting (math::binary's code `gpu` on a GPU); a and b must
// already share a float dtype and a device.
template <class F>
Tensor binary_forward(const char* op, const Tensor& a, const Tensor& b, F f, cuda_ops::math::Binary gpu) {
  Shape shape = a.shape() == b.shape() ? a.shape() : broadcast_shapes(a.shape(), b.shape(), op);
  if (a.is_cuda()) {
    dispatch_float(a.dtype(), op, [](auto) {});  // float32/float64, as on the CPU (the kernel has no bfloat16 form)
    Tensor out = Tensor::empty(shape, a.dtype(), a.device());
    cuda_ops::BinaryArgs args;
    args.device = a.device().index;
    args.op = op;
    args.f = gpu;
    args.type = gpu_scalar(a.dtype());
    args.plan = gpu_plan(op, shape, {a.shape(), b.shape()});
    args.in[0] = gpu_ptr(a);
    args.in[1] = gpu_ptr(b);
    args.out = gpu_ptr(out);
    cuda_ops::binary(args);
    return out;
  }
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
