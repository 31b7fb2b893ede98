// nn ops: softmax family, losses, layer norm, dropout, attention masks.
#include "ops/nn.h"

#include <cmath>
#include <cstring>
#include <tuple>

#include "graph/capture_internal.h"
#include "graph/factory.h"
#include "graph/random.h"
#include "ops/autocast_internal.h"
#include "ops/elementwise.h"
#include "ops/cuda/nn.h"
#include "ops/dropout_internal.h"
#include "ops/kernels/dropout.h"
#include "ops/kernels/layer_norm.h"
#include "ops/kernels/sgns.h"
#include "ops/kernels/softmax.h"
#include "ops/matmul.h"
#include "ops/op_util.h"
#include "ops/reduce.h"
#include "ops/shape_ops.h"

namespace tg {
namespace k = kernels;

namespace {
// The GPU softmax kernels' arguments over [outer, D, inner]: x in, y out (forward), or y in and dx
// out (backward, with the gradient beside).
cuda_ops::SoftmaxArgs gpu_softmax_args(const char* op, bool log, const Tensor& in, const Tensor& out, int64_t outer,
                                       int64_t D, int64_t inner) {
  cuda_ops::SoftmaxArgs a;
  a.device = in.device().index;
  a.op = op;
  a.log = log;
  a.type = detail::gpu_scalar(in.dtype());
  a.x = detail::gpu_ptr(in);
  a.y = detail::gpu_ptr(out);
  a.outer = outer;
  a.D = D;
  a.inner = inner;
  return a;
}

template <bool kLog>
Tensor softmax_forward(const char* op, const Tensor& x, int64_t dim) {
  detail::check_float(x, op);
  TG_CHECK(x.numel() > 0, op, "expected a non-empty tensor, got shape {}", x.shape());
  int64_t outer = 1, D = 1, inner = 1;
  if (x.dim() > 0) {
    for (int64_t d = 0; d < dim; ++d) outer *= x.shape()[d];
    D = x.shape()[dim];
    for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.shape()[d];
  }
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.is_cuda()) {
    dispatch_float(x.dtype(), op, [](auto) {});
    cuda_ops::softmax(gpu_softmax_args(op, kLog, x, out, outer, D, inner));
    return out;
  }
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    k::softmax_rows<T, kLog>(x.data<T>(), out.data<T>(), outer, D, inner);
  });
  return out;
}

// The backward: a fused kernel, or (when the backward itself is recorded, for higher-order
// gradients) the same formula from public ops.
template <bool kLog>
Tensor softmax_backward(const Tensor& g, const Tensor& y, int64_t dim) {
  if (grad_enabled()) {
    if (kLog) return sub(g, mul(exp(y), sum(g, {dim}, true)));
    return mul(y, sub(g, sum(mul(g, y), {dim}, true)));
  }
  int64_t outer = 1, D = y.dim() ? y.shape()[dim] : 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= y.shape()[d];
  for (int64_t d = dim + 1; d < y.dim(); ++d) inner *= y.shape()[d];
  Tensor dx = Tensor::empty(y.shape(), y.dtype(), y.device());
  Tensor gc = to(g, y.dtype());
  if (y.is_cuda()) {
    detail::check_same_device(kLog ? "log_softmax" : "softmax", y, "output", gc, "gradient");
    cuda_ops::softmax_backward(gpu_softmax_args(kLog ? "log_softmax" : "softmax", kLog, y, dx, outer, D, inner),
                               detail::gpu_ptr(gc));
    return dx;
  }
  dispatch_float(y.dtype(), kLog ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    k::softmax_backward_rows<T, kLog>(y.data<T>(), gc.data<T>(), dx.data<T>(), outer, D, inner);
  });
  return dx;
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  detail::check_defined(x, "softmax");
  dim = normalize_axis(dim, x.dim(), "softmax");
  Tensor out = softmax_forward<false>("softmax", x, dim);
  return record("softmax", out, {x}, [dim](const Tensor& g, const Node& n) {
    return Grads{softmax_backward<false>(g, n.output(), dim)};  // y (g - sum(g y))
  }, true);
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  detail::check_defined(x, "log_softmax");
  dim = normalize_axis(dim, x.dim(), "log_softmax");
  Tensor out = softmax_forward<true>("log_softmax", x, dim);
  return record("log_softmax", out, {x}, [dim](const Tensor& g, const Node& n) {
    return Grads{softmax_backward<true>(g, n.output(), dim)};  // g - softmax(x) sum(g)
  }, true);
}

namespace {
Tensor reduce_loss(const Tensor& losses, Reduction r) {
  switch (r) {
    case Reduction::kSum: return sum(losses);
    case Reduction::kMean: return mean(losses);
    case Reduction::kNone: return losses;
  }
  return losses;
}

// Checks targets against log-probabilities [..., C]; returns (targets with ignored entries set
// to 0, the float mask of entries that count, how many count).
std::tuple<Tensor, Tensor, int64_t> prepare_targets(const char* op, const Tensor& lp, const Tensor& target,
                                                   int64_t ignore_index) {
  detail::check_float(lp, op);
  detail::check_index(target, op);
  TG_CHECK(lp.dim() >= 1, op, "expected inputs of shape [..., classes], got a scalar");
  Shape want(lp.shape().begin(), lp.shape().end() - 1);
  TG_CHECK(target.shape() == want, op, "target shape {} does not match input shape {} (expected {}: classes on the last axis)",
           target.shape(), lp.shape(), want);
  const int64_t C = lp.shape().back();
  detail::check_same_device(op, lp, "input", target, "target");
  if (lp.is_cuda()) {  // checked on the device: a bad target is reported at the next synchronization
    dispatch_float(lp.dtype(), op, [](auto) {});
    Tensor safe = Tensor::empty(target.shape(), kInt64, lp.device());
    Tensor valid = Tensor::empty(target.shape(), lp.dtype(), lp.device());
    cuda_ops::TargetArgs a;
    a.device = lp.device().index;
    a.op = op;
    a.type = detail::gpu_scalar(lp.dtype());
    a.target = static_cast<const int64_t*>(detail::gpu_ptr(target));
    a.safe = static_cast<int64_t*>(detail::gpu_ptr(safe));
    a.valid = detail::gpu_ptr(valid);
    a.n = target.numel();
    a.C = C;
    a.ignore_index = ignore_index;
    cuda_ops::class_targets(a);
    return {safe, valid, -1};  // the count stays on the device: sum(valid)
  }
  Tensor safe = Tensor::empty(target.shape(), kInt64);
  Tensor valid = Tensor::empty(target.shape(), lp.dtype());
  const int64_t* t = target.data<int64_t>();
  int64_t* s = safe.data<int64_t>();
  int64_t count = 0;
  dispatch_float(lp.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    T* v = valid.data<T>();
    for (int64_t i = 0; i < target.numel(); ++i) {
      bool ok = t[i] != ignore_index;
      TG_CHECK(!ok || (t[i] >= 0 && t[i] < C), op, "target {} at position {} is out of range for {} classes "
               "(and is not ignore_index {})", t[i], i, C, ignore_index);
      s[i] = ok ? t[i] : 0;
      v[i] = ok ? T(1) : T(0);
      count += ok;
    }
  });
  return {safe, valid, count};
}

