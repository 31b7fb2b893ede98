#include "ops/broadcast.h"

#include <algorithm>

#include "ops/op_util.h"

namespace tg {

void detail::fail_two_devices(const char* op, const char* a_name, Device a, const char* b_name, Device b) {
  fail(op, "the {} is on {} and the {} on {}; an op takes tensors on one device (move one with .to(device))", a_name,
       a, b_name, b);
}

cuda_ops::StridedPlan detail::gpu_plan(const char* op, const Shape& out, std::initializer_list<Shape> inputs) {
  const int64_t* shapes[cuda_ops::StridedPlan::kMaxInputs] = {};
  int ranks[cuda_ops::StridedPlan::kMaxInputs] = {};
  int n = 0;
  for (const Shape& s : inputs) {
    shapes[n] = s.data();
    ranks[n] = static_cast<int>(s.rank());
    ++n;
  }
  cuda_ops::StridedPlan p;
  TG_CHECK(cuda_ops::make_strided_plan(static_cast<int>(out.rank()), out.data(), n, shapes, ranks, &p), op,
           "broadcasting to shape {} leaves more than {} dimensions for the GPU kernel; reshape the inputs to fewer",
           out, cuda_ops::StridedPlan::kMaxDims);
  return p;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  int64_t r = std::max(a.rank(), b.rank());
  Shape out(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.rank() ? 1 : a[i - (r - a.rank())];
    int64_t db = i < r - b.rank() ? 1 : b[i - (r - b.rank())];
    TG_CHECK(da == db || da == 1 || db == 1, op,
             "shapes {} and {} cannot be broadcast together (dimension {}: {} vs {})", a, b, i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

BroadcastPlan make_broadcast_plan(const Shape& out, std::initializer_list<Shape> inputs) {
  BroadcastPlan p;
  p.n_in = static_cast<int>(inputs.size());
  const int64_t r = out.rank();
  TG_CHECK(r <= 16, "broadcast", "tensors of rank {} are not supported (at most 16 dimensions)", r);
  // Per-input strides in the output's index space (0 where broadcast).
  SmallVector<Shape, 3> st;
  for (const Shape& s : inputs) {
    Shape cs = contiguous_strides(s);
    Shape full(static_cast<size_t>(r), 0);
    for (int64_t i = 0; i < s.rank(); ++i) {
      int64_t oi = i + (r - s.rank());
      full[oi] = s[i] == 1 ? 0 : cs[i];
    }
    st.push_back(full);
  }
  // Merge adjacent dims where every input is contiguous across them; drop size-1 dims.
  Shape sizes;
  SmallVector<Shape, 3> mst(st.size());
  for (int64_t d = 0; d < r; ++d) {
    if (out[d] == 1) continue;
    bool merge = !sizes.empty();
    for (size_t k = 0; merge && k < st.size(); ++k)
      if (mst[k].back() != st[k][d] * out[d]) merge = false;
    if (merge) {
      sizes.back() *= out[d];
      for (size_t k = 0; k < st.size(); ++k) mst[k].back() = st[k][d];
    } else {
      sizes.push_back(out[d]);
      for (size_t k = 0; k < st.size(); ++k) mst[k].push_back(st[k][d]);
    }
  }
  if (sizes.empty()) {  // a single element (or an empty output)
    p.inner = out.numel();
    for (int k = 0; k < p.n_in; ++k) p.inner_stride[k] = 0;
    p.rows = 1;
    return p;
  }
  // The innermost merged dim is the run when every input's stride there is 0 or 1.
  bool unit = true;
  for (size_t k = 0; k < st.size(); ++k) unit &= (mst[k].back() == 0 || mst[k].back() == 1);
  if (unit) {
    p.inner = sizes.back();
    for (int k = 0; k < p.n_in; ++k) {
      p.inner_stride[k] = mst[k].back();
      mst[k].pop_back();
    }
    sizes.pop_back();
  } else {
    p.inner = 1;
  }
  p.outer = sizes;
  for (int k = 0; k < p.n_in; ++k) p.outer_strides[k] = mst[k];
  p.rows = sizes.numel();
  if (out.numel() == 0) p.rows = 0;
  return p;
}

}  // namespace tg
