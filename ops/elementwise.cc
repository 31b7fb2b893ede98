// Elementwise ops: each op's shape rule, forward kernel and backward formula side by side.
// Backward formulas are written with public ops, so they are differentiable themselves.
#include "ops/elementwise.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "graph/cuda/runtime.h"
#include "graph/device_memory_internal.h"
#include "graph/factory.h"
#include "ops/kernels/bf16.h"
#include "ops/op_util.h"
#include "ops/reduce.h"

namespace tg {
using detail::binary_forward;
using detail::check_float;
using detail::unary_forward;
namespace k = kernels;

namespace {

// Brings a and b to one float dtype: float64 wins over float32, float32 over bfloat16; int64/bool
// convert to the other operand's float dtype. Two non-float operands are an error naming op.
std::pair<Tensor, Tensor> promote(const Tensor& a, const Tensor& b, const char* op) {
  detail::check_defined(a, op, "first input");
  detail::check_defined(b, op, "second input");
  detail::check_same_device(op, a, "first input", b, "second input");
  if (a.dtype() == b.dtype()) {
    TG_CHECK(is_floating(a.dtype()), op, "expected float32 or float64 tensors, got {} of shape {} and {} of shape {}",
             a.dtype(), a.shape(), b.dtype(), b.shape());
    return {a, b};
  }
  TG_CHECK(is_floating(a.dtype()) || is_floating(b.dtype()), op,
           "expected float32 or float64 tensors, got {} of shape {} and {} of shape {}", a.dtype(), a.shape(),
           b.dtype(), b.shape());
  DType d = (a.dtype() == kFloat64 || b.dtype() == kFloat64)   ? kFloat64
            : (a.dtype() == kFloat32 || b.dtype() == kFloat32) ? kFloat32
                                                               : kBFloat16;
  return {to(a, d), to(b, d)};
}

// bfloat16 arithmetic is computed in float32 and rounded once, as PyTorch does; the two casts
// carry the gradient (which reaches a and b as bfloat16).
Tensor via_float32(Tensor (*op)(const Tensor&, const Tensor&), const Tensor& a, const Tensor& b) {
  return to(op(to(a, kFloat32), to(b, kFloat32)), kBFloat16);
}

Tensor affine(const char* op, const Tensor& x, double alpha, double beta) {
  if (x.defined() && x.dtype() == kBFloat16) return to(affine(op, to(x, kFloat32), alpha, beta), kBFloat16);
  Tensor out = unary_forward(op, x, [&](auto t) {
    using T = decltype(t);
    return k::Affine<T>{static_cast<T>(alpha), static_cast<T>(beta)};
  }, cuda_ops::math::Unary::kAffine, alpha, beta);
  return record(op, out, {x}, [alpha](const Tensor& g, const Node&) {
    return Grads{alpha == 1.0 ? g : mul(g, alpha)};
  });
}

// Masks (bool, or anything convertible) to the float dtype of `like`.
Tensor as_float_mask(const Tensor& m, const Tensor& like) { return to(m, like.dtype()); }

}  // namespace

// ---- Binary --------------------------------------------------------------------------------

Tensor add(const Tensor& a0, const Tensor& b0) {
  auto [a, b] = promote(a0, b0, "add");
  if (a.dtype() == kBFloat16) return via_float32(add, a, b);
  Tensor out = binary_forward("add", a, b, k::Add{}, cuda_ops::math::Binary::kAdd);
  return record("add", out, {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g, const Node& n) {
    return Grads{n.needs(0) ? sum_to(g, sa) : Tensor(), n.needs(1) ? sum_to(g, sb) : Tensor()};
  });
}

Tensor sub(const Tensor& a0, const Tensor& b0) {
  auto [a, b] = promote(a0, b0, "sub");
  if (a.dtype() == kBFloat16) return via_float32(sub, a, b);
  Tensor out = binary_forward("sub", a, b, k::Sub{}, cuda_ops::math::Binary::kSub);
  return record("sub", out, {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g, const Node& n) {
    return Grads{n.needs(0) ? sum_to(g, sa) : Tensor(), n.needs(1) ? sum_to(neg(g), sb) : Tensor()};
  });
}

Tensor mul(const Tensor& a0, const Tensor& b0) {
  auto [a, b] = promote(a0, b0, "mul");
  if (a.dtype() == kBFloat16) return via_float32(mul, a, b);
  Tensor out = binary_forward("mul", a, b, k::Mul{}, cuda_ops::math::Binary::kMul);
  return record("mul", out, {a, b}, [a = a, b = b](const Tensor& g, const Node& n) {
    return Grads{n.needs(0) ? sum_to(mul(g, b), a.shape()) : Tensor(),
                 n.needs(1) ? sum_to(mul(g, a), b.shape()) : Tensor()};
  });
}

Tensor div(const Tensor& a0, const Tensor& b0) {
  auto [a, b] = promote(a0, b0, "div");
  if (a.dtype() == kBFloat16) return via_float32(div, a, b);
  Tensor out = binary_forward("div", a, b, k::Div{}, cuda_ops::math::Binary::kDiv);
  return record("div", out, {a, b}, [a = a, b = b](const Tensor& g, const Node& n) {
    Tensor gb;  // d(a/b)/db = -a / b^2
    if (n.needs(1)) gb = sum_to(neg(div(mul(g, a), mul(b, b))), b.shape());
    return Grads{n.needs(0) ? sum_to(div(g, b), a.shape()) : Tensor(), gb};
  });
}

Tensor pow(const Tensor& a0, const Tensor& b0) {
  auto [a, b] = promote(a0, b0, "pow");
  Tensor out = binary_forward("pow", a, b, k::Pow{}, cuda_ops::math::Binary::kPow);
  return record("pow", out, {a, b}, [a = a, b = b](const Tensor& g, const Node& n) {
    Tensor ga, gb;
    if (n.needs(0)) ga = sum_to(mul(g, mul(b, pow(a, sub(b, 1.0)))), a.shape());
    if (n.needs(1)) gb = sum_to(mul(g, mul(n.output(), log(a))), b.shape());
    return Grads{ga, gb};
  }, /*save_output=*/true);
}

namespace {
// Gradient of maximum/minimum: to a where a wins, to b where b wins, half each on ties.
Tensor extremum(const char* op, const Tensor& a0, const Tensor& b0, bool is_max) {
  auto [a, b] = promote(a0, b0, op);
  Tensor out = is_max ? binary_forward(op, a, b, k::Max{}, cuda_ops::math::Binary::kMax)
                      : binary_forward(op, a, b, k::Min{}, cuda_ops::math::Binary::kMin);
  return record(op, out, {a, b}, [a = a, b = b, is_max](const Tensor& g, const Node& n) {
    Tensor wins = as_float_mask(is_max ? gt(a, b) : lt(a, b), g);
    Tensor ties = as_float_mask(eq(a, b), g);
    Tensor wa = add(wins, mul(ties, 0.5));  // share of a
    Tensor ga, gb;
    if (n.needs(0)) ga = sum_to(mul(g, wa), a.shape());
    if (n.needs(1)) gb = sum_to(mul(g, sub(1.0, wa)), b.shape());
    return Grads{ga, gb};
  });
}
}  // namespace
Tensor maximum(const Tensor& a, const Tensor& b) { return extremum("maximum", a, b, true); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum("minimum", a, b, false); }

// ---- Tensor-scalar -------------------------------------------------------------------------

Tensor add(const Tensor& a, double b) { return affine("add", a, 1.0, b); }
Tensor sub(const Tensor& a, double b) { return affine("sub", a, 1.0, -b); }
Tensor sub(double a, const Tensor& b) { return affine("sub", b, -1.0, a); }
Tensor mul(const Tensor& a, double b) { return affine("mul", a, b, 0.0); }
Tensor div(const Tensor& a, double b) { return affine("div", a, 1.0 / b, 0.0); }
Tensor div(double a, const Tensor& b) { return a == 1.0 ? reciprocal(b) : mul(reciprocal(b), a); }
Tensor neg(const Tensor& x) { return affine("neg", x, -1.0, 0.0); }

Tensor pow(const Tensor& a, double p) {
  Tensor out = unary_forward("pow", a, [&](auto t) { return k::PowScalar<decltype(t)>{static_cast<decltype(t)>(p)}; },
                             cuda_ops::math::Unary::kPowScalar, p);
  return record("pow", out, {a}, [a, p](const Tensor& g, const Node&) {
    if (p == 0.0) return Grads{zeros_like(g)};
    if (p == 1.0) return Grads{g};
    if (p == 2.0) return Grads{mul(g, mul(a, 2.0))};
    return Grads{mul(g, mul(pow(a, p - 1.0), p))};
  });
}

Tensor clamp(const Tensor& a, double lo, double hi) {
  TG_CHECK(!(lo > hi), "clamp", "lower bound {} exceeds upper bound {}", lo, hi);
  Tensor out = unary_forward("clamp", a, [&](auto t) {
    using T = decltype(t);
    return k::Clamp<T>{static_cast<T>(lo), static_cast<T>(hi)};
  }, cuda_ops::math::Unary::kClamp, lo, hi);
  return record("clamp", out, {a}, [a, lo, hi](const Tensor& g, const Node&) {
    // The gradient passes where lo <= a <= hi (as torch.clamp).
    Tensor inside = logical_and(ge(a, lo), le(a, hi));
    return Grads{where(inside, g, 0.0)};
  });
}
Tensor maximum(const Tensor& a, double b) { return clamp(a, b, std::numeric_limits<double>::infinity()); }
Tensor minimum(const Tensor& a, double b) { return clamp(a, -std::numeric_limits<double>::infinity(), b); }

// ---- Unary ---------------------------------------------------------------------------------

#define TG_UNARY(name, Functor) unary_forward(#name, x, [](auto) { return k::Functor{}; }, cuda_ops::math::Unary::k##Functor)

Tensor exp(const Tensor& x) {
  return record("exp", TG_UNARY(exp, Exp), {x}, [](const Tensor& g, const Node& n) {
    return Grads{mul(g, n.output())};
  }, true);
}
Tensor log(const Tensor& x) {
  return record("log", TG_UNARY(log, Log), {x}, [x](const Tensor& g, const Node&) { return Grads{div(g, x)}; });
}
Tensor sqrt(const Tensor& x) {
  return record("sqrt", TG_UNARY(sqrt, Sqrt), {x}, [](const Tensor& g, const Node& n) {
    return Grads{div(g, mul(n.output(), 2.0))};
  }, true);
}
Tensor rsqrt(const Tensor& x) {
  return record("rsqrt", TG_UNARY(rsqrt, Rsqrt), {x}, [](const Tensor& g, const Node& n) {
    return Grads{mul(g, mul(pow(n.output(), 3.0), -0.5))};  // d x^-1/2 = -1/2 x^-3/2
  }, true);
}
Tensor abs(const Tensor& x) {
  return record("abs", TG_UNARY(abs, Abs), {x}, [x](const Tensor& g, const Node&) { return Grads{mul(g, sign(x))}; });
}
Tensor sign(const Tensor& x) { return TG_UNARY(sign, Sign); }
Tensor square(const Tensor& x) {
  return record("square", TG_UNARY(square, Square), {x}, [x](const Tensor& g, const Node&) {
    return Grads{mul(g, mul(x, 2.0))};
  });
}
Tensor reciprocal(const Tensor& x) {
  return record("reciprocal", TG_UNARY(reciprocal, Reciprocal), {x}, [](const Tensor& g, const Node& n) {
    Tensor y = n.output();
    return Grads{neg(mul(g, mul(y, y)))};
  }, true);
}
Tensor tanh(const Tensor& x) {
  return record("tanh", TG_UNARY(tanh, Tanh), {x}, [](const Tensor& g, const Node& n) {
    Tensor y = n.output();
    return Grads{mul(g, sub(1.0, mul(y, y)))};
  }, true);
}
Tensor sigmoid(const Tensor& x) {
  return record("sigmoid", TG_UNARY(sigmoid, Sigmoid), {x}, [](const Tensor& g, const Node& n) {
    Tensor y = n.output();
    return Grads{mul(g, mul(y, sub(1.0, y)))};
  }, true);
}
Tensor relu(const Tensor& x) {
  return record("relu", TG_UNARY(relu, Relu), {x}, [x](const Tensor& g, const Node&) {
    return Grads{where(gt(x, 0.0), g, 0.0)};
  });
}
Tensor silu(const Tensor& x) {
  return record("silu", TG_UNARY(silu, Silu), {x}, [x](const Tensor& g, const Node&) {
    Tensor s = sigmoid(x);  // d/dx x s(x) = s (1 + x (1 - s))
    return Grads{mul(g, mul(s, add(mul(x, sub(1.0, s)), 1.0)))};
  });
}
Tensor erf(const Tensor& x) {
  return record("erf", TG_UNARY(erf, Erf), {x}, [x](const Tensor& g, const Node&) {
    return Grads{mul(g, mul(exp(neg(square(x))), M_2_SQRTPI))};
  });
}
Tensor sin(const Tensor& x) {
  return record("sin", TG_UNARY(sin, Sin), {x}, [x](const Tensor& g, const Node&) { return Grads{mul(g, cos(x))}; });
}
Tensor cos(const Tensor& x) {
  return record("cos", TG_UNARY(cos, Cos), {x}, [x](const Tensor& g, const Node&) { return Grads{neg(mul(g, sin(x)))}; });
}
// The backward is a fused kernel; when the backward is itself recorded (create_graph), the same
// derivative from public ops, so that it can be differentiated again.
Tensor gelu(const Tensor& x, GeluApprox approx) {
  const bool tanh_form = approx == GeluApprox::kTanh;
  Tensor out = tanh_form ? TG_UNARY(gelu, GeluTanh) : TG_UNARY(gelu, GeluErf);
  return record("gelu", out, {x}, [x, tanh_form](const Tensor& g0, const Node&) {
    Tensor g = to(g0, x.dtype());
    if (!grad_enabled()) {
      return Grads{tanh_form ? binary_forward("gelu", g, x, k::GeluTanhGrad{}, cuda_ops::math::Binary::kGeluTanhGrad)
                             : binary_forward("gelu", g, x, k::GeluErfGrad{}, cuda_ops::math::Binary::kGeluErfGrad)};
    }
    return Grads{grad_of_gelu(g, x, tanh_form ? GeluApprox::kTanh : GeluApprox::kNone)};
  });
}

Tensor grad_of_gelu(const Tensor& g, const Tensor& x, GeluApprox approx) {
  if (approx == GeluApprox::kTanh) {
    const double kk = 0.7978845608028654, c = 0.044715;
    Tensor t = tanh(mul(add(x, mul(pow(x, 3.0), c)), kk));
    Tensor dt = mul(sub(1.0, square(t)), mul(add(mul(square(x), 3.0 * c), 1.0), kk));
    return mul(g, add(mul(add(t, 1.0), 0.5), mul(mul(x, dt), 0.5)));
  }
  Tensor cdf = mul(add(erf(mul(x, M_SQRT1_2)), 1.0), 0.5);
  Tensor pdf = mul(exp(mul(square(x), -0.5)), 0.3989422804014327);  // 1/sqrt(2 pi)
  return mul(g, add(cdf, mul(x, pdf)));
}
#undef TG_UNARY

// ---- Copies and casts ----------------------------------------------------------------------

Tensor clone(const Tensor& x) {
  detail::check_defined(x, "clone");
  Tensor out = x.is_cuda() ? detail::copy_to_device(x, x.device(), "clone") : Tensor::empty(x.shape(), x.dtype());
  if (!x.is_cuda()) std::memcpy(out.raw_data(), x.raw_data(), static_cast<size_t>(x.numel()) * dtype_size(x.dtype()));
  return record("clone", out, {x}, [](const Tensor& g, const Node&) { return Grads{g}; });
}

Tensor to(const Tensor& x, Device device) {
  detail::check_defined(x, "to");
  if (x.device() == device) return x;
  Tensor out = detail::copy_to_device(x, device, "to");
  if (!is_floating(x.dtype())) return out;
  return record("to", out, {x}, [from = x.device()](const Tensor& g, const Node&) { return Grads{to(g, from)}; });
}

namespace {
template <class From, class To>
void convert(const From* src, To* dst, int64_t n) {
  k::parallel_for(0, n, k::kParallelGrain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      if constexpr (std::is_same_v<To, bool>) dst[i] = src[i] != From(0);
      else dst[i] = static_cast<To>(src[i]);
    }
  });
}
template <class F>
void dispatch_all(DType d, F&& f) {
  switch (d) {
    case DType::kFloat32: f(float{}); break;
    case DType::kFloat64: f(double{}); break;
    case DType::kInt64: f(int64_t{}); break;
    case DType::kBool: f(bool{}); break;
    case DType::kBFloat16: detail::fail("to", "bfloat16 goes through float32");  // handled by convert_into
  }
}

