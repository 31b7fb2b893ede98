// Shape and movement ops, and indexing. Each backward is another public op of this file.
#include "ops/shape_ops.h"

#include <algorithm>
#include <cstring>

#include "graph/cuda/runtime.h"
#include "graph/factory.h"
#include "ops/cuda/shape.h"
#include "ops/elementwise.h"
#include "ops/kernels/copy.h"
#include "ops/kernels/sgns.h"
#include "ops/op_util.h"
#include "ops/reduce.h"

namespace tg {
namespace k = kernels;
namespace {

void check_copy_rank(const Shape& shape, const char* op) {
  TG_CHECK(shape.rank() <= k::kMaxCopyRank, op, "tensors of rank {} are not supported (at most {} dimensions)",
           shape.rank(), k::kMaxCopyRank);
}

// Strided copy for any dtype (by element size).
void copy_strided(const Tensor& src, const Tensor& dst, const Shape& strides, int64_t src_offset = 0,
                  const char* op = "copy") {
  const Shape& shape = dst.shape();
  check_copy_rank(shape, "copy");
  if (src.is_cuda()) {
    TG_CHECK(shape.rank() <= cuda_ops::kMaxCopyRank, op, "GPU copies take tensors of at most {} dimensions, got shape {}",
             cuda_ops::kMaxCopyRank, shape);
    cuda_ops::CopyArgs args;
    args.device = src.device().index;
    args.op = op;
    args.elem_bytes = static_cast<int>(dtype_size(src.dtype()));
    args.rank = static_cast<int>(shape.rank());
    for (int64_t d = 0; d < shape.rank(); ++d) {
      args.size[d] = shape[d];
      args.stride[d] = strides[d];
    }
    args.src = static_cast<const char*>(detail::gpu_ptr(src)) + src_offset * args.elem_bytes;
    args.dst = detail::gpu_ptr(dst);
    cuda_ops::strided_copy(args);
    return;
  }
  auto copy = [&](auto tag) {
    using T = decltype(tag);
    k::strided_copy(static_cast<const T*>(src.raw_data()) + src_offset, static_cast<T*>(dst.raw_data()), shape.data(),
                    strides.data(), shape.rank());
  };
  switch (dtype_size(src.dtype())) {
    case 1: copy(uint8_t{}); break;
    case 2: copy(uint16_t{}); break;
    case 4: copy(uint32_t{}); break;
    case 8: copy(uint64_t{}); break;
    default: detail::fail("copy", "no strided copy for {}-byte elements ({})", dtype_size(src.dtype()), src.dtype());
  }
}

// outer / inner sizes around dim.
std::pair<int64_t, int64_t> outer_inner(const Shape& s, int64_t dim) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= s[d];
  for (int64_t d = dim + 1; d < s.rank(); ++d) inner *= s[d];
  return {outer, inner};
}

// On a GPU the kernels check instead (out of range: zeros, and the device's index flag, reported
// at the next synchronization naming op): reading the ids here would wait for the GPU.
void check_indices(const Tensor& index, int64_t limit, const char* op, int64_t dim, const Shape& shape) {
  if (index.is_cuda()) return;
  const int64_t* p = index.data<int64_t>();
  for (int64_t i = 0; i < index.numel(); ++i)
    TG_CHECK(p[i] >= 0 && p[i] < limit, op, "index {} is out of range for dimension {} of size {} (input shape {})",
             p[i], dim, limit, shape);
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape_in) {
  detail::check_defined(x, "reshape");
  Shape shape = shape_in;
  int64_t infer = -1, known = 1;
  for (int64_t i = 0; i < shape.rank(); ++i) {
    if (shape[i] == -1) {
      TG_CHECK(infer < 0, "reshape", "only one dimension can be -1, got {}", shape_in);
      infer = i;
    } else {
      TG_CHECK(shape[i] >= 0, "reshape", "invalid dimension {} in {}", shape[i], shape_in);
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    TG_CHECK(known != 0 && x.numel() % known == 0, "reshape", "cannot reshape {} ({} elements) into {}", x.shape(),
             x.numel(), shape_in);
    shape[infer] = x.numel() / known;
  }
  TG_CHECK(shape.numel() == x.numel(), "reshape", "cannot reshape {} ({} elements) into {} ({} elements)", x.shape(),
           x.numel(), shape_in, shape.numel());
  if (shape == x.shape()) return x;
  Tensor out = x.detach();
  out.impl().shape = shape;
  return record("reshape", out, {x}, [xs = x.shape()](const Tensor& g, const Node&) { return Grads{reshape(g, xs)}; });
}

Tensor flatten(const Tensor& x, int64_t start, int64_t end) {
  detail::check_defined(x, "flatten");
  if (x.dim() == 0) return reshape(x, {1});
  start = normalize_axis(start, x.dim(), "flatten");
  end = normalize_axis(end, x.dim(), "flatten");
  TG_CHECK(start <= end, "flatten", "start_dim {} is after end_dim {}", start, end);
  Shape s;
  for (int64_t d = 0; d < start; ++d) s.push_back(x.shape()[d]);
  int64_t m = 1;
  for (int64_t d = start; d <= end; ++d) m *= x.shape()[d];
  s.push_back(m);
  for (int64_t d = end + 1; d < x.dim(); ++d) s.push_back(x.shape()[d]);
  return reshape(x, s);
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  detail::check_defined(x, "squeeze");
  if (x.dim() == 0) return x;
  dim = normalize_axis(dim, x.dim(), "squeeze");
  if (x.shape()[dim] != 1) return x;
  Shape s = x.shape();
  s.erase(s.begin() + dim);
  return reshape(x, s);
}
Tensor squeeze(const Tensor& x) {
  Shape s;
  for (int64_t d : x.shape()) if (d != 1) s.push_back(d);
  return reshape(x, s);
}
Tensor unsqueeze(const Tensor& x, int64_t dim) {
  detail::check_defined(x, "unsqueeze");
  dim = normalize_axis(dim, x.dim() + 1, "unsqueeze");
  Shape s = x.shape();
  s.insert(s.begin() + dim, 1);
  return reshape(x, s);
}

Tensor permute(const Tensor& x, const Shape& order) {
  detail::check_defined(x, "permute");
  TG_CHECK(order.rank() == x.dim(), "permute", "order {} has {} entries for a tensor of rank {} (shape {})", order,
           order.rank(), x.dim(), x.shape());
  Shape ord(order.size()), inv(order.size());
  std::vector<bool> seen(order.size(), false);
  for (int64_t i = 0; i < order.rank(); ++i) {
    int64_t a = normalize_axis(order[i], x.dim(), "permute");
    TG_CHECK(!seen[a], "permute", "order {} repeats dimension {}", order, a);
    seen[a] = true;
    ord[i] = a;
    inv[a] = i;
  }
  bool identity = true;
  for (int64_t i = 0; i < ord.rank(); ++i) identity &= ord[i] == i;
  if (identity) return x;
  Shape out_shape(ord.size()), st(ord.size());
  Shape xs = contiguous_strides(x.shape());
  bool moves = false;  // whether dimensions longer than 1 change their order
  for (int64_t i = 0, last = -1; i < ord.rank(); ++i) {
    out_shape[i] = x.shape()[ord[i]];
    st[i] = xs[ord[i]];
    if (out_shape[i] > 1) {
      moves |= ord[i] < last;
      last = ord[i];
    }
  }
  // Only dimensions of length 1 move (a decoding step's [B, 1, heads, d] -> [B, heads, 1, d]): the
  // same bytes in the same order, so a view of them (a reshape), as PyTorch's permute always is.
  if (!moves) return reshape(x, out_shape);
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  copy_strided(x, out, st, 0, "permute");
  return record("permute", out, {x}, [inv](const Tensor& g, const Node&) { return Grads{permute(g, inv)}; });
}

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  detail::check_defined(x, "transpose");
  d0 = normalize_axis(d0, x.dim(), "transpose");
  d1 = normalize_axis(d1, x.dim(), "transpose");
  Shape order(static_cast<size_t>(x.dim()));
  for (int64_t i = 0; i < x.dim(); ++i) order[i] = i;
  std::swap(order[d0], order[d1]);
  return permute(x, order);
}

Tensor expand(const Tensor& x, const Shape& shape_in) {
  detail::check_defined(x, "expand");
  TG_CHECK(shape_in.rank() >= x.dim(), "expand", "cannot expand shape {} to the lower rank of {}", x.shape(), shape_in);
  Shape shape = shape_in, st(shape_in.size(), 0);
  Shape xs = contiguous_strides(x.shape());
  int64_t lead = shape.rank() - x.dim();
  for (int64_t i = 0; i < shape.rank(); ++i) {
    if (i < lead) {
      TG_CHECK(shape[i] >= 0, "expand", "invalid size {} in {}", shape[i], shape_in);
      continue;
    }
    int64_t have = x.shape()[i - lead];
    if (shape[i] == -1) shape[i] = have;
    TG_CHECK(have == shape[i] || have == 1, "expand", "cannot expand shape {} to {} (dimension {}: {} vs {})", x.shape(),
             shape_in, i, have, shape[i]);
    st[i] = have == 1 ? 0 : xs[i - lead];
  }
  if (shape == x.shape()) return x;
  Tensor out = Tensor::empty(shape, x.dtype(), x.device());
  copy_strided(x, out, st, 0, "expand");
  return record("expand", out, {x}, [xs = x.shape()](const Tensor& g, const Node&) { return Grads{sum_to(g, xs)}; });
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  detail::check_defined(x, "slice");
  TG_CHECK(x.dim() > 0, "slice", "cannot slice a scalar (rank 0)");
  dim = normalize_axis(dim, x.dim(), "slice");
  TG_CHECK(step >= 1, "slice", "step must be at least 1, got {}", step);
  const int64_t n = x.shape()[dim];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  int64_t len = (end - start + step - 1) / step;
  if (start == 0 && len == n && step == 1) return x;
  Shape s = x.shape();
  s[dim] = len;
  Shape st = contiguous_strides(x.shape());
  int64_t base = start * st[dim];
  st[dim] *= step;
  Tensor out = Tensor::empty(s, x.dtype(), x.device());
  copy_strided(x, out, st, base, "slice");
  return record("slice", out, {x}, [xs = x.shape(), dim, start, step](const Tensor& g, const Node&) {
    return Grads{slice_backward(g, xs, dim, start, step)};
  });
}

Tensor slice_backward(const Tensor& g, const Shape& shape, int64_t dim, int64_t start, int64_t step) {
  detail::check_float(g, "slice_backward");
  check_copy_rank(shape, "slice_backward");
  Tensor out = zeros(shape, g.dtype(), g.device());
  // Write g into out at the sliced positions: out is the strided side.
  Shape st = contiguous_strides(shape);
  int64_t base = start * st[dim];
  st[dim] *= step;
  if (g.is_cuda()) {
    TG_CHECK(shape.rank() <= cuda_ops::kMaxCopyRank, "slice_backward", "GPU copies take at most {} dimensions, got {}",
             cuda_ops::kMaxCopyRank, shape);
    cuda_ops::CopyArgs args;
    args.device = g.device().index;
    args.op = "slice_backward";
    args.elem_bytes = static_cast<int>(dtype_size(g.dtype()));
    args.rank = static_cast<int>(g.dim());
    for (int64_t d = 0; d < g.dim(); ++d) {
      args.size[d] = g.shape()[d];
      args.stride[d] = st[d];
    }
    args.src = detail::gpu_ptr(g);
    args.dst = static_cast<char*>(detail::gpu_ptr(out)) + base * args.elem_bytes;
    args.scatter = true;
    cuda_ops::strided_copy(args);
  } else {
    dispatch_float(g.dtype(), "slice_backward", [&](auto tag) {
      using T = decltype(tag);
      k::strided_scatter(g.data<T>(), out.data<T>() + base, g.shape().data(), st.data(), g.shape().rank());
    });
  }
  int64_t len = g.shape()[dim];
  return record("slice_backward", out, {g}, [dim, start, step, len](const Tensor& gg, const Node&) {
    return Grads{slice(gg, dim, start, start + (len - 1) * step + 1, step)};
  });
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  detail::check_defined(x, "narrow");
  dim = normalize_axis(dim, x.dim(), "narrow");
  int64_t n = x.shape()[dim];
  TG_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow",
           "start {} and length {} do not fit dimension {} of size {} (shape {})", start, length, dim, n, x.shape());
  return slice(x, dim, start, start + length, 1);
}

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  TG_CHECK(!xs.empty(), "concat", "expected at least one tensor");
  for (const Tensor& t : xs) detail::check_defined(t, "concat");
  const Tensor& first = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) {
    if (!(xs[i].device() == first.device())) {
      detail::fail("concat", "tensor {} is on {} and tensor 0 on {}; an op takes tensors on one device (move one "
                   "with .to(device))", i, xs[i].device(), first.device());
    }
  }
  TG_CHECK(first.dim() > 0, "concat", "cannot concatenate scalars (rank 0); use stack");
  dim = normalize_axis(dim, first.dim(), "concat");
  Shape s = first.shape();
  s[dim] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& t = xs[i];
    TG_CHECK(t.dtype() == first.dtype(), "concat", "tensor {} has dtype {}, tensor 0 has {}", i, t.dtype(), first.dtype());
    bool ok = t.dim() == first.dim();
    for (int64_t d = 0; ok && d < t.dim(); ++d) ok = d == dim || t.shape()[d] == first.shape()[d];
    TG_CHECK(ok, "concat", "tensor {} has shape {}, which does not match {} outside dimension {}", i, t.shape(),
             first.shape(), dim);
    s[dim] += t.shape()[dim];
  }
  Tensor out = Tensor::empty(s, first.dtype(), first.device());
  const std::pair<int64_t, int64_t> oi = outer_inner(s, dim);
  const int64_t outer = oi.first, inner = oi.second;
  const size_t es = dtype_size(first.dtype());
  const int64_t out_row = s[dim] * inner;
  int64_t off = 0;
  std::vector<int64_t> sizes;
  for (const Tensor& t : xs) {
    const int64_t row = t.shape()[dim] * inner;
    if (t.is_cuda()) {  // rows of `row` elements into a pitch of out_row
      cuda_rt::copy_rows_on_device(t.device().index, static_cast<char*>(detail::gpu_ptr(out)) + off * es,
                                   static_cast<size_t>(out_row) * es, detail::gpu_ptr(t), static_cast<size_t>(row) * es,
                                   static_cast<size_t>(row) * es, static_cast<size_t>(outer), "concat");
      off += row;
      sizes.push_back(t.shape()[dim]);
      continue;
    }
    const char* src = static_cast<const char*>(t.raw_data());
    char* dst = static_cast<char*>(out.raw_data());
    k::parallel_for(0, outer, std::max<int64_t>(1, k::kParallelGrain / std::max<int64_t>(row, 1)), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o)
        std::memcpy(dst + (o * out_row + off) * es, src + o * row * es, static_cast<size_t>(row) * es);
    });
    off += row;
    sizes.push_back(t.shape()[dim]);
  }
  if (!is_floating(first.dtype())) return out;
  return record("concat", out, xs, [dim, sizes](const Tensor& g, const Node& n) {
    Grads gs;
    int64_t start = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      gs.push_back(n.needs(i) ? narrow(g, dim, start, sizes[i]) : Tensor());
      start += sizes[i];
    }
    return gs;
  });
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  TG_CHECK(!xs.empty(), "stack", "expected at least one tensor");
  for (size_t i = 0; i < xs.size(); ++i) TG_CHECK(xs[i].defined(), "stack", "tensor {} is an undefined tensor", i);
  for (size_t i = 1; i < xs.size(); ++i) {
    TG_CHECK(xs[i].shape() == xs[0].shape(), "stack", "tensor {} has shape {}, tensor 0 has {}", i, xs[i].shape(),
             xs[0].shape());
    TG_CHECK(xs[i].dtype() == xs[0].dtype(), "stack", "tensor {} has dtype {}, tensor 0 has {}", i, xs[i].dtype(), xs[0].dtype());
  }
  dim = normalize_axis(dim, xs[0].dim() + 1, "stack");
  std::vector<Tensor> us;
  us.reserve(xs.size());
  for (const Tensor& t : xs) us.push_back(unsqueeze(t, dim));
  return concat(us, dim);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  detail::check_defined(x, "split");
  dim = normalize_axis(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    TG_CHECK(s >= 0, "split", "negative section size {}", s);
    total += s;
  }
  TG_CHECK(total == x.shape()[dim], "split", "sizes add up to {}, but dimension {} has size {} (shape {})", total, dim,
           x.shape()[dim], x.shape());
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(narrow(x, dim, start, s));
    start += s;
  }
  return out;
}
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  detail::check_defined(x, "split");
  TG_CHECK(split_size > 0, "split", "split_size must be positive, got {}", split_size);
  dim = normalize_axis(dim, x.dim(), "split");
  std::vector<int64_t> sizes;
  for (int64_t left = x.shape()[dim]; left > 0; left -= split_size) sizes.push_back(std::min(left, split_size));
  return split(x, sizes, dim);
}
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  TG_CHECK(chunks > 0, "chunk", "number of chunks must be positive, got {}", chunks);
  detail::check_defined(x, "chunk");
  int64_t n = x.shape()[normalize_axis(dim, x.dim(), "chunk")];
  return split(x, std::max<int64_t>(1, (n + chunks - 1) / chunks), dim);
}