// Mean divides by how many targets count: `count`, or where that is on the device (-1), sum(valid).
Tensor masked_reduce(const Tensor& losses, const Tensor& valid, int64_t count, Reduction r) {
  if (r != Reduction::kMean) return reduce_loss(losses, r);
  if (count < 0) return div(sum(losses), sum(valid));               // 0/0 = nan, as PyTorch
  return div(sum(losses), static_cast<double>(count));
}

// Class weights [C] for a loss over inputs [..., C]: checked, in the inputs' dtype.
Tensor check_class_weight(const char* op, const Tensor& weight, const Tensor& input) {
  detail::check_float(weight, op);
  const int64_t C = input.shape().back();
  TG_CHECK(weight.dim() == 1 && weight.size(0) == C, op, "weight of shape {} for input of shape {} (expected [{}]: one per class)",
           weight.shape(), input.shape(), C);
  if (!weight.is_cuda())  // on a GPU a non-finite weight gives a non-finite loss (no host read per call)
    for (double w : weight.to_vector<double>())
      TG_CHECK(std::isfinite(w), op, "weight holds {} (expected finite class weights)", w);
  return to(weight, input.dtype());
}

// Each counted target's weight w[target] (0 where ignored), shaped as the targets.
Tensor target_weights(const Tensor& weight, const Tensor& safe, const Tensor& valid) {
  return mul(reshape(index_select(weight, 0, reshape(safe, {-1})), safe.shape()), valid);
}

// Mean divides by the sum of the targets' weights (0/0 = nan, as PyTorch).
Tensor weighted_reduce(const Tensor& losses, const Tensor& weights, Reduction r) {
  if (r == Reduction::kMean) return div(sum(losses), sum(weights));
  return reduce_loss(losses, r);
}
}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, int64_t ignore_index, Reduction reduction,
                const Tensor& weight) {
  auto [safe, valid, count] = prepare_targets("nll_loss", log_probs, target, ignore_index);
  Tensor picked = squeeze(gather(log_probs, -1, unsqueeze(safe, -1)), -1);
  if (!weight.defined()) return masked_reduce(neg(mul(picked, valid)), valid, count, reduction);
  Tensor w = target_weights(check_class_weight("nll_loss", weight, log_probs), safe, valid);
  return weighted_reduce(neg(mul(picked, w)), w, reduction);
}