// The bits of a bfloat16 tensor, for the kernels (which know no tg::bfloat16).
uint16_t* bf16_bits(const Tensor& t) { return reinterpret_cast<uint16_t*>(t.data<bfloat16>()); }

// x's values converted into out (same shape), any dtypes; bfloat16 goes through float32.
void convert_into(const Tensor& x, const Tensor& out) {
  const int64_t n = x.numel();
  if (x.is_cuda()) {  // one kernel for any pair of dtypes, with the CPU's rounding
    cuda_ops::CastArgs args;
    args.device = x.device().index;
    args.op = "to";
    args.from = detail::gpu_scalar(x.dtype());
    args.to = detail::gpu_scalar(out.dtype());
    args.x = detail::gpu_ptr(x);
    args.out = detail::gpu_ptr(out);
    args.n = n;
    cuda_ops::cast(args);
    return;
  }
  if (x.dtype() == kBFloat16) {
    Tensor f = out.dtype() == kFloat32 ? out : Tensor::empty(x.shape(), kFloat32);
    k::bf16_to_float(bf16_bits(x), f.data<float>(), n);
    if (!f.same(out)) convert_into(f, out);
  } else if (out.dtype() == kBFloat16) {
    Tensor f = x.dtype() == kFloat32 ? x : Tensor::empty(x.shape(), kFloat32);
    if (!f.same(x)) convert_into(x, f);
    k::float_to_bf16(f.data<float>(), bf16_bits(out), n);
  } else {
    dispatch_all(x.dtype(), [&](auto from) {
      dispatch_all(out.dtype(), [&](auto too) { convert(x.data<decltype(from)>(), out.data<decltype(too)>(), n); });
    });
  }
}
}  // namespace