// ---- Indexing ------------------------------------------------------------------------------

namespace {
Tensor index_select_as(const char* op, const Tensor& x, int64_t dim, const Tensor& index) {
  detail::check_defined(x, op);
  detail::check_index(index, op);
  detail::check_same_device(op, x, "input", index, "index");
  TG_CHECK(index.dim() <= 1, op, "index must be 1-D, got shape {}", index.shape());
  TG_CHECK(x.dim() > 0, op, "cannot index a scalar (rank 0)");
  dim = normalize_axis(dim, x.dim(), op);
  check_indices(index, x.shape()[dim], op, dim, x.shape());
  Shape s = x.shape();
  s[dim] = index.numel();
  Tensor out = Tensor::empty(s, x.dtype(), x.device());
  const std::pair<int64_t, int64_t> oi = outer_inner(x.shape(), dim);
  const int64_t outer = oi.first, inner = oi.second;
  if (x.is_cuda()) {
    cuda_ops::IndexSelectArgs args;
    args.device = x.device().index;
    args.op = op;
    args.elem_bytes = static_cast<int>(dtype_size(x.dtype()));
    args.src = detail::gpu_ptr(x);
    args.dst = detail::gpu_ptr(out);
    args.index = static_cast<const int64_t*>(detail::gpu_ptr(index));
    args.n = index.numel();
    args.outer = outer;
    args.R = x.shape()[dim];
    args.inner = inner;
    cuda_ops::index_select(args);
    return out;
  }
  const int64_t* idx = index.data<int64_t>();
  const int64_t n = index.numel(), R = x.shape()[dim];
  const size_t es = dtype_size(x.dtype());
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  k::parallel_for(0, outer * n, std::max<int64_t>(1, k::kParallelGrain / std::max<int64_t>(inner, 1)), [&](int64_t a, int64_t b) {
    for (int64_t t = a; t < b; ++t) {
      int64_t o = t / n, i = t % n;
      std::memcpy(dst + t * inner * es, src + (o * R + idx[i]) * inner * es, static_cast<size_t>(inner) * es);
    }
  });
  return out;
}
}  // namespace