namespace {
// Per-row cross-entropy of logits [rows, C] with int64 targets [rows]: the fused op. Its backward
// is a fused kernel, or (when recorded, for higher-order gradients) the same formula from public
// ops: g (softmax(x) - (1 - eps) onehot(t) - eps / C), zero on ignored rows.
Tensor cross_entropy_rows(const Tensor& x, const Tensor& safe, const Tensor& target, const Tensor& valid,
                          double eps, int64_t ignore_index) {
  const int64_t rows = x.size(0), C = x.size(1);
  Tensor loss = Tensor::empty(Shape{rows}, x.dtype(), x.device()), lse = Tensor::empty(Shape{rows}, x.dtype(), x.device());
  // On a GPU: the kernel reads the safe targets and the valid mask (prepare_targets made them there).
  auto gpu_args = [](const Tensor& x, const Tensor& safe, const Tensor& valid, const Tensor& lse, double eps) {
    cuda_ops::CrossEntropyArgs a;
    a.device = x.device().index;
    a.op = "cross_entropy";
    a.type = detail::gpu_scalar(x.dtype());
    a.x = detail::gpu_ptr(x);
    a.target = static_cast<const int64_t*>(detail::gpu_ptr(safe));
    a.valid = detail::gpu_ptr(valid);
    a.lse = detail::gpu_ptr(lse);
    a.rows = x.size(0);
    a.C = x.size(1);
    a.eps = eps;
    return a;
  };
  if (x.is_cuda()) {
    cuda_ops::CrossEntropyArgs a = gpu_args(x, safe, valid, lse, eps);
    a.loss = detail::gpu_ptr(loss);
    cuda_ops::cross_entropy(a);
  } else {
    dispatch_float(x.dtype(), "cross_entropy", [&](auto tag) {
      using T = decltype(tag);
      k::cross_entropy_forward<T>(x.data<T>(), target.data<int64_t>(), loss.data<T>(), lse.data<T>(), rows, C,
                                  static_cast<T>(eps), ignore_index);
    });
  }
  return record("cross_entropy", loss, {x}, [x, safe, target, valid, lse, eps, ignore_index, gpu_args](const Tensor& g0, const Node&) {
    const int64_t C = x.size(1);
    Tensor g = to(g0, x.dtype());
    if (grad_enabled()) {
      Tensor onehot = to(eq(arange(C).to(x.device()), unsqueeze(safe, -1)), x.dtype());
      Tensor d = sub(sub(softmax(x, -1), mul(onehot, 1.0 - eps)), eps / static_cast<double>(C));
      return Grads{mul(d, unsqueeze(mul(g, valid), -1))};
    }
    Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    if (x.is_cuda()) {
      detail::check_same_device("cross_entropy", x, "logits", g, "gradient");
      cuda_ops::CrossEntropyArgs a = gpu_args(x, safe, valid, lse, eps);
      a.g = detail::gpu_ptr(g);
      a.dx = detail::gpu_ptr(dx);
      cuda_ops::cross_entropy_backward(a);
      return Grads{dx};
    }
    dispatch_float(x.dtype(), "cross_entropy", [&](auto tag) {
      using T = decltype(tag);
      k::cross_entropy_backward<T>(x.data<T>(), lse.data<T>(), target.data<int64_t>(), g.data<T>(), dx.data<T>(),
                                   x.size(0), C, static_cast<T>(eps), ignore_index);
    });
    return Grads{dx};
  });
}
}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& o) {
  TG_CHECK(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0, "cross_entropy",
           "label_smoothing must be in [0, 1], got {}", o.label_smoothing);
  detail::check_float(logits, "cross_entropy");
  TG_CHECK(logits.dim() >= 1 && logits.shape().back() > 0, "cross_entropy",
           "expected logits of shape [..., classes] with at least one class, got {}", logits.shape());
  auto [safe, valid, count] = prepare_targets("cross_entropy", logits, target, o.ignore_index);
  const int64_t C = logits.shape().back();
  if (o.weight.defined()) {
    // PyTorch's formula, from public ops (differentiable to any order):
    // (1 - eps) w[t] (-log p[t]) + eps / C * sum_c w[c] (-log p[c]), ignored targets 0.
    const Tensor cw = check_class_weight("cross_entropy", o.weight, logits);
    const Tensor lp = log_softmax(logits, -1);
    const Tensor w = target_weights(cw, safe, valid);
    Tensor losses = mul(neg(squeeze(gather(lp, -1, unsqueeze(safe, -1)), -1)), mul(w, 1.0 - o.label_smoothing));
    if (o.label_smoothing > 0) {
      const Tensor smooth = mul(neg(sum(mul(lp, cw), {-1})), valid);
      losses = add(losses, mul(smooth, o.label_smoothing / static_cast<double>(C)));
    }
    return weighted_reduce(losses, w, o.reduction);
  }
  Tensor rows = cross_entropy_rows(reshape(logits, {-1, C}), reshape(safe, {-1}), reshape(target, {-1}),
                                   reshape(valid, {-1}), o.label_smoothing, o.ignore_index);
  return masked_reduce(reshape(rows, target.shape()), valid, count, o.reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target0, Reduction reduction) {
  detail::check_float(logits, "binary_cross_entropy_with_logits");
  detail::check_defined(target0, "binary_cross_entropy_with_logits", "target");
  Tensor target = to(target0, logits.dtype());
  Shape s = broadcast_shapes(logits.shape(), target.shape(), "binary_cross_entropy_with_logits");
  TG_CHECK(s == logits.shape(), "binary_cross_entropy_with_logits", "target of shape {} does not broadcast to the "
           "logits' shape {}", target.shape(), logits.shape());
  Tensor out = detail::binary_forward("binary_cross_entropy_with_logits", logits, target, k::BceWithLogits{}, cuda_ops::math::Binary::kBceWithLogits);
  out = record("binary_cross_entropy_with_logits", out, {logits, target},
               [logits, target](const Tensor& g, const Node& n) {
                 Tensor gx, gy;  // d/dx = sigmoid(x) - y, d/dy = -x
                 if (n.needs(0)) gx = mul(g, sub(sigmoid(logits), target));
                 if (n.needs(1)) gy = sum_to(neg(mul(g, logits)), target.shape());
                 return Grads{gx, gy};
               });
  return reduce_loss(out, reduction);
}

// ---- Layer norm ----------------------------------------------------------------------------

namespace {
// Layer norm (with mean_t) or RMS norm (without) forward on a GPU: one kernel over rows of D
// (ops/cuda/nn.h); an undefined weight, bias or mean_t is a null pointer there.
// Under autocast (trained or not) the kernel also writes the output's bfloat16 rounding, kept as
// autocast's copy for the products that read it (Q, K, V; the FFN; the generator, and in decoding
// each token's): no cast there. The copy holds the bits a cast would write.
void gpu_norm(const char* op, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& out, const Tensor& mean_t,
              const Tensor& rstd_t, int64_t rows, int64_t D, double eps) {
  dispatch_float(x.dtype(), op, [](auto) {});
  auto ptr = [](const Tensor& t) { return t.defined() ? detail::gpu_ptr(t) : nullptr; };
  cuda_ops::NormArgs args;
  args.device = x.device().index;
  args.op = op;
  args.rms = !mean_t.defined();
  args.type = detail::gpu_scalar(x.dtype());
  args.x = ptr(x);
  args.w = ptr(w);
  args.b = ptr(b);
  args.y = ptr(out);
  args.mean = ptr(mean_t);
  args.rstd = ptr(rstd_t);
  args.rows = rows;
  args.D = D;
  args.eps = eps;
  Tensor copy;
  if (detail::autocast_on_gpu(x)) {
    copy = Tensor::empty(out.shape(), kBFloat16, out.device());
    args.y_bf16 = detail::gpu_ptr(copy);
  }
  cuda_ops::norm(args);
  if (copy.defined()) detail::keep_gpu_bf16_copy(out, copy);
}

// The same math as the fused kernel, written with public ops so it can be differentiated again
// (used only when a backward records a graph: create_graph).
Grads layer_norm_backward_composed(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& b, int64_t nd,
                                   double eps, const Node& n) {
  Axes axes;
  for (int64_t i = x.dim() - nd; i < x.dim(); ++i) axes.push_back(i);
  Tensor mu = mean(x, axes, true);
  Tensor xc = sub(x, mu);
  Tensor rs = rsqrt(add(mean(square(xc), axes, true), eps));
  Tensor xhat = mul(xc, rs);
  Tensor dxhat = w.defined() ? mul(g, w) : g;
  Tensor gx, gw, gb;
  if (n.needs(0))
    gx = mul(rs, sub(sub(dxhat, mean(dxhat, axes, true)), mul(xhat, mean(mul(dxhat, xhat), axes, true))));
  if (w.defined() && n.needs(1)) gw = sum_to(mul(g, xhat), w.shape());
  if (b.defined() && n.needs(2)) gb = sum_to(g, b.shape());
  return Grads{gx, gw, gb};
}
}  // namespace

namespace {
// Layer norm's (mean_t defined) or RMS norm's backward on a GPU from the saved statistics: the
// gradients asked for, each undefined where not (ops/cuda/nn.h; fixed-order sums).
Grads gpu_norm_backward(const char* op, const Tensor& x, const Tensor& g, const Tensor& w, const Tensor& mean_t,
                        const Tensor& rstd_t, const Shape& norm_shape, bool want_x, bool want_w, bool want_b) {
  const int64_t D = norm_shape.numel(), rows = D > 0 ? x.numel() / D : 0;
  detail::check_same_device(op, x, "input", g, "gradient");
  auto ptr = [](const Tensor& t) { return t.defined() ? detail::gpu_ptr(t) : nullptr; };
  Tensor gx = want_x ? Tensor::empty(x.shape(), x.dtype(), x.device()) : Tensor();
  Tensor gw = want_w ? Tensor::empty(norm_shape, x.dtype(), x.device()) : Tensor();
  Tensor gb = want_b ? Tensor::empty(norm_shape, x.dtype(), x.device()) : Tensor();
  Tensor partial = want_w || want_b ? Tensor::empty({cuda_ops::norm_backward_scratch(rows, D)}, x.dtype(), x.device()) : Tensor();
  cuda_ops::NormBackwardArgs a;
  a.device = x.device().index;
  a.op = op;
  a.rms = !mean_t.defined();
  a.type = detail::gpu_scalar(x.dtype());
  a.x = detail::gpu_ptr(x);
  a.g = detail::gpu_ptr(g);
  a.w = ptr(w);
  a.mean = ptr(mean_t);
  a.rstd = detail::gpu_ptr(rstd_t);
  a.gx = ptr(gx);
  a.gw = ptr(gw);
  a.gb = ptr(gb);
  a.partial = ptr(partial);
  a.rows = rows;
  a.D = D;
  cuda_ops::norm_backward(a);
  return Grads{gx, gw, gb};
}
}  // namespace

Tensor layer_norm(const Tensor& x, int64_t nd, const Tensor& weight, const Tensor& bias, double eps) {
  detail::check_float(x, "layer_norm");
  TG_CHECK(nd >= 1 && nd <= x.dim(), "layer_norm", "normalized_ndim {} must be between 1 and the input's rank {} (shape {})",
           nd, x.dim(), x.shape());
  Shape norm_shape(x.shape().end() - nd, x.shape().end());
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    TG_CHECK(p->shape() == norm_shape && p->dtype() == x.dtype(), "layer_norm",
             "{} has shape {} ({}), expected {} ({}) to match the input's last {} dims (input shape {})",
             p == &weight ? "weight" : "bias", p->shape(), p->dtype(), norm_shape, x.dtype(), nd, x.shape());
  }
  TG_CHECK(eps > 0, "layer_norm", "eps must be positive, got {}", eps);
  const int64_t D = norm_shape.numel();
  TG_CHECK(D > 0, "layer_norm", "cannot normalise over zero elements (shape {})", x.shape());
  const int64_t rows = x.numel() / D;
  for (const Tensor* p : {&weight, &bias}) {
    if (p->defined()) detail::check_same_device("layer_norm", x, "input", *p, p == &weight ? "weight" : "bias");
  }
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mean_t = Tensor::empty(Shape{rows}, x.dtype(), x.device()), rstd_t = Tensor::empty(Shape{rows}, x.dtype(), x.device());
  if (x.is_cuda()) {
    gpu_norm("layer_norm", x, weight, bias, out, mean_t, rstd_t, rows, D, eps);
  } else {
    dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
      using T = decltype(tag);
      k::layer_norm_forward<T>(out.data<T>(), mean_t.data<T>(), rstd_t.data<T>(), x.data<T>(),
                               weight.defined() ? weight.data<T>() : nullptr, bias.defined() ? bias.data<T>() : nullptr,
                               rows, D, static_cast<T>(eps));
    });
  }
  return record("layer_norm", out, {x, weight, bias},
                [x, weight, bias, nd, eps, mean_t, rstd_t, rows, D](const Tensor& g, const Node& n) {
    if (grad_enabled()) return layer_norm_backward_composed(g, x, weight, bias, nd, eps, n);  // recorded: public ops
    if (x.is_cuda()) {
      return gpu_norm_backward("layer_norm", x, to(g, x.dtype()), weight, mean_t, rstd_t,
                               Shape(x.shape().end() - nd, x.shape().end()), n.needs(0), weight.defined() && n.needs(1),
                               bias.defined() && n.needs(2));
    }
    Tensor gx = n.needs(0) ? Tensor::empty(x.shape(), x.dtype()) : Tensor();
    Tensor gw = weight.defined() && n.needs(1) ? Tensor::empty(weight.shape(), x.dtype()) : Tensor();
    Tensor gb = bias.defined() && n.needs(2) ? Tensor::empty(bias.shape(), x.dtype()) : Tensor();
    dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
      using T = decltype(tag);
      k::layer_norm_backward<T>(gx.defined() ? gx.data<T>() : nullptr, gw.defined() ? gw.data<T>() : nullptr,
                                gb.defined() ? gb.data<T>() : nullptr, g.data<T>(), x.data<T>(),
                                weight.defined() ? weight.data<T>() : nullptr, mean_t.data<T>(), rstd_t.data<T>(), rows, D);
    });
    return Grads{gx, gw, gb};
  });
}