Tensor to(const Tensor& x, DType dtype) {
  detail::check_defined(x, "to");
  if (x.dtype() == dtype) return x;
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  convert_into(x, out);
  if (!is_floating(dtype) || !is_floating(x.dtype())) return out;
  return record("to", out, {x}, [from = x.dtype()](const Tensor& g, const Node&) { return Grads{to(g, from)}; });
}

// ---- In-place updates ----------------------------------------------------------------------

namespace {
void check_inplace(const Tensor& self, const char* op) {
  TG_CHECK(!(self.requires_grad() && grad_enabled()), op, "in-place update of a tensor that requires grad (shape {}) "
           "while grad mode is on; wrap the update in tg::NoGradGuard", self.shape());
  TG_CHECK(self.is_leaf(), op, "in-place update of a tensor produced by '{}' would corrupt its graph",
           self.grad_fn_name());
  self.impl().storage->bump_version();  // values derived from the data (autocast's packed weights) are stale
}
}  // namespace

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  check_inplace(*this, "add_");
  detail::check_float(*this, "add_");
  detail::check_defined(other, "add_", "other");
  TG_CHECK(broadcast_shapes(shape(), other.shape(), "add_") == shape(), "add_",
           "other of shape {} does not broadcast to this tensor's shape {}", other.shape(), shape());
  detail::check_same_device("add_", *this, "tensor", other, "other");
  Tensor o = tg::to(other.detach(), dtype());
  if (is_cuda()) {  // self = self + alpha * other, in place (each output element reads its own self)
    dispatch_float(dtype(), "add_", [](auto) {});  // float32/float64, as on the CPU
    if (alpha != 1.0) o = tg::mul(o, alpha);
    cuda_ops::BinaryArgs args;
    args.device = device().index;
    args.op = "add_";
    args.f = cuda_ops::math::Binary::kAdd;
    args.type = detail::gpu_scalar(dtype());
    args.plan = detail::gpu_plan("add_", shape(), {shape(), o.shape()});
    args.in[0] = detail::gpu_ptr(*this);
    args.in[1] = detail::gpu_ptr(o);
    args.out = detail::gpu_ptr(*this);
    cuda_ops::binary(args);
    return *this;
  }
  BroadcastPlan p = make_broadcast_plan(shape(), {shape(), o.shape()});
  dispatch_float(dtype(), "add_", [&](auto tag) {
    using T = decltype(tag);
    T* self = data<T>();
    const T* src = o.data<T>();
    const T a = static_cast<T>(alpha);
    auto f = [a](auto x, auto y) { return x + decltype(x)(a) * y; };  // self += a * other, vectorized
    if (o.shape() == shape()) {  // split over the threads (the plan's one run would be serial)
      k::parallel_for(0, numel(), k::kParallelGrain,
                      [&](int64_t s, int64_t e) { k::binary_run(self + s, 1, src + s, 1, self + s, e - s, f); });
      return;
    }
    for_each_run(p, [&](int64_t off, const int64_t* in, int64_t n) {
      k::binary_run(self + in[0], 1, src + in[1], p.inner_stride[1], self + off, n, f);
    });
  });
  return *this;
}