namespace {
// dst[o, index[k], :] += alpha src[o, k, :] on a GPU (ops/cuda/shape.h): a column a thread, in index
// order (the CPU's sums), an index out of range reported at the next synchronization.
void gpu_index_add(const char* op, const Tensor& dst, const Tensor& src, const Tensor& index, int64_t outer, int64_t R,
                   int64_t inner, double alpha) {
  dispatch_float(src.dtype(), op, [](auto) {});
  cuda_ops::ScatterAddArgs a;
  a.device = src.device().index;
  a.op = op;
  a.type = detail::gpu_scalar(src.dtype());
  a.outer = outer;
  a.n = index.numel();
  a.inner = inner;
  a.R = R;
  a.index = static_cast<const int64_t*>(detail::gpu_ptr(index));
  a.src = detail::gpu_ptr(src);
  a.dst = detail::gpu_ptr(dst);
  a.alpha = alpha;
  // Many positions: sorted by row first, which needs scratch memory (freed when the launch is queued:
  // the allocator hands it out again only to later work on the same stream).
  Tensor scratch;
  if (const size_t bytes = cuda_ops::index_add_scratch_bytes(a.n, R); bytes > 0) {
    scratch = Tensor::empty({static_cast<int64_t>((bytes + 7) / 8)}, kInt64, src.device());
    a.scratch = detail::gpu_ptr(scratch);
  }
  cuda_ops::scatter_add(a);
}
}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor out = index_select_as("index_select", x, dim, index);
  dim = normalize_axis(dim, x.dim(), "index_select");
  return record("index_select", out, {x}, [xs = x.shape(), dim, index](const Tensor& g, const Node&) {
    // A bfloat16 table's gradient is summed in float32 and rounded once.
    if (g.dtype() == kBFloat16) return Grads{to(index_add(xs, dim, index, to(g, kFloat32)), kBFloat16)};
    return Grads{index_add(xs, dim, index, g)};
  });
}