// ---- RMS norm ------------------------------------------------------------------------------

namespace {
// The backward from public ops, for higher-order gradients.
Grads rms_norm_backward_composed(const Tensor& g, const Tensor& x, const Tensor& w, double eps, const Node& n) {
  Tensor rs = rsqrt(add(mean(square(x), {-1}, true), eps));
  Tensor xhat = mul(x, rs);
  Tensor dxhat = w.defined() ? mul(g, w) : g;
  Tensor gx, gw;
  if (n.needs(0)) gx = mul(rs, sub(dxhat, mul(xhat, mean(mul(dxhat, xhat), {-1}, true))));
  if (w.defined() && n.needs(1)) gw = sum_to(mul(g, xhat), w.shape());
  return Grads{gx, gw};
}
}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  detail::check_float(x, "rms_norm");
  TG_CHECK(x.dim() >= 1 && x.size(-1) > 0, "rms_norm", "expected an input [..., D] with D > 0, got shape {}", x.shape());
  const int64_t D = x.size(-1);
  TG_CHECK(!weight.defined() || (weight.shape() == Shape{D} && weight.dtype() == x.dtype()), "rms_norm",
           "weight has shape {} ({}), expected [{}] ({}) to match the input's last dim (input shape {})", weight.shape(),
           weight.dtype(), D, x.dtype(), x.shape());
  TG_CHECK(eps > 0 && std::isfinite(eps), "rms_norm", "eps must be positive and finite, got {}", eps);
  const int64_t rows = x.numel() / D;
  if (weight.defined()) detail::check_same_device("rms_norm", x, "input", weight, "weight");
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor rstd_t = Tensor::empty(Shape{rows}, x.dtype(), x.device());
  if (x.is_cuda()) {
    gpu_norm("rms_norm", x, weight, Tensor(), out, Tensor(), rstd_t, rows, D, eps);
  } else {
    dispatch_float(x.dtype(), "rms_norm", [&](auto tag) {
      using T = decltype(tag);
      k::rms_norm_forward<T>(out.data<T>(), rstd_t.data<T>(), x.data<T>(), weight.defined() ? weight.data<T>() : nullptr,
                             rows, D, static_cast<T>(eps));
    });
  }
  return record("rms_norm", out, {x, weight}, [x, weight, eps, rstd_t, rows, D](const Tensor& g0, const Node& n) {
    if (grad_enabled()) return rms_norm_backward_composed(g0, x, weight, eps, n);  // recorded: public ops
    if (x.is_cuda()) {
      Grads gr = gpu_norm_backward("rms_norm", x, to(g0, x.dtype()), weight, Tensor(), rstd_t, Shape{D}, n.needs(0),
                                   weight.defined() && n.needs(1), false);
      return Grads{gr[0], gr[1]};
    }
    Tensor g = to(g0, x.dtype());
    Tensor gx = n.needs(0) ? Tensor::empty(x.shape(), x.dtype()) : Tensor();
    Tensor gw = weight.defined() && n.needs(1) ? Tensor::empty(weight.shape(), x.dtype()) : Tensor();
    dispatch_float(x.dtype(), "rms_norm", [&](auto tag) {
      using T = decltype(tag);
      k::rms_norm_backward<T>(gx.defined() ? gx.data<T>() : nullptr, gw.defined() ? gw.data<T>() : nullptr, g.data<T>(),
                              x.data<T>(), weight.defined() ? weight.data<T>() : nullptr, rstd_t.data<T>(), rows, D);
    });
    return Grads{gx, gw};
  });
}