Tensor& Tensor::mul_(double s) {
  check_inplace(*this, "mul_");
  detail::check_float(*this, "mul_");
  if (is_cuda()) {
    dispatch_float(dtype(), "mul_", [](auto) {});  // float32/float64, as on the CPU
    cuda_ops::unary({device().index, "mul_", cuda_ops::math::Unary::kAffine, detail::gpu_scalar(dtype()),
                     detail::gpu_ptr(*this), detail::gpu_ptr(*this), numel(), s, 0.0});
    return *this;
  }
  dispatch_float(dtype(), "mul_", [&](auto tag) {
    using T = decltype(tag);
    k::unary(data<T>(), data<T>(), numel(), k::Affine<T>{static_cast<T>(s), T(0)});
  });
  return *this;
}

Tensor& Tensor::fill_(double v) {
  check_inplace(*this, "fill_");
  tg::fill_(*this, v);
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace(*this, "copy_");
  detail::check_defined(src, "copy_", "source");
  TG_CHECK(src.shape() == shape(), "copy_", "source shape {} differs from this tensor's shape {}", src.shape(), shape());
  detail::check_same_device("copy_", *this, "tensor", src, "source");
  Tensor s = tg::to(src.detach(), dtype());
  if (is_cuda()) {
    cuda_rt::copy_on_device(device().index, detail::gpu_ptr(*this), detail::gpu_ptr(s),
                            static_cast<size_t>(numel()) * dtype_size(dtype()), "copy_");
    return *this;
  }
  std::memcpy(raw_data(), s.raw_data(), static_cast<size_t>(numel()) * dtype_size(dtype()));
  return *this;
}