Tensor index_add(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_float(src, "index_add");
  detail::check_index(index, "index_add");
  dim = normalize_axis(dim, shape.rank(), "index_add");
  TG_CHECK(index.dim() <= 1, "index_add", "index must be 1-D, got shape {}", index.shape());
  Shape want = shape;
  want[dim] = index.numel();
  TG_CHECK(src.shape() == want, "index_add", "source has shape {}, expected {}", src.shape(), want);
  check_indices(index, shape[dim], "index_add", dim, shape);
  detail::check_same_device("index_add", src, "source", index, "index");
  Tensor out = zeros(shape, src.dtype(), src.device());
  const std::pair<int64_t, int64_t> oi = outer_inner(shape, dim);
  const int64_t outer = oi.first, inner = oi.second;
  const auto backward = [dim, index](const Tensor& g, const Node&) { return Grads{index_select(g, dim, index)}; };
  if (src.is_cuda()) {
    gpu_index_add("index_add", out, src, index, outer, shape[dim], inner, 1.0);
    return record("index_add", out, {src}, backward);
  }
  const int64_t* idx = index.data<int64_t>();
  const int64_t n = index.numel(), R = shape[dim];
  dispatch_float(src.dtype(), "index_add", [&](auto tag) {
    using T = decltype(tag);
    const T* ps = src.data<T>();
    T* po = out.data<T>();
    // Parallel over outer only: rows of one outer slice are added in index order by one thread.
    k::parallel_for(0, outer, std::max<int64_t>(1, k::kParallelGrain / std::max<int64_t>(n * inner, 1)), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o)
        for (int64_t i = 0; i < n; ++i)
          k::binary_run(po + (o * R + idx[i]) * inner, 1, ps + (o * n + i) * inner, 1,
                        po + (o * R + idx[i]) * inner, inner, k::Add{});
    });
  });
  return record("index_add", out, {src}, backward);
}