// ---- Bias + activation ---------------------------------------------------------------------

namespace {
// bias_act's GPU arguments but the output (ops/cuda/nn.h): the activation as math::Unary's code.
cuda_ops::BiasActArgs gpu_bias_act_args(const Tensor& x, const Tensor& bias, Activation act, int64_t rows, int64_t D) {
  cuda_ops::BiasActArgs args;
  args.device = x.device().index;
  args.op = "bias_act";
  args.act = act == Activation::kRelu       ? cuda_ops::math::Unary::kRelu
             : act == Activation::kGelu     ? cuda_ops::math::Unary::kGeluErf
             : act == Activation::kGeluTanh ? cuda_ops::math::Unary::kGeluTanh
                                            : cuda_ops::math::Unary::kAffine;
  args.type = detail::gpu_scalar(x.dtype());
  args.x = detail::gpu_ptr(x);
  args.bias = detail::gpu_ptr(bias);
  args.rows = rows;
  args.D = D;
  return args;
}
}  // namespace

Tensor bias_act(const Tensor& x, const Tensor& bias, Activation act) {
  detail::check_float(x, "bias_act");
  detail::check_float(bias, "bias_act");
  TG_CHECK(x.dim() >= 1 && bias.dim() == 1 && bias.size(0) == x.size(-1) && bias.dtype() == x.dtype(), "bias_act",
           "bias of shape {} ({}) does not match the last dimension of the input's shape {} ({})", bias.shape(),
           bias.dtype(), x.shape(), x.dtype());
  // A bfloat16 linear layer's bias and activation: in float32, rounded once (the casts carry the gradient).
  if (x.dtype() == kBFloat16) return to(bias_act(to(x, kFloat32), to(bias, kFloat32), act), kBFloat16);
  const int64_t D = x.size(-1), rows = D ? x.numel() / D : 0;
  detail::check_same_device("bias_act", x, "input", bias, "bias");
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.is_cuda()) {
    dispatch_float(x.dtype(), "bias_act", [](auto) {});
    cuda_ops::BiasActArgs args = gpu_bias_act_args(x, bias, act, rows, D);
    args.y = detail::gpu_ptr(y);
    cuda_ops::bias_act(args);
  } else {
    dispatch_float(x.dtype(), "bias_act", [&](auto tag) {
      using T = decltype(tag);
      auto run = [&](auto f) { k::bias_act_forward<T>(x.data<T>(), bias.data<T>(), y.data<T>(), rows, D, f); };
      switch (act) {
        case Activation::kIdentity: run(k::Identity{}); break;
        case Activation::kRelu: run(k::Relu{}); break;
        case Activation::kGelu: run(k::GeluErf{}); break;
        case Activation::kGeluTanh: run(k::GeluTanh{}); break;
      }
    });
  }
  return record("bias_act", y, {x, bias}, [x, bias, act, rows, D](const Tensor& g0, const Node& n) {
    Tensor g = to(g0, x.dtype());
    if (x.is_cuda() && !grad_enabled()) {  // one pass for dx, two fixed-order passes for the bias's sums
      detail::check_same_device("bias_act", x, "input", g, "gradient");
      Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
      Tensor db = n.needs(1) ? Tensor::empty(bias.shape(), x.dtype(), x.device()) : Tensor();
      Tensor partial = db.defined() ? Tensor::empty({cuda_ops::norm_backward_scratch(rows, D)}, x.dtype(), x.device()) : Tensor();
      cuda_ops::bias_act_backward(gpu_bias_act_args(x, bias, act, rows, D), detail::gpu_ptr(g), detail::gpu_ptr(dx),
                                  db.defined() ? detail::gpu_ptr(db) : nullptr,
                                  partial.defined() ? detail::gpu_ptr(partial) : nullptr);
      return Grads{n.needs(0) ? dx : Tensor(), db};
    }
    if (grad_enabled()) {  // recorded backward: the same derivative from public ops
      Tensor pre = add(x, bias);
      Tensor d;
      switch (act) {
        case Activation::kIdentity: d = g; break;
        case Activation::kRelu: d = where(gt(pre, 0.0), g, 0.0); break;
        case Activation::kGelu: d = tg::grad_of_gelu(g, pre, GeluApprox::kNone); break;
        case Activation::kGeluTanh: d = tg::grad_of_gelu(g, pre, GeluApprox::kTanh); break;
      }
      return Grads{n.needs(0) ? d : Tensor(), n.needs(1) ? sum_to(d, bias.shape()) : Tensor()};
    }
    Tensor dx = Tensor::empty(x.shape(), x.dtype());
    Tensor db = n.needs(1) ? Tensor::empty(bias.shape(), x.dtype()) : Tensor();
    dispatch_float(x.dtype(), "bias_act", [&](auto tag) {
      using T = decltype(tag);
      auto run = [&](auto f) {
        k::bias_act_backward<T>(g.data<T>(), x.data<T>(), bias.data<T>(), dx.data<T>(), db.defined() ? db.data<T>() : nullptr,
                                rows, D, f);
      };
      switch (act) {
        case Activation::kIdentity: run(k::IdentityGrad{}); break;
        case Activation::kRelu: run(k::ReluGrad{}); break;
        case Activation::kGelu: run(k::GeluErfGrad{}); break;
        case Activation::kGeluTanh: run(k::GeluTanhGrad{}); break;
      }
    });
    return Grads{n.needs(0) ? dx : Tensor(), db};
  });
}