// ---- Comparisons and masks -----------------------------------------------------------------

namespace {
template <class Cmp>
Tensor compare(const char* op, const Tensor& a0, const Tensor& b0, Cmp cmp, cuda_ops::math::Compare gpu) {
  detail::check_defined(a0, op, "first input");
  detail::check_defined(b0, op, "second input");
  detail::check_same_device(op, a0, "first input", b0, "second input");
  NoGradGuard ng;  // comparisons have no gradient
  // bfloat16 values compare as the float32 values they are.
  Tensor a = a0.dtype() == kBFloat16 ? to(a0, kFloat32) : a0, b = b0.dtype() == kBFloat16 ? to(b0, kFloat32) : b0;
  if (a.dtype() != b.dtype()) {
    DType d = (a.dtype() == kFloat32 || b.dtype() == kFloat32) && a.dtype() != kFloat64 && b.dtype() != kFloat64
                  ? kFloat32 : kFloat64;
    a = to(a, d);
    b = to(b, d);
  }
  Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  if (a.is_cuda()) {
    Tensor out = Tensor::empty(shape, kBool, a.device());
    cuda_ops::CompareArgs args;
    args.device = a.device().index;
    args.op = op;
    args.f = gpu;
    args.type = detail::gpu_scalar(a.dtype());
    args.plan = detail::gpu_plan(op, shape, {a.shape(), b.shape()});
    args.in[0] = detail::gpu_ptr(a);
    args.in[1] = detail::gpu_ptr(b);
    args.out = static_cast<bool*>(detail::gpu_ptr(out));
    cuda_ops::compare(args);
    return out;
  }
  Tensor out = Tensor::empty(shape, kBool);
  BroadcastPlan p = make_broadcast_plan(shape, {a.shape(), b.shape()});
  bool* po = out.data<bool>();
  dispatch_all(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    for_each_run(p, [&](int64_t o, const int64_t* in, int64_t n) {
      const T* x = pa + in[0];
      const T* y = pb + in[1];
      int64_t sx = p.inner_stride[0], sy = p.inner_stride[1];
      for (int64_t i = 0; i < n; ++i) po[o + i] = cmp(x[i * sx], y[i * sy]);
    });
  });
  return out;
}
Tensor scalar_like(double v, const Tensor& like) {
  return full({}, v, is_floating(like.dtype()) ? like.dtype() : kFloat64, like.device());
}
}  // namespace

