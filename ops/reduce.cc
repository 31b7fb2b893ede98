// Reductions: sum, mean, var, logsumexp, amax/amin, max/min with indices, sum_to.
#include "ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/factory.h"
#include "ops/elementwise.h"
#include "ops/cuda/reduce.h"
#include "ops/kernels/reduce.h"
#include "ops/op_util.h"
#include "ops/shape_ops.h"

namespace tg {
namespace k = kernels;
namespace {

// Sorted, unique, non-negative axes; empty means all.
Axes normalize_axes(const Axes& axes, int64_t rank, const char* op) {
  Axes out;
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int64_t a : axes) out.push_back(normalize_axis(a, rank, op));
  std::sort(out.begin(), out.end());
  for (size_t i = 1; i < out.size(); ++i)
    TG_CHECK(out[i] != out[i - 1], op, "dimension {} appears more than once in the axes", out[i]);
  if (rank == 0) out.clear();
  return out;
}

Shape keep_shape(const Shape& s, const Axes& axes) {
  Shape k = s;
  for (int64_t a : axes) k[a] = 1;
  return k;
}
Shape drop_shape(const Shape& s, const Axes& axes) {
  Shape d;
  for (int64_t i = 0; i < s.rank(); ++i)
    if (!std::binary_search(axes.begin(), axes.end(), i)) d.push_back(s[i]);
  return d;
}

// Reduces x over sorted axes with op, returning the keepdim-shaped result (no graph).
template <class Op>
Tensor reduce_raw(const Tensor& x, const Axes& axes, Op op, double init, const char* op_name, cuda_ops::Reduce gpu) {
  Tensor cur = x;
  Shape shape = x.shape();
  // Contiguous groups of axes, last group first: each group is one [outer, R, inner] pass.
  size_t i = axes.size();
  while (i > 0) {
    size_t j = i - 1;
    while (j > 0 && axes[j - 1] == axes[j] - 1) --j;
    int64_t a0 = axes[j], a1 = axes[i - 1];
    int64_t outer = 1, R = 1, inner = 1;
    for (int64_t d = 0; d < a0; ++d) outer *= shape[d];
    for (int64_t d = a0; d <= a1; ++d) R *= shape[d];
    for (int64_t d = a1 + 1; d < shape.rank(); ++d) inner *= shape[d];
    for (int64_t d = a0; d <= a1; ++d) shape[d] = 1;
    Tensor next = Tensor::empty(shape, x.dtype(), x.device());
    if (x.is_cuda()) {
      dispatch_float(x.dtype(), op_name, [](auto) {});
      cuda_ops::ReduceArgs args;
      args.device = x.device().index;
      args.op = op_name;
      args.f = gpu;
      args.type = detail::gpu_scalar(x.dtype());
      args.x = detail::gpu_ptr(cur);
      args.out = detail::gpu_ptr(next);
      args.outer = outer;
      args.R = R;
      args.inner = inner;
      Tensor scratch;  // few outputs over a long R: two passes through pieces (cuda_ops::reduce_plan)
      if (const cuda_ops::ReducePlan plan = cuda_ops::reduce_plan(outer, R, inner); plan.scratch > 0) {
        scratch = Tensor::empty({plan.scratch}, x.dtype(), x.device());
        args.scratch = detail::gpu_ptr(scratch);
      }
      cuda_ops::reduce(args);
    } else {
      dispatch_float(x.dtype(), op_name, [&](auto tag) {
        using T = decltype(tag);
        k::reduce(cur.data<T>(), next.data<T>(), outer, R, inner, op, static_cast<T>(init));
      });
    }
    cur = next;
    i = j;
  }
  if (axes.empty()) cur = clone(x.detach());
  return cur;
}

Tensor finish(const Tensor& kept, const Shape& x_shape, const Axes& axes, bool keepdim) {
  return keepdim ? kept : reshape(kept, drop_shape(x_shape, axes));
}

}  // namespace