void index_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, double alpha) {
  detail::check_float(self, "index_add_");
  TG_CHECK(!(self.requires_grad() && grad_enabled()), "index_add_",
           "in-place update of a tensor that requires grad (shape {}) while recording: use NoGradGuard", self.shape());
  TG_CHECK(self.is_leaf(), "index_add_", "in-place update of a tensor produced by '{}' would corrupt its graph",
           self.grad_fn_name());
  TG_CHECK(src.dtype() == self.dtype(), "index_add_", "source dtype {} differs from the target's {}", src.dtype(),
           self.dtype());
  detail::check_index(index, "index_add_");
  self.impl().storage->bump_version();  // values derived from the data (autocast's copies, packs) are stale
  dim = normalize_axis(dim, self.dim(), "index_add_");
  TG_CHECK(index.dim() <= 1, "index_add_", "index must be 1-D, got shape {}", index.shape());
  Shape want = self.shape();
  want[dim] = index.numel();
  TG_CHECK(src.shape() == want, "index_add_", "source has shape {}, expected {}", src.shape(), want);
  check_indices(index, self.shape()[dim], "index_add_", dim, self.shape());
  const std::pair<int64_t, int64_t> oi = outer_inner(self.shape(), dim);
  const int64_t outer = oi.first, inner = oi.second;
  detail::check_same_device("index_add_", self, "self", src, "source");
  detail::check_same_device("index_add_", self, "self", index, "index");
  if (self.is_cuda()) {
    gpu_index_add("index_add_", self, src, index, outer, self.shape()[dim], inner, alpha);
    return;
  }
  const int64_t* idx = index.data<int64_t>();
  const int64_t n = index.numel(), R = self.shape()[dim];
  dispatch_float(src.dtype(), "index_add_", [&](auto tag) {
    using T = decltype(tag);
    const T* ps = src.data<T>();
    T* po = self.data<T>();
    const T a = static_cast<T>(alpha);
    // Rows are added in index order (a repeated index accumulates), so results are deterministic.
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < n; ++i) k::axpy(a, ps + (o * n + i) * inner, po + (o * R + idx[i]) * inner, inner);
  });
}