using Cmp = cuda_ops::math::Compare;  // the GPU's code of each comparison
Tensor eq(const Tensor& a, const Tensor& b) { return compare("eq", a, b, [](auto x, auto y) { return x == y; }, Cmp::kEq); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare("ne", a, b, [](auto x, auto y) { return x != y; }, Cmp::kNe); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare("lt", a, b, [](auto x, auto y) { return x < y; }, Cmp::kLt); }
Tensor le(const Tensor& a, const Tensor& b) { return compare("le", a, b, [](auto x, auto y) { return x <= y; }, Cmp::kLe); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare("gt", a, b, [](auto x, auto y) { return x > y; }, Cmp::kGt); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare("ge", a, b, [](auto x, auto y) { return x >= y; }, Cmp::kGe); }
Tensor eq(const Tensor& a, double b) { return eq(a, scalar_like(b, a)); }
Tensor ne(const Tensor& a, double b) { return ne(a, scalar_like(b, a)); }
Tensor lt(const Tensor& a, double b) { return lt(a, scalar_like(b, a)); }
Tensor le(const Tensor& a, double b) { return le(a, scalar_like(b, a)); }
Tensor gt(const Tensor& a, double b) { return gt(a, scalar_like(b, a)); }
Tensor ge(const Tensor& a, double b) { return ge(a, scalar_like(b, a)); }