// ---- Negative-sampling loss (word2vec) -----------------------------------------------------

Tensor negative_sampling_loss(const Tensor& input, const Tensor& output, Reduction reduction) {
  detail::check_float(input, "negative_sampling_loss");
  detail::check_float(output, "negative_sampling_loss");
  TG_CHECK(input.dim() == 2 && output.dim() == 3 && output.size(0) == input.size(0) && output.size(2) == input.size(1) &&
               output.size(1) >= 1 && input.dtype() == output.dtype(),
           "negative_sampling_loss",
           "expects input [B, D] and output [B, 1 + negatives, D] of one dtype, got {} ({}) and {} ({})", input.shape(),
           input.dtype(), output.shape(), output.dtype());
  TG_CHECK(!input.is_cuda() && !output.is_cuda(), "negative_sampling_loss",
           "runs on the CPU only (word2vec trains there), got input on {} and output on {}: move them with "
           ".to(tg::kCPU)", input.device(), output.device());
  const int64_t B = input.size(0), C = output.size(1), D = input.size(1);
  Tensor scores = Tensor::empty({B, C}, input.dtype());
  Tensor rows = Tensor::empty({B}, input.dtype());
  dispatch_float(input.dtype(), "negative_sampling_loss", [&](auto tag) {
    using T = decltype(tag);
    k::sgns_forward<T>(input.data<T>(), output.data<T>(), scores.data<T>(), rows.data<T>(), B, C, D);
  });
  Tensor out;
  {
    NoGradGuard ng;  // the reduction is part of this op: its gradient is folded into the backward
    out = reduction == Reduction::kNone ? rows : reduction == Reduction::kSum ? sum(rows) : mean(rows);
  }
  return record("negative_sampling_loss", out, {input, output},
                [input, output, scores, reduction, B, C](const Tensor& g0, const Node& n) {
    Tensor g = to(g0, input.dtype());
    // Upstream gradient per row.
    Tensor g_row = reduction == Reduction::kNone ? g : expand(reduction == Reduction::kMean ? g / static_cast<double>(B) : g, {B});
    if (grad_enabled()) {  // recorded backward from public ops: coef = (σ(s) - label) g
      Tensor s = matmul(output, input.unsqueeze(2)).squeeze(2);  // [B, C], recomputed to be differentiable
      Tensor label = concat({ones({1, 1}, input.dtype()), zeros({1, C - 1}, input.dtype())}, 1);
      Tensor coef = (sigmoid(s) - label) * g_row.unsqueeze(1);
      return Grads{n.needs(0) ? matmul(coef.unsqueeze(1), output).squeeze(1) : Tensor(),
                   n.needs(1) ? coef.unsqueeze(2) * input.unsqueeze(1) : Tensor()};
    }
    Tensor du = n.needs(0) ? Tensor::empty(input.shape(), input.dtype()) : Tensor();
    Tensor dv = n.needs(1) ? Tensor::empty(output.shape(), input.dtype()) : Tensor();
    dispatch_float(input.dtype(), "negative_sampling_loss", [&](auto tag) {
      using T = decltype(tag);
      k::sgns_backward<T>(input.data<T>(), output.data<T>(), scores.data<T>(), g_row.data<T>(),
                          du.defined() ? du.data<T>() : nullptr, dv.defined() ? dv.data<T>() : nullptr, B, C,
                          input.size(1));
    });
    return Grads{du, dv};
  });
}

// ---- Dropout and masks ---------------------------------------------------------------------