namespace {
// Calls f(index_offset, x_offset) for every element of index, where x_offset addresses the
// element of a tensor of shape xs at the index's coordinates with dim replaced by the index.
template <class F>
void for_each_gathered(const Shape& xs, int64_t dim, const Tensor& index, const char* op, F f) {
  const Shape& is = index.shape();
  TG_CHECK(is.rank() == xs.rank(), op, "index has rank {} but the input has rank {} (shapes {} and {})", is.rank(),
           xs.rank(), is, xs);
  for (int64_t d = 0; d < xs.rank(); ++d)
    TG_CHECK(d == dim || is[d] <= xs[d], op, "index shape {} exceeds input shape {} in dimension {}", is, xs, d);
  check_indices(index, xs[dim], op, dim, xs);
  Shape st = contiguous_strides(xs);
  const int64_t* p = index.data<int64_t>();
  const int64_t nd = is.rank();
  int64_t idx[16] = {0};
  int64_t base = 0;  // offset of the coordinates, without dim
  for (int64_t i = 0; i < index.numel(); ++i) {
    f(i, base + p[i] * st[dim]);
    for (int64_t d = nd - 1; d >= 0; --d) {
      ++idx[d];
      if (d != dim) base += st[d];
      if (idx[d] < is[d]) break;
      if (d != dim) base -= is[d] * st[d];
      idx[d] = 0;
    }
  }
}
}  // namespace

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  detail::check_float(x, "gather");
  detail::check_index(index, "gather");
  TG_CHECK(x.dim() > 0, "gather", "cannot gather from a scalar (rank 0)");
  dim = normalize_axis(dim, x.dim(), "gather");
  detail::check_same_device("gather", x, "input", index, "index");
  if (x.is_cuda()) {
    const Shape& is = index.shape();
    TG_CHECK(is.rank() == x.dim(), "gather", "index has rank {} but the input has rank {} (shapes {} and {})", is.rank(),
             x.dim(), is, x.shape());
    for (int64_t d = 0; d < x.dim(); ++d)
      TG_CHECK(d == dim || is[d] <= x.shape()[d], "gather", "index shape {} exceeds input shape {} in dimension {}", is,
               x.shape(), d);
    TG_CHECK(is.rank() <= cuda_ops::kMaxCopyRank, "gather", "GPU gathers take at most {} dimensions, got {}",
             cuda_ops::kMaxCopyRank, is);
    dispatch_float(x.dtype(), "gather", [](auto) {});
    Tensor out = Tensor::empty(is, x.dtype(), x.device());
    const Shape st = contiguous_strides(x.shape());
    cuda_ops::GatherArgs args;
    args.device = x.device().index;
    args.op = "gather";
    args.elem_bytes = static_cast<int>(dtype_size(x.dtype()));
    args.rank = static_cast<int>(is.rank());
    args.dim = static_cast<int>(dim);
    for (int64_t d = 0; d < is.rank(); ++d) {
      args.index_size[d] = is[d];
      args.src_stride[d] = st[d];
    }
    args.limit = x.shape()[dim];
    args.src = detail::gpu_ptr(x);
    args.dst = detail::gpu_ptr(out);
    args.index = static_cast<const int64_t*>(detail::gpu_ptr(index));
    cuda_ops::gather(args);
    return record("gather", out, {x}, [xs = x.shape(), dim, index](const Tensor& g, const Node&) {
      return Grads{scatter_add(xs, dim, index, g)};
    });
  }
  Tensor out = Tensor::empty(index.shape(), x.dtype());
  dispatch_float(x.dtype(), "gather", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    for_each_gathered(x.shape(), dim, index, "gather", [&](int64_t i, int64_t xo) { po[i] = px[xo]; });
  });
  return record("gather", out, {x}, [xs = x.shape(), dim, index](const Tensor& g, const Node&) {
    return Grads{scatter_add(xs, dim, index, g)};
  });
}