namespace {
void check_mask(const Tensor& m, const char* op) {
  detail::check_defined(m, op, "mask");
  TG_CHECK(m.dtype() == kBool, op, "expected a bool mask, got {} of shape {} (compare with eq/gt/... or use to(kBool))",
           m.dtype(), m.shape());
}
}  // namespace

Tensor logical_not(const Tensor& m) {
  check_mask(m, "logical_not");
  if (m.is_cuda()) {
    Tensor out = Tensor::empty(m.shape(), kBool, m.device());
    cuda_ops::logical_not(m.device().index, "logical_not", static_cast<const bool*>(detail::gpu_ptr(m)),
                          static_cast<bool*>(detail::gpu_ptr(out)), m.numel());
    return out;
  }
  Tensor out = Tensor::empty(m.shape(), kBool);
  const bool* pm = m.data<bool>();
  bool* po = out.data<bool>();
  for (int64_t i = 0; i < m.numel(); ++i) po[i] = !pm[i];
  return out;
}
Tensor logical_and(const Tensor& a, const Tensor& b) {
  check_mask(a, "logical_and");
  check_mask(b, "logical_and");
  return compare("logical_and", a, b, [](bool x, bool y) { return x && y; }, Cmp::kAnd);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  check_mask(a, "logical_or");
  check_mask(b, "logical_or");
  return compare("logical_or", a, b, [](bool x, bool y) { return x || y; }, Cmp::kOr);
}