Tensor sum(const Tensor& x, const Axes& axes_in, bool keepdim) {
  detail::check_float(x, "sum");
  Axes axes = normalize_axes(axes_in, x.dim(), "sum");
  Tensor kept = reduce_raw(x, axes, k::Add{}, 0.0, "sum", cuda_ops::Reduce::kSum);
  Tensor out = keepdim ? kept : kept.detach().reshape(drop_shape(x.shape(), axes));
  return record("sum", out, {x}, [xs = x.shape(), ks = keep_shape(x.shape(), axes)](const Tensor& g, const Node&) {
    return Grads{expand(reshape(g, ks), xs)};
  });
}

Tensor mean(const Tensor& x, const Axes& axes_in, bool keepdim) {
  detail::check_float(x, "mean", false);
  Axes axes = normalize_axes(axes_in, x.dim(), "mean");
  int64_t count = 1;
  for (int64_t a : axes) count *= x.shape()[a];
  return mul(sum(x, axes, keepdim), count ? 1.0 / static_cast<double>(count) : std::nan(""));
}

Tensor var(const Tensor& x, const Axes& axes_in, int64_t correction, bool keepdim) {
  detail::check_float(x, "var", false);
  Axes axes = normalize_axes(axes_in, x.dim(), "var");
  int64_t count = 1;
  for (int64_t a : axes) count *= x.shape()[a];
  TG_CHECK(count - correction > 0, "var", "correction {} leaves no degrees of freedom for {} elements (shape {})",
           correction, count, x.shape());
  Tensor centered = sub(x, mean(x, axes, true));
  return mul(sum(square(centered), axes, keepdim), 1.0 / static_cast<double>(count - correction));
}

namespace {
template <class Op>
Tensor extreme(const char* op, const Tensor& x, const Axes& axes_in, bool keepdim, Op fn, double init,
               cuda_ops::Reduce gpu) {
  detail::check_float(x, op);
  Axes axes = normalize_axes(axes_in, x.dim(), op);
  for (int64_t a : axes)
    TG_CHECK(x.shape()[a] > 0, op, "cannot reduce over dimension {} of size 0 (shape {})", a, x.shape());
  Tensor kept = reduce_raw(x, axes, fn, init, op, gpu);
  Tensor out = keepdim ? kept : kept.detach().reshape(drop_shape(x.shape(), axes));
  // Capture a detached alias: capturing `out` itself would make a cycle out -> node -> out.
  return record(op, out, {x}, [x, kept = kept.detach(), axes](const Tensor& g, const Node&) {
    // Shared evenly between the elements equal to the extreme (as torch.amax/amin).
    Shape ks = keep_shape(x.shape(), axes);
    Tensor hit = to(eq(x, kept), x.dtype());
    Tensor count = sum(hit, axes, true);
    return Grads{div(mul(reshape(g, ks), hit), count)};
  });
}
}  // namespace

Tensor amax(const Tensor& x, const Axes& axes, bool keepdim) {
  return extreme("amax", x, axes, keepdim, k::Max{}, -std::numeric_limits<double>::infinity(), cuda_ops::Reduce::kMax);
}
Tensor amin(const Tensor& x, const Axes& axes, bool keepdim) {
  return extreme("amin", x, axes, keepdim, k::Min{}, std::numeric_limits<double>::infinity(), cuda_ops::Reduce::kMin);
}

Tensor logsumexp(const Tensor& x, const Axes& axes_in, bool keepdim) {
  detail::check_float(x, "logsumexp", false);
  Axes axes = normalize_axes(axes_in, x.dim(), "logsumexp");
  Tensor m = amax(x.detach(), axes, true);
  m = masked_fill(m, eq(abs(m), std::numeric_limits<double>::infinity()), 0.0);  // all -inf rows
  Tensor lse = add(log(sum(exp(sub(x, m)), axes, true)), m);
  return finish(lse, x.shape(), axes, keepdim);
}