Tensor scatter_add(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_float(src, "scatter_add");
  detail::check_index(index, "scatter_add");
  dim = normalize_axis(dim, shape.rank(), "scatter_add");
  TG_CHECK(src.shape() == index.shape(), "scatter_add", "source shape {} differs from index shape {}", src.shape(),
           index.shape());
  detail::check_same_device("scatter_add", src, "source", index, "index");
  Tensor out = zeros(shape, src.dtype(), src.device());
  if (src.is_cuda()) {  // index checked by the kernel (reported at the next synchronization)
    const Shape& is = index.shape();
    TG_CHECK(is.rank() == shape.rank(), "scatter_add", "index has rank {} but the output has rank {} (shapes {} and {})",
             is.rank(), shape.rank(), is, shape);
    for (int64_t d = 0; d < shape.rank(); ++d)
      TG_CHECK(d == dim || is[d] <= shape[d], "scatter_add", "index shape {} exceeds output shape {} in dimension {}", is,
               shape, d);
    TG_CHECK(is.rank() <= cuda_ops::kMaxCopyRank, "scatter_add", "GPU scatters take at most {} dimensions, got {}",
             cuda_ops::kMaxCopyRank, is);
    dispatch_float(src.dtype(), "scatter_add", [](auto) {});
    const Shape st = contiguous_strides(shape);
    cuda_ops::ScatterAddArgs a;
    a.device = src.device().index;
    a.op = "scatter_add";
    a.type = detail::gpu_scalar(src.dtype());
    a.rank = static_cast<int>(is.rank());
    a.dim = static_cast<int>(dim);
    for (int64_t d = 0; d < is.rank(); ++d) {
      a.size[d] = is[d];
      a.dst_stride[d] = st[d];
    }
    a.R = shape[dim];
    a.index = static_cast<const int64_t*>(detail::gpu_ptr(index));
    a.src = detail::gpu_ptr(src);
    a.dst = detail::gpu_ptr(out);
    cuda_ops::scatter_add(a);
  } else {
    dispatch_float(src.dtype(), "scatter_add", [&](auto tag) {
      using T = decltype(tag);
      const T* ps = src.data<T>();
      T* po = out.data<T>();
      for_each_gathered(shape, dim, index, "scatter_add", [&](int64_t i, int64_t xo) { po[xo] += ps[i]; });
    });
  }
  return record("scatter_add", out, {src}, [dim, index](const Tensor& g, const Node&) {
    return Grads{gather(g, dim, index)};
  });
}