namespace detail {

const uint64_t* gpu_row_keys(const DropoutKeys& keys, const Tensor& x, const char* op) {
  if (!keys.rows || keys.rows->empty()) return nullptr;  // (no rows: nothing to drop)
  if (keys.rows_at != nullptr) return keys.rows_at;
  TG_CHECK(keys.rows_on_device.defined(), op, "a gradient on {} for a call made on the CPU", x.device().str());
  check_same_device(op, x, "input", keys.rows_on_device, "row keys");
  return static_cast<const uint64_t*>(gpu_ptr(keys.rows_on_device));
}

// y = (residual +) dropout(x) on x's GPU: one kernel, the keys by value, from the rows' device
// memory, or (a CUDA graph's step values) from key_at.
void gpu_dropout(const Tensor& x, const Tensor& y, const Tensor& residual, const DropoutKeys& keys, uint32_t threshold,
                 double scale, const Tensor& y_bf16 = Tensor()) {
  cuda_ops::DropoutArgs a;
  a.device = x.device().index;
  a.op = "dropout";
  a.type = gpu_scalar(x.dtype());
  a.x = gpu_ptr(x);
  a.y = gpu_ptr(y);
  a.residual = residual.defined() ? gpu_ptr(residual) : nullptr;
  a.n = x.numel();
  a.len = keys.rows ? x.size(x.dim() - 1) : 0;
  a.row_keys = gpu_row_keys(keys, x, "dropout");
  a.key_at = keys.key_at;
  a.key = keys.key;
  a.threshold = threshold;
  a.scale = scale;
  a.y_bf16 = y_bf16.defined() ? gpu_ptr(y_bf16) : nullptr;
  cuda_ops::dropout(a);
}

// y = x where the mask keeps it, times scale; 0 where it drops it. On x's device, the same bits
// on the CPU and a GPU (ops/cuda/math.h's dropout_element, tested against the CPU kernel).
Tensor apply_dropout(const Tensor& x, const DropoutKeys& keys, uint32_t threshold, double scale, bool bf16_copy) {
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  const int64_t len = keys.rows ? x.size(x.dim() - 1) : 0, rows = keys.rows ? static_cast<int64_t>(keys.rows->size()) : 0;
  if (x.is_cuda()) {
    if (x.dtype() != kBFloat16) dispatch_float(x.dtype(), "dropout", [](auto) {});  // (bfloat16: computed in float32)
    const Tensor copy = bf16_copy && x.dtype() == kFloat32 ? Tensor::empty(x.shape(), kBFloat16, x.device()) : Tensor();
    gpu_dropout(x, y, Tensor(), keys, threshold, scale, copy);
    if (copy.defined()) keep_gpu_bf16_copy(y, copy);
    return y;
  }
  dispatch_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    if (keys.rows) {
      k::dropout_apply_rows<T>(x.data<T>(), y.data<T>(), rows, len, keys.rows->data(), threshold, static_cast<T>(scale));
    } else {
      k::dropout_apply<T>(x.data<T>(), y.data<T>(), x.numel(), keys.key, threshold, static_cast<T>(scale));
    }
  });
  return y;
}

}  // namespace detail

namespace {
// Dropout keyed by sample: one key per row (every dimension but the last), from the call's key,
// the row's sample and its coordinates within the sample, so that padding changes no key.
std::shared_ptr<std::vector<uint64_t>> sample_row_keys(const Shape& shape, SampleKeyScope& sk) {
  const uint64_t call = mix_key(sk.key, sk.calls++);
  const int64_t d = static_cast<int64_t>(shape.size()), len = shape[static_cast<size_t>(d - 1)];
  const int64_t rows = len > 0 ? shape.numel() / len : 0, per_sample = shape[0] > 0 ? rows / shape[0] : 0;
  auto keys = std::make_shared<std::vector<uint64_t>>(static_cast<size_t>(rows));
  std::vector<int64_t> coord(static_cast<size_t>(d), 0);  // coordinates of dims 1 .. d-2
  for (int64_t b = 0; b < shape[0]; ++b) {
    const uint64_t sample_key = mix_key(call, static_cast<uint64_t>(sk.samples[static_cast<size_t>(b)]));
    std::fill(coord.begin(), coord.end(), 0);
    for (int64_t r = 0; r < per_sample; ++r) {
      uint64_t k = sample_key;
      for (int64_t i = 1; i + 1 < d; ++i) k = mix_key(k, static_cast<uint64_t>(coord[static_cast<size_t>(i)]));
      (*keys)[static_cast<size_t>(b * per_sample + r)] = k;
      for (int64_t i = d - 2; i >= 1; --i) {  // odometer over dims 1 .. d-2
        if (++coord[static_cast<size_t>(i)] < shape[static_cast<size_t>(i)]) break;
        coord[static_cast<size_t>(i)] = 0;
      }
    }
  }
  return keys;
}
}  // namespace