namespace {
template <bool kMax>
ValuesIndices arg_extreme(const char* op, const Tensor& x, int64_t axis_in, bool keepdim) {
  detail::check_float(x, op);
  int64_t axis = normalize_axis(axis_in, x.dim(), op);
  const Shape& s = x.shape();
  int64_t outer = 1, R = x.dim() ? s[axis] : 1, inner = 1;
  TG_CHECK(R > 0, op, "cannot reduce over dimension {} of size 0 (shape {})", axis, s);
  for (int64_t d = 0; d < axis; ++d) outer *= s[d];
  for (int64_t d = axis + 1; d < x.dim(); ++d) inner *= s[d];
  Shape ks = s;
  if (x.dim()) ks[axis] = 1;
  Tensor vals = Tensor::empty(ks, x.dtype(), x.device());
  Tensor idx = Tensor::empty(ks, kInt64, x.device());
  if (x.is_cuda()) {
    dispatch_float(x.dtype(), op, [](auto) {});
    cuda_ops::ArgReduceArgs args;
    args.device = x.device().index;
    args.op = op;
    args.max = kMax;
    args.type = detail::gpu_scalar(x.dtype());
    args.x = detail::gpu_ptr(x);
    args.values = detail::gpu_ptr(vals);
    args.indices = static_cast<int64_t*>(detail::gpu_ptr(idx));
    args.outer = outer;
    args.R = R;
    args.inner = inner;
    cuda_ops::arg_reduce(args);
  } else {
    dispatch_float(x.dtype(), op, [&](auto tag) {
      using T = decltype(tag);
      k::arg_reduce<T, kMax>(x.data<T>(), vals.data<T>(), idx.data<int64_t>(), outer, R, inner);
    });
  }
  if (!keepdim && x.dim()) {
    Shape ds = drop_shape(s, {axis});
    vals = vals.detach().reshape(ds);
    idx = idx.reshape(ds);
  }
  Tensor kept_idx = keepdim || !x.dim() ? idx : unsqueeze(idx, axis);
  vals = record(op, vals, {x}, [s, axis, kept_idx, ks](const Tensor& g, const Node&) {
    if (s.rank() == 0) return Grads{reshape(g, s)};
    return Grads{scatter_add(s, axis, kept_idx, reshape(g, ks))};
  });
  return {vals, idx};
}
}  // namespace

ValuesIndices max(const Tensor& x, int64_t axis, bool keepdim) { return arg_extreme<true>("max", x, axis, keepdim); }
ValuesIndices min(const Tensor& x, int64_t axis, bool keepdim) { return arg_extreme<false>("min", x, axis, keepdim); }
Tensor argmax(const Tensor& x, int64_t axis, bool keepdim) {
  NoGradGuard ng;
  return arg_extreme<true>("argmax", x, axis, keepdim).indices;
}
Tensor argmin(const Tensor& x, int64_t axis, bool keepdim) {
  NoGradGuard ng;
  return arg_extreme<false>("argmin", x, axis, keepdim).indices;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  // bfloat16 gradients of broadcast operands: summed in float32, rounded once.
  if (x.dtype() == kBFloat16) return to(sum_to(to(x, kFloat32), shape), kBFloat16);
  TG_CHECK(x.dim() >= shape.rank(), "sum_to", "cannot sum shape {} down to the larger rank of {}", x.shape(), shape);
  int64_t lead = x.dim() - shape.rank();
  Axes axes;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < lead) { axes.push_back(i); continue; }
    int64_t want = shape[i - lead];
    TG_CHECK(want == x.shape()[i] || want == 1, "sum_to", "shape {} is not a broadcast of {}", x.shape(), shape);
    if (want == 1 && x.shape()[i] != 1) axes.push_back(i);
  }
  return reshape(sum(x, axes, true), shape);
}

// Tensor convenience forms.
Tensor Tensor::sum() const { return tg::sum(*this); }
Tensor Tensor::sum(std::initializer_list<int64_t> axes, bool keepdim) const { return tg::sum(*this, Axes(axes), keepdim); }
Tensor Tensor::mean() const { return tg::mean(*this); }
Tensor Tensor::mean(std::initializer_list<int64_t> axes, bool keepdim) const { return tg::mean(*this, Axes(axes), keepdim); }
Tensor Tensor::to(DType d) const { return tg::to(*this, d); }
Tensor Tensor::to(Device d) const { return tg::to(*this, d); }
Tensor Tensor::clone() const { return tg::clone(*this); }

}  // namespace tg