Tensor embedding(const Tensor& weight, const Tensor& ids, int64_t padding_idx) {
  detail::check_float(weight, "embedding");
  detail::check_index(ids, "embedding");
  TG_CHECK(weight.dim() == 2, "embedding", "weight must be 2-D [num_embeddings, dim], got shape {}", weight.shape());
  TG_CHECK(padding_idx < weight.shape()[0], "embedding", "padding_idx {} is out of range for {} embeddings",
           padding_idx, weight.shape()[0]);
  const int64_t num = weight.shape()[0];
  detail::check_same_device("embedding", weight, "weight", ids, "ids");
  if (weight.is_cuda()) {  // the kernel checks the ids (reported at the next synchronization)
    Shape s = ids.shape();
    s.push_back(weight.shape()[1]);
    Tensor flat_ids = ids.dim() == 1 ? ids : ids.reshape({ids.numel()});
    Tensor rows = index_select_as("embedding", weight.detach(), 0, flat_ids);
    rows = record("embedding", rows, {weight}, [num, flat_ids, padding_idx](const Tensor& g, const Node&) {
      Tensor gg = g.dtype() == kBFloat16 ? to(g, kFloat32) : g;
      if (padding_idx >= 0) gg = masked_fill(gg, eq(flat_ids, static_cast<double>(padding_idx)).reshape({flat_ids.numel(), 1}), 0.0);
      Tensor gw = index_add({num, g.shape()[1]}, 0, flat_ids, gg);
      return Grads{g.dtype() == kBFloat16 ? to(gw, kBFloat16) : gw};
    });
    return reshape(rows, s);
  }
  const int64_t* pid = ids.data<int64_t>();
  for (int64_t i = 0, n = ids.numel(); i < n; ++i)
    TG_CHECK(pid[i] >= 0 && pid[i] < num, "embedding", "id {} (at {} of ids shape {}) is out of range for {} embeddings",
             pid[i], i, ids.shape(), num);
  Shape s = ids.shape();
  s.push_back(weight.shape()[1]);
  Tensor flat_ids = ids.dim() == 1 ? ids : ids.reshape({ids.numel()});
  if (padding_idx < 0 || !weight.requires_grad() || !grad_enabled()) return reshape(index_select(weight, 0, flat_ids), s);
  // The padding row is read like any other but receives no gradient: where padding was looked
  // up, the output takes a detached copy of the row, cut from the graph.
  Tensor rows = index_select(weight, 0, flat_ids);
  Tensor keep = ne(flat_ids, static_cast<double>(padding_idx)).reshape({flat_ids.numel(), 1});
  return reshape(where(keep, rows, rows.detach()), s);
}

// Tensor convenience forms.
Tensor Tensor::reshape(const Shape& s) const { return tg::reshape(*this, s); }
Tensor Tensor::view(const Shape& s) const { return tg::reshape(*this, s); }
Tensor Tensor::flatten() const { return tg::flatten(*this); }
Tensor Tensor::permute(const Shape& o) const { return tg::permute(*this, o); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return tg::transpose(*this, a, b); }
Tensor Tensor::t() const {
  TG_CHECK(dim() <= 2, "t", "expects a tensor of rank <= 2, got shape {}", shape());
  return dim() < 2 ? *this : tg::transpose(*this, 0, 1);
}
Tensor Tensor::squeeze(int64_t d) const { return tg::squeeze(*this, d); }
Tensor Tensor::unsqueeze(int64_t d) const { return tg::unsqueeze(*this, d); }
Tensor Tensor::expand(const Shape& s) const { return tg::expand(*this, s); }
Tensor Tensor::slice(int64_t d, int64_t s, int64_t e, int64_t st) const { return tg::slice(*this, d, s, e, st); }
Tensor Tensor::narrow(int64_t d, int64_t s, int64_t l) const { return tg::narrow(*this, d, s, l); }

}  // namespace tg