namespace detail {
namespace {
// One key for the whole mask inside a SampleKeyScope: from the scope's key, the call and the
// samples (so that processes of a data-parallel run draw different masks).
uint64_t scope_key(SampleKeyScope& sk) {
  uint64_t key = mix_key(sk.key, sk.calls++);
  for (int64_t id : sk.samples) key = mix_key(key, static_cast<uint64_t>(id));
  return key;
}
// A captured dropout's keys at replay: the thread's SampleKeyScope must be open, for as many samples.
SampleKeyScope& replay_scope(size_t samples) {
  SampleKeyScope* sk = current_sample_keys();
  TG_CHECK(sk != nullptr && (samples == 0 || sk->samples.size() == samples), "cuda::Graph::replay",
           "the captured step's dropout was keyed by sample (a SampleKeyScope of {} samples was open at capture): "
           "replay inside such a scope ({})", samples,
           sk == nullptr ? std::string("none is open") : fmt::format("the open one has {}", sk->samples.size()));
  return *sk;
}
}  // namespace

DropoutKeys dropout_keys(const Shape& shape, const Device& device) {
  SampleKeyScope* sk = current_sample_keys();
  DropoutKeys keys;
  const bool graph = device.is_cuda() && capturing(device.index);
  if (sk && shape.rank() >= 2 && shape[0] == static_cast<int64_t>(sk->samples.size())) {
    keys.rows = sample_row_keys(shape, *sk);
    if (graph) {  // each replay's keys: those of the scope open then, for the same shape
      const size_t samples = static_cast<size_t>(shape[0]);
      keys.rows_at = step_values(
          device.index, keys.rows->data(), keys.rows->size(),
          [shape, samples](uint64_t* out) {
            const auto rows = sample_row_keys(shape, replay_scope(samples));
            std::memcpy(out, rows->data(), rows->size() * sizeof(uint64_t));
          },
          [samples] { (void)replay_scope(samples); });
    } else if (device.is_cuda()) {  // the keys travel as int64 bits: one upload a call, read by forward and backward
      std::vector<int64_t> bits(keys.rows->size());
      std::memcpy(bits.data(), keys.rows->data(), bits.size() * sizeof(int64_t));
      keys.rows_on_device = from_vector(bits, Shape{static_cast<int64_t>(bits.size())}).to(device);
    }
  } else if (sk) {
    // One key for the whole mask: inside a SampleKeyScope on a tensor not shaped per sample, from
    // the scope; else from the global generator (reproducible under manual_seed).
    keys.key = scope_key(*sk);
    if (graph) {
      const size_t samples = sk->samples.size();
      keys.key_at = step_values(
          device.index, &keys.key, 1, [samples](uint64_t* out) { *out = scope_key(replay_scope(samples)); },
          [samples] { (void)replay_scope(samples); });
    }
  } else {
    keys.key = default_generator().next_u64();
    if (graph) {
      keys.key_at = step_values(
          device.index, &keys.key, 1, [](uint64_t* out) { *out = default_generator().next_u64(); },
          [] {
            TG_CHECK(current_sample_keys() == nullptr, "cuda::Graph::replay",
                     "a SampleKeyScope is open, but the captured step's dropout drew from the global generator (no "
                     "scope was open at its capture): capture the step inside such a scope");
          });
    }
  }
  return keys;
}
uint32_t dropout_threshold(double p) { return static_cast<uint32_t>(std::min(p * 4294967296.0, 4294967295.0)); }
}  // namespace detail

Tensor dropout(const Tensor& x, double p, bool training) {
  detail::check_float(x, "dropout");
  TG_CHECK(p >= 0.0 && p <= 1.0, "dropout", "probability must be in [0, 1], got {}", p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return mul(x, 0.0);
  // bfloat16: computed in float32 and rounded once (the same mask; a GPU does it in one kernel).
  if (x.dtype() == kBFloat16 && !x.is_cuda()) return to(dropout(to(x, kFloat32), p, training), kBFloat16);
  const uint32_t threshold = detail::dropout_threshold(p);
  const double scale = 1.0 / (1.0 - p);
  const detail::DropoutKeys keys = detail::dropout_keys(x.shape(), x.device());
  // The mask itself is never stored: the backward regenerates it from the keys. Recorded (double
  // backward): g times the mask as a tensor; else the mask applied to g in one pass.
  return record("dropout", detail::apply_dropout(x, keys, threshold, scale), {x},
                [shape = x.shape(), dtype = x.dtype(), keys, threshold, scale](const Tensor& g0, const Node&) {
    Tensor g = to(g0, dtype);
    if (grad_enabled()) return Grads{mul(g, detail::apply_dropout(full(shape, 1.0, dtype, g.device()), keys, threshold, scale))};
    return Grads{detail::apply_dropout(g, keys, threshold, scale)};
  });
}

namespace detail {
Tensor dropout_add(const Tensor& x, const Tensor& residual, double p, bool training) {
  detail::check_float(x, "dropout");
  detail::check_defined(residual, "dropout");
  if (!(x.is_cuda() && training && p > 0.0 && p < 1.0 && residual.is_cuda() && residual.device() == x.device() &&
        residual.shape() == x.shape() && residual.dtype() == x.dtype() && x.dtype() != kBFloat16))
    return add(residual, dropout(x, p, training));
  const uint32_t threshold = dropout_threshold(p);
  const double scale = 1.0 / (1.0 - p);
  const DropoutKeys keys = dropout_keys(x.shape(), x.device());
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  gpu_dropout(x, y, residual, keys, threshold, scale);
  // The gradient: g to the residual, the mask applied to g for x (as add's and dropout's backward).
  // Under autocast x is a float32 product's output (W_O's, the FFN's second): x's gradient also
  // gets its bfloat16 rounding in the same pass, which that product's backward takes (no cast).
  const bool autocast = autocast_on_gpu(x);
  return record("dropout_add", y, {x, residual}, [shape = x.shape(), dtype = x.dtype(), keys, threshold, scale, autocast](
                                                      const Tensor& g0, const Node& n) {
    const Tensor g = to(g0, dtype);
    Tensor gx;
    if (n.needs(0)) {
      gx = grad_enabled() ? mul(g, apply_dropout(full(shape, 1.0, dtype, g.device()), keys, threshold, scale))
                          : apply_dropout(g, keys, threshold, scale, autocast);
    }
    return Grads{gx, n.needs(1) ? g : Tensor()};
  });
}
}  // namespace detail

Tensor causal_mask(int64_t T, int64_t S, int64_t offset) {
  TG_CHECK(T >= 0 && S >= 0 && offset >= 0, "causal_mask", "lengths and offset must be non-negative, got {}, {} and {}",
           T, S, offset);
  Tensor m = Tensor::empty(Shape{T, S}, kBool);
  bool* p = m.data<bool>();
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < S; ++j) p[i * S + j] = j > i + offset;
  return m;
}
Tensor causal_mask(int64_t T) { return causal_mask(T, T); }
Tensor causal_mask(int64_t T, int64_t S, int64_t offset, Device device) {
  if (!device.is_cuda()) return causal_mask(T, S, offset);
  TG_CHECK(T >= 0 && S >= 0 && offset >= 0, "causal_mask", "lengths and offset must be non-negative, got {}, {} and {}",
           T, S, offset);
  Tensor m = Tensor::empty(Shape{T, S}, kBool, device);  // made there: no copy from the host (a CUDA graph records it)
  cuda_ops::causal_mask(device.index, "causal_mask", static_cast<bool*>(detail::gpu_ptr(m)), T, S, offset);
  return m;
}

Tensor padding_mask(const Tensor& ids, int64_t pad_id) {
  detail::check_index(ids, "padding_mask");
  return eq(ids, static_cast<double>(pad_id));
}

}  // namespace tg