Tensor where(const Tensor& cond, const Tensor& a0, const Tensor& b0) {
  check_mask(cond, "where");
  const std::pair<Tensor, Tensor> ab = promote(a0, b0, "where");  // not a structured binding: the lambdas below use them
  const Tensor& a = ab.first;
  const Tensor& b = ab.second;
  detail::check_same_device("where", cond, "condition", a, "first input");
  Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  if (a.is_cuda()) {
    dispatch_float(a.dtype(), "where", [](auto) {});  // float32 and float64, as on the CPU
    cuda_ops::WhereArgs args;
    args.device = a.device().index;
    args.op = "where";
    args.type = detail::gpu_scalar(a.dtype());
    args.plan = detail::gpu_plan("where", shape, {cond.shape(), a.shape(), b.shape()});
    args.cond = static_cast<const bool*>(detail::gpu_ptr(cond));
    args.a = detail::gpu_ptr(a);
    args.b = detail::gpu_ptr(b);
    args.out = detail::gpu_ptr(out);
    cuda_ops::where(args);
  } else {
    BroadcastPlan p = make_broadcast_plan(shape, {cond.shape(), a.shape(), b.shape()});
    const bool* pc = cond.data<bool>();
    dispatch_float(a.dtype(), "where", [&](auto tag) {
      using T = decltype(tag);
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      T* po = out.data<T>();
      for_each_run(p, [&](int64_t o, const int64_t* in, int64_t n) {
        const bool* c = pc + in[0];
        const T* x = pa + in[1];
        const T* y = pb + in[2];
        int64_t sc = p.inner_stride[0], sx = p.inner_stride[1], sy = p.inner_stride[2];
        for (int64_t i = 0; i < n; ++i) po[o + i] = c[i * sc] ? x[i * sx] : y[i * sy];
      });
    });
  }
  return record("where", out, {a, b}, [cond, sa = a.shape(), sb = b.shape()](const Tensor& g, const Node& n) {
    Tensor ga, gb;
    if (n.needs(0)) ga = sum_to(where(cond, g, 0.0), sa);
    if (n.needs(1)) gb = sum_to(masked_fill(g, cond, 0.0), sb);
    return Grads{ga, gb};
  });
}

Tensor where(const Tensor& cond, const Tensor& a, double b) {
  check_float(a, "where");
  return where(cond, a, full({}, b, a.dtype(), a.device()));
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_float(x, "masked_fill");
  check_mask(mask, "masked_fill");
  Shape s = broadcast_shapes(x.shape(), mask.shape(), "masked_fill");
  TG_CHECK(s == x.shape(), "masked_fill", "mask of shape {} does not broadcast to the input's shape {}",
           mask.shape(), x.shape());
  detail::check_same_device("masked_fill", x, "input", mask, "mask");
  if (x.is_cuda()) {
    Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
    dispatch_float(x.dtype(), "masked_fill", [](auto) {});
    cuda_ops::WhereArgs args;
    args.device = x.device().index;
    args.op = "masked_fill";
    args.type = detail::gpu_scalar(x.dtype());
    args.plan = detail::gpu_plan("masked_fill", s, {mask.shape(), x.shape()});
    args.cond = static_cast<const bool*>(detail::gpu_ptr(mask));
    args.a = detail::gpu_ptr(x);
    args.scalar = true;
    args.value = value;
    args.out = detail::gpu_ptr(out);
    cuda_ops::where(args);
    return record("masked_fill", out, {x}, [mask](const Tensor& g, const Node&) {
      return Grads{masked_fill(g, mask, 0.0)};
    });
  }
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  BroadcastPlan p = make_broadcast_plan(s, {x.shape(), mask.shape()});
  const bool* pm = mask.data<bool>();
  dispatch_float(x.dtype(), "masked_fill", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const T v = static_cast<T>(value);
    for_each_run(p, [&](int64_t o, const int64_t* in, int64_t n) {
      const T* xx = px + in[0];
      const bool* m = pm + in[1];
      int64_t sx = p.inner_stride[0], sm = p.inner_stride[1];
      for (int64_t i = 0; i < n; ++i) po[o + i] = m[i * sm] ? v : xx[i * sx];
    });
  });
  return record("masked_fill", out, {x}, [mask](const Tensor& g, const Node&) {
    return Grads{masked_fill(g, mask, 0.0)};
  });
}

}  // namespace tg
