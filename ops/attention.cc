// Attention: the fused flash-attention op and its unfused reference.
#include "ops/attention.h"

#include <cmath>
#include <limits>

#include "graph/factory.h"
#include "ops/autocast.h"
#include "ops/autocast_internal.h"
#include "ops/cuda/attention.h"
#include "ops/dropout_internal.h"
#include "ops/elementwise.h"
#include "ops/kernels/attention.h"
#include "ops/matmul.h"
#include "ops/nn.h"
#include "ops/kernels/rope.h"
#include "ops/op_util.h"
#include "ops/reduce.h"
#include "ops/shape_ops.h"

namespace tg {
namespace k = kernels;
namespace {

struct Dims {
  Shape lead;  // leading (batch) dims of q
  int64_t n = 1, T = 0, S = 0, d = 0, dv = 0;
  int64_t rows = 0;   // k's and v's rows per head (S, or more when kv_length leaves some unread)
  int64_t group = 1;  // query heads per key/value head (grouped-query attention): q index n reads k, v index n / group
  // AttentionLayout::kTokensFirst: heads interleaved per row, H for q and the output, H_kv for k and
  // v (cuda_ops::head_row_offset); 1 for kHeadsFirst. The other fields describe the [B, H, T, d] view.
  int64_t q_heads = 1, kv_heads = 1;
};

// kTokensFirst [B, T, H, d] <-> kHeadsFirst [B, H, T, d]: one permutation, its own inverse.
const Shape kSwapTokensHeads{0, 2, 1, 3};
Shape heads_first_shape(const Shape& s) { return Shape{s[0], s[2], s[1], s[3]}; }
AttentionOptions as_heads_first(AttentionOptions o) {
  o.layout = AttentionLayout::kHeadsFirst;
  return o;
}

Dims check_attention(const char* op, const Tensor& q_, const Tensor& kk_, const Tensor& v_, const AttentionOptions& o) {
  detail::check_float(q_, op);
  detail::check_float(kk_, op);
  detail::check_float(v_, op);
  const bool tokens_first = o.layout == AttentionLayout::kTokensFirst;
  if (tokens_first)
    TG_CHECK(q_.dim() == 4 && kk_.dim() == 4 && v_.dim() == 4, op,
             "AttentionLayout::kTokensFirst takes q [B, T, H, d], k [B, S, H_kv, d] and v [B, S, H_kv, dv]; got shapes "
             "{}, {} and {}", q_.shape(), kk_.shape(), v_.shape());
  // Checked as [B, H, T, d] (the shapes in messages are the view's)
  struct View {
    Shape s;
    int64_t dim() const { return s.rank(); }
    const Shape& shape() const { return s; }
    int64_t size(int64_t i) const { return s[i < 0 ? s.rank() + i : i]; }
  };
  const View q{tokens_first ? heads_first_shape(q_.shape()) : q_.shape()},
      kk{tokens_first ? heads_first_shape(kk_.shape()) : kk_.shape()},
      v{tokens_first ? heads_first_shape(v_.shape()) : v_.shape()};
  TG_CHECK(q.dim() >= 2 && kk.dim() == q.dim() && v.dim() == q.dim(), op,
           "q, k and v must have the same rank >= 2 ([..., T, d]); got shapes {}, {} and {}", q.shape(), kk.shape(),
           v.shape());
  TG_CHECK(q_.dtype() == kk_.dtype() && q_.dtype() == v_.dtype(), op, "q, k and v have dtypes {}, {} and {}", q_.dtype(),
           kk_.dtype(), v_.dtype());
  Dims dm;
  dm.lead = Shape(q.shape().begin(), q.shape().end() - 2);
  const Shape klead(kk.shape().begin(), kk.shape().end() - 2);
  TG_CHECK(Shape(v.shape().begin(), v.shape().end() - 2) == klead, op,
           "k and v must share their leading dims; got shapes {} and {}", kk.shape(), v.shape());
  if (klead != dm.lead) {
    // Grouped-query attention: fewer key/value heads (the last leading dim) than query heads.
    const int64_t r = dm.lead.rank();
    bool grouped = r >= 1 && klead.rank() == r && klead[r - 1] > 0 && dm.lead[r - 1] % klead[r - 1] == 0;
    for (int64_t i = 0; grouped && i + 1 < r; ++i) grouped = klead[i] == dm.lead[i];
    TG_CHECK(grouped, op,
             "q, k and v must share their leading dims, except that k and v may have fewer heads (dim -3) when the "
             "query heads are a multiple of them; got shapes {}, {} and {}", q.shape(), kk.shape(), v.shape());
    dm.group = dm.lead[r - 1] / klead[r - 1];
  }
  dm.n = dm.lead.numel();
  dm.T = q.size(-2);
  dm.d = q.size(-1);
  dm.S = kk.size(-2);
  dm.dv = v.size(-1);
  dm.rows = dm.S;
  TG_CHECK(kk.size(-1) == dm.d, op, "q has head size {} but k has {} (shapes {} and {})", dm.d, kk.size(-1), q.shape(),
           kk.shape());
  TG_CHECK(v.size(-2) == dm.S, op, "k has {} keys but v has {} values (shapes {} and {})", dm.S, v.size(-2), kk.shape(),
           v.shape());
  TG_CHECK(dm.d > 0, op, "head size must be positive (q shape {})", q.shape());
  TG_CHECK(o.kv_length >= 0 && o.kv_length <= dm.S, op, "kv_length must be in [0, {}] (k's keys), got {}", dm.S,
           o.kv_length);
  if (o.kv_length > 0) dm.S = o.kv_length;
  TG_CHECK(o.causal_offset >= 0, op, "causal_offset must be >= 0, got {}", o.causal_offset);
  TG_CHECK(o.dropout >= 0 && o.dropout < 1, op, "dropout must be in [0, 1), got {}", o.dropout);
  if (o.mask.defined()) {
    TG_CHECK(o.mask.dtype() == kBool, op, "mask must be bool (true = hidden), got {} of shape {}", o.mask.dtype(),
             o.mask.shape());
    Shape full = dm.lead;
    full.push_back(dm.T);
    full.push_back(dm.S);
    bool fits = o.mask.dim() <= full.rank();
    for (int64_t i = 1; fits && i <= o.mask.dim(); ++i) {
      int64_t m = o.mask.shape()[o.mask.dim() - i];
      fits = m == 1 || m == full[full.rank() - i];
    }
    TG_CHECK(fits, op, "mask of shape {} does not broadcast to the scores' shape {} ([..., T, S])", o.mask.shape(), full);
  }
  if (tokens_first) {
    dm.q_heads = q.size(1);
    dm.kv_heads = kk.size(1);
  }
  return dm;
}

double scale_of(const AttentionOptions& o, int64_t d) { return o.scale != 0 ? o.scale : 1.0 / std::sqrt(double(d)); }

// A call's dropout on its weights: the keys dropout() would draw for weights [lead..., T, S].
struct AttnDrop {
  bool on = false;
  detail::DropoutKeys keys;
  uint32_t threshold = 0;
  double scale = 1;
};
AttnDrop attention_dropout(const AttentionOptions& o, const Dims& dm, const Device& device) {
  AttnDrop d;
  if (o.dropout <= 0) return d;
  Shape weights = dm.lead;
  weights.push_back(dm.T);
  weights.push_back(dm.S);
  d.on = true;
  d.keys = detail::dropout_keys(weights, device);
  d.threshold = detail::dropout_threshold(o.dropout);
  d.scale = 1.0 / (1.0 - o.dropout);
  return d;
}
// Head n's part of it for the CPU kernels.
k::AttnDropout cpu_dropout(const AttnDrop& d, const Dims& dm, int64_t n) {
  k::AttnDropout a;
  if (!d.on) return a;
  a.on = true;
  a.thr31 = static_cast<int32_t>(d.threshold >> 1);
  a.scale = d.scale;
  a.key = d.keys.key;
  a.first = n * dm.T * dm.S;
  a.row_len = dm.S;
  a.row_keys = d.keys.rows ? d.keys.rows->data() + n * dm.T : nullptr;
  return a;
}

// flash_attention's arguments on a GPU (ops/cuda/attention.h): q, k, v (and the mask) on one device.
cuda_ops::AttentionArgs gpu_attention_args(const Tensor& q, const Tensor& kk, const Tensor& v, const Tensor& out,
                                           const Tensor& lse, const AttentionOptions& o, const Dims& dm, double scale,
                                           const AttnDrop& drop) {
  const char* op = "flash_attention";
  detail::check_same_device(op, q, "q", kk, "k");
  detail::check_same_device(op, q, "q", v, "v");
  if (o.mask.defined()) detail::check_same_device(op, q, "q", o.mask, "mask");
  if (q.dtype() != kBFloat16) dispatch_float(q.dtype(), op, [](auto) {});  // (bfloat16: the tensor-core kernel)
  TG_CHECK(dm.d <= cuda_ops::kMaxHeadSize && dm.dv <= cuda_ops::kMaxHeadSize, op,
           "head sizes up to {} run on the GPU, got {} and {} (q shape {}, v shape {})", cuda_ops::kMaxHeadSize, dm.d,
           dm.dv, q.shape(), v.shape());
  TG_CHECK(dm.lead.rank() <= cuda_ops::kMaxLeadRank, op, "at most {} leading dimensions on the GPU, got shape {}",
           cuda_ops::kMaxLeadRank, q.shape());
  cuda_ops::AttentionArgs a;
  a.device = q.device().index;
  a.op = op;
  a.type = detail::gpu_scalar(q.dtype());
  a.q = detail::gpu_ptr(q);
  a.k = detail::gpu_ptr(kk);
  a.v = detail::gpu_ptr(v);
  a.out = detail::gpu_ptr(out);
  a.lse = detail::gpu_ptr(lse);
  a.n = dm.n;
  a.T = dm.T;
  a.S = dm.S;
  a.rows = dm.rows;
  a.d = dm.d;
  a.dv = dm.dv;
  a.group = dm.group;
  a.q_heads = dm.q_heads;
  a.kv_heads = dm.kv_heads;
  a.scale = scale;
  a.causal = o.causal;
  a.causal_offset = o.causal_offset;
  if (o.mask.defined()) {  // the mask's strides, right-aligned to [lead..., T, S] (0 where it broadcasts)
    const int64_t r = dm.lead.rank() + 2;
    Shape ms(static_cast<size_t>(r), 1);
    for (int64_t i = 0; i < o.mask.dim(); ++i) ms[r - o.mask.dim() + i] = o.mask.shape()[i];
    Shape st = contiguous_strides(ms);
    for (int64_t i = 0; i < r; ++i)
      if (ms[i] == 1) st[i] = 0;
    a.mask = static_cast<const bool*>(detail::gpu_ptr(o.mask));
    a.lead_rank = static_cast<int>(dm.lead.rank());
    for (int64_t i = 0; i < dm.lead.rank(); ++i) {
      a.lead[i] = dm.lead[i];
      a.mask_lead_stride[i] = st[i];
    }
    a.mask_row = st[r - 2];
    a.mask_col = st[r - 1];
  }
  if (drop.on) {
    a.dropout = true;
    a.drop_thr31 = static_cast<int32_t>(drop.threshold >> 1);
    a.drop_scale = drop.scale;
    a.drop_key = drop.keys.key;
    a.drop_key_at = drop.keys.key_at;
    a.drop_row_keys = detail::gpu_row_keys(drop.keys, q, op);
  }
  return a;
}
void gpu_attention(const Tensor& q, const Tensor& kk, const Tensor& v, const Tensor& out, const Tensor& lse,
                   const AttentionOptions& o, const Dims& dm, double scale, const AttnDrop& drop) {
  cuda_ops::attention(gpu_attention_args(q, kk, v, out, lse, o, dm, scale, drop));
}

// Per batch index: the mask's base offset and its row/column strides (0 where it broadcasts).
struct MaskLayout {
  std::vector<int64_t> base;
  int64_t row = 0, col = 0;
};
MaskLayout mask_layout(const Tensor& mask, const Dims& dm) {
  MaskLayout ml;
  ml.base.assign(static_cast<size_t>(dm.n), 0);
  if (!mask.defined()) return ml;
  const int64_t r = dm.lead.rank() + 2;
  Shape ms(static_cast<size_t>(r), 1);  // the mask's shape right-aligned to [..., T, S]
  for (int64_t i = 0; i < mask.dim(); ++i) ms[r - mask.dim() + i] = mask.shape()[i];
  Shape st = contiguous_strides(ms);
  for (int64_t i = 0; i < r; ++i)
    if (ms[i] == 1) st[i] = 0;
  ml.row = st[r - 2];
  ml.col = st[r - 1];
  for (int64_t n = 0; n < dm.n; ++n) {
    int64_t rem = n, off = 0;
    for (int64_t i = dm.lead.rank() - 1; i >= 0; --i) {
      off += (rem % dm.lead[i]) * st[i];
      rem /= dm.lead[i];
    }
    ml.base[n] = off;
  }
  return ml;
}

// The fused attention's backward from public ops, on a GPU for float32 and float64 (and bfloat16
// off the tensor cores):
// the weights are recomputed from the saved log-sum-exp, P = exp(q kᵀ s - lse) (0 where masked or
// where a row sees no key), then dV = Pᵀ g, dP = g Vᵀ, dS = P (dP - rowsum(g o)), dQ = dS K s and
// dK = dSᵀ Q s; a grouped key/value head sums its query heads, rows past kv_length get zeros. Every
// sum is a product or a fixed-order reduction: the same bits every run.
Grads attention_backward_from_ops(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                                   const Tensor& g, const AttentionOptions& opts, const Dims& dm, double scale,
                                   const AttnDrop& drop) {
  const double ninf = -std::numeric_limits<double>::infinity();
  Tensor kk = dm.rows > dm.S ? narrow(k, -2, 0, dm.S) : k, vv = dm.rows > dm.S ? narrow(v, -2, 0, dm.S) : v;
  const Shape k_shape = kk.shape(), v_shape = vv.shape();
  if (dm.group > 1) {
    kk = repeat_kv(kk, dm.group);
    vv = repeat_kv(vv, dm.group);
  }
  Tensor sc = mul(matmul(q, kk, false, true), scale);
  if (opts.causal) sc = masked_fill(sc, causal_mask(dm.T, dm.S, opts.causal_offset, q.device()), ninf);
  if (opts.mask.defined()) sc = masked_fill(sc, opts.mask, ninf);
  Tensor p = masked_fill(exp(sub(sc, unsqueeze(lse, -1))), unsqueeze(eq(lse, ninf), -1), 0.0);
  // With dropout (mask Z, regenerated from the call's keys): dV = (Z P)ᵀ g, dS = P (Z dP - rowsum(g o)).
  auto drop_mask = [&](const Tensor& t) { return drop.on ? detail::apply_dropout(t, drop.keys, drop.threshold, drop.scale) : t; };
  Tensor dv = matmul(drop_mask(p), g, true, false);
  Tensor ds = mul(p, sub(drop_mask(matmul(g, vv, false, true)), sum(mul(g, o), {-1}, true)));
  Tensor dq = mul(matmul(ds, kk), scale);
  Tensor dk = mul(matmul(ds, q, true, false), scale);
  auto fold_group = [&](const Tensor& t, const Shape& want) {  // [.., H_kv * group, S, e] -> [.., H_kv, S, e]
    if (dm.group == 1) return t;
    Shape wide = want;
    wide.insert(wide.begin() + (static_cast<int64_t>(want.rank()) - 2), dm.group);
    return sum(reshape(t, wide), {static_cast<int64_t>(want.rank()) - 2}, false);
  };
  dk = fold_group(dk, k_shape);
  dv = fold_group(dv, v_shape);
  if (dm.rows > dm.S) {  // rows past kv_length were not read: their gradient is zero
    dk = slice_backward(dk, k.shape(), k.dim() - 2, 0, 1);
    dv = slice_backward(dv, v.shape(), v.dim() - 2, 0, 1);
  }
  return Grads{dq, dk, dv};
}

// bfloat16 attention on the GPU's tensor cores: a bfloat16 output and a float32 log-sum-exp; the
// backward on tensor cores too (ops/cuda/attention.h), or in float32 from public ops where the
// gradient's storage is not 16-byte aligned.
Tensor tensor_core_attention(const Tensor& q, const Tensor& kk, const Tensor& v, const AttentionOptions& opts,
                             const Dims& dm, double scale, const AttnDrop& drop) {
  Shape out_shape = q.shape(), lse_shape = dm.lead;  // (either layout: q's shape with dv last)
  out_shape[out_shape.rank() - 1] = dm.dv;
  lse_shape.push_back(dm.T);
  Tensor out = Tensor::empty(out_shape, kBFloat16, q.device());
  Tensor lse = Tensor::empty(lse_shape, kFloat32, q.device());
  gpu_attention(q, kk, v, out, lse, opts, dm, scale, drop);
  return record("flash_attention", out, {q, kk, v}, [q, kk, v, lse, opts, dm, scale, drop](const Tensor& g, const Node& node) {
    TG_CHECK(!grad_enabled(), "flash_attention", "its backward is a fused kernel and cannot be differentiated again "
             "(create_graph); use attention_unfused for higher-order gradients");
    const Tensor o = node.output(), g16 = to(g, kBFloat16);
    if (cuda_ops::attention_takes_tensor_cores(dm.d, dm.dv, {detail::gpu_ptr(o), detail::gpu_ptr(g16)})) {
      Tensor dq = Tensor::empty(q.shape(), kBFloat16, q.device()), dk = Tensor::empty(kk.shape(), kBFloat16, q.device()),
             dv = Tensor::empty(v.shape(), kBFloat16, q.device());
      const Tensor delta = Tensor::empty(lse.shape(), kFloat32, q.device());
      cuda_ops::AttentionBackwardArgs b;
      b.fwd = gpu_attention_args(q, kk, v, o, lse, opts, dm, scale, drop);
      b.g = detail::gpu_ptr(g16);
      b.delta = detail::gpu_ptr(delta);
      b.dq = detail::gpu_ptr(dq);
      b.dk = detail::gpu_ptr(dk);
      b.dv = detail::gpu_ptr(dv);
      cuda_ops::attention_backward(b);
      return Grads{node.needs(0) ? dq : Tensor(), node.needs(1) ? dk : Tensor(), node.needs(2) ? dv : Tensor()};
    }
    // (kTokensFirst: computed on the [B, H, T, d] views, the gradients permuted back)
    const bool tokens_first = opts.layout == AttentionLayout::kTokensFirst;
    auto f32 = [&](const Tensor& t) { return tokens_first ? permute(to(t, kFloat32), kSwapTokensHeads) : to(t, kFloat32); };
    auto back = [&](const Tensor& t) { return tokens_first ? permute(to(t, kBFloat16), kSwapTokensHeads) : to(t, kBFloat16); };
    Dims heads_first = dm;
    heads_first.q_heads = heads_first.kv_heads = 1;
    const Grads gr = attention_backward_from_ops(f32(q), f32(kk), f32(v), f32(o), lse, f32(g), opts, heads_first, scale, drop);
    return Grads{node.needs(0) ? back(gr[0]) : Tensor(), node.needs(1) ? back(gr[1]) : Tensor(),
                 node.needs(2) ? back(gr[2]) : Tensor()};
  }, /*save_output=*/true);
}

}  // namespace

namespace detail {
bool autocast_on_gpu(const Tensor& x) { return x.dtype() == kFloat32 && x.is_cuda() && autocast_enabled(); }
bool autocast_trains_on_gpu(const Tensor& x, bool needs_grad) {
  return autocast_on_gpu(x) && grad_enabled() && needs_grad;
}
bool autocast_attention_on_tensor_cores(const Tensor& x, int64_t d, bool needs_grad) {
  return autocast_trains_on_gpu(x, needs_grad) && cuda_ops::attention_takes_tensor_cores(d, d, {});
}
}  // namespace detail

Tensor flash_attention(const Tensor& q, const Tensor& kk, const Tensor& v, const AttentionOptions& opts) {
  Dims dm = check_attention("flash_attention", q, kk, v, opts);
  const double scale = scale_of(opts, dm.d);
  // Under autocast on a GPU, attention being trained runs as PyTorch's CUDA autocast runs it: q, k
  // and v rounded to bfloat16, the tensor-core kernel, its output back in float32 (the casts carry
  // the gradient; the backward runs on tensor cores too). Inference under autocast keeps float32
  // attention, as on the CPU (decoding reads its cache in place, one launch a step).
  if (detail::autocast_attention_on_tensor_cores(q, dm.d, q.requires_grad() || kk.requires_grad() || v.requires_grad()) &&
      cuda_ops::attention_takes_tensor_cores(dm.d, dm.dv, {})) {
    return to(flash_attention(to(q, kBFloat16), to(kk, kBFloat16), to(v, kBFloat16), opts), kFloat32);
  }
  // kTokensFirst: the tensor-core kernels read and write it in place; elsewhere the same attention
  // on [B, H, T, d] copies, permuted back.
  if (opts.layout == AttentionLayout::kTokensFirst) {
    if (q.dtype() == kBFloat16 && q.is_cuda() &&
        cuda_ops::attention_takes_tensor_cores(dm.d, dm.dv, {detail::gpu_ptr(q), detail::gpu_ptr(kk), detail::gpu_ptr(v)}))
      return tensor_core_attention(q, kk, v, opts, dm, scale, attention_dropout(opts, dm, q.device()));
    const Shape& swap = kSwapTokensHeads;
    return permute(flash_attention(permute(q, swap), permute(kk, swap), permute(v, swap), as_heads_first(opts)), swap);
  }
  // bfloat16 q, k, v: on a GPU with head size 32, 64 or 128, the tensor-core kernel (products in
  // bfloat16 with float32 sums, the weights rounded to bfloat16 before they meet v, as
  // FlashAttention-2); otherwise computed in float32 and rounded once (the casts carry the gradient).
  if (q.dtype() == kBFloat16) {
    if (q.is_cuda() && cuda_ops::attention_takes_tensor_cores(dm.d, dm.dv, {detail::gpu_ptr(q), detail::gpu_ptr(kk),
                                                                             detail::gpu_ptr(v)})) {
      return tensor_core_attention(q, kk, v, opts, dm, scale, attention_dropout(opts, dm, q.device()));
    }
    return to(flash_attention(to(q, kFloat32), to(kk, kFloat32), to(v, kFloat32), opts), kBFloat16);
  }
  Shape out_shape = dm.lead;
  out_shape.push_back(dm.T);
  out_shape.push_back(dm.dv);
  Shape lse_shape = dm.lead;
  lse_shape.push_back(dm.T);
  Tensor out = Tensor::empty(out_shape, q.dtype(), q.device());
  Tensor lse = Tensor::empty(lse_shape, q.dtype(), q.device());
  MaskLayout ml = mask_layout(opts.mask, dm);
  AttnDrop drop = attention_dropout(opts, dm, q.device());
  if (q.is_cuda()) {
    gpu_attention(q, kk, v, out, lse, opts, dm, scale, drop);
  } else {
    const bool* mask = opts.mask.defined() ? opts.mask.data<bool>() : nullptr;
    dispatch_float(q.dtype(), "flash_attention", [&](auto tag) {
      using T = decltype(tag);
      const T *pq = q.data<T>(), *pk = kk.data<T>(), *pv = v.data<T>();
      T *po = out.data<T>(), *pl = lse.data<T>();
      k::parallel_for(0, dm.n, 1, [&](int64_t n0, int64_t n1) {
        k::AttnScratch<T> w;
        for (int64_t n = n0; n < n1; ++n) {
          k::AttnMask m{opts.causal, mask ? mask + ml.base[n] : nullptr, ml.row, ml.col, opts.causal_offset};
          const int64_t kv = n / dm.group;
          k::attention_forward<T>(pq + n * dm.T * dm.d, pk + kv * dm.rows * dm.d, pv + kv * dm.rows * dm.dv, po + n * dm.T * dm.dv,
                                  pl + n * dm.T, dm.T, dm.S, dm.d, dm.dv, static_cast<T>(scale), m, w,
                                  cpu_dropout(drop, dm, n));
        }
      });
    });
  }
  return record("flash_attention", out, {q, kk, v},
                [q, kk, v, lse, opts, dm, scale, ml = std::move(ml), drop = std::move(drop)](const Tensor& g0, const Node& node) {
    TG_CHECK(!grad_enabled(), "flash_attention", "its backward is a fused kernel and cannot be differentiated again "
             "(create_graph); use attention_unfused for higher-order gradients");
    Tensor o = node.output();
    Tensor g = to(g0, q.dtype());
    if (q.is_cuda()) {
      Grads gr = attention_backward_from_ops(q, kk, v, o, lse, g, opts, dm, scale, drop);
      return Grads{node.needs(0) ? gr[0] : Tensor(), node.needs(1) ? gr[1] : Tensor(), node.needs(2) ? gr[2] : Tensor()};
    }
    Tensor gq = Tensor::empty(q.shape(), q.dtype());
    // Rows past kv_length were not read: their gradient is zero.
    Tensor gk = dm.rows > dm.S ? zeros(kk.shape(), q.dtype()) : Tensor::empty(kk.shape(), q.dtype()),
           gv = dm.rows > dm.S ? zeros(v.shape(), q.dtype()) : Tensor::empty(v.shape(), q.dtype());
    const bool* mask2 = opts.mask.defined() ? opts.mask.data<bool>() : nullptr;
    dispatch_float(q.dtype(), "flash_attention", [&](auto tag) {
      using T = decltype(tag);
      // By key/value head: its group's query heads add to its dk and dv one after another, in
      // head order (the sums do not depend on the thread count).
      k::parallel_for(0, dm.n / dm.group, 1, [&](int64_t m0, int64_t m1) {
        k::AttnScratch<T> w;
        std::vector<T> drow;
        for (int64_t kv = m0; kv < m1; ++kv) {
          const int64_t ko = kv * dm.rows * dm.d, vo = kv * dm.rows * dm.dv;
          for (int64_t n = kv * dm.group; n < (kv + 1) * dm.group; ++n) {
            k::AttnMask m{opts.causal, mask2 ? mask2 + ml.base[n] : nullptr, ml.row, ml.col, opts.causal_offset};
            const int64_t qo = n * dm.T * dm.d, oo = n * dm.T * dm.dv;
            k::attention_backward<T>(q.data<T>() + qo, kk.data<T>() + ko, v.data<T>() + vo, o.data<T>() + oo,
                                     lse.data<T>() + n * dm.T, g.data<T>() + oo, gq.data<T>() + qo, gk.data<T>() + ko,
                                     gv.data<T>() + vo, dm.T, dm.S, dm.d, dm.dv, static_cast<T>(scale), m, w, drow,
                                     /*accumulate=*/n > kv * dm.group, cpu_dropout(drop, dm, n));
          }
        }
      });
    });
    return Grads{node.needs(0) ? gq : Tensor(), node.needs(1) ? gk : Tensor(), node.needs(2) ? gv : Tensor()};
  }, /*save_output=*/true);
}

namespace detail {
std::vector<Tensor> flash_attention_backward_from_ops(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                        const Tensor& lse, const Tensor& g, const AttentionOptions& opts) {
  TG_CHECK(opts.layout == AttentionLayout::kHeadsFirst, "flash_attention_backward_from_ops",
           "takes AttentionLayout::kHeadsFirst tensors ([..., T, d])");
  const Dims dm = check_attention("flash_attention", q, k, v, opts);
  const Grads gr = attention_backward_from_ops(q, k, v, out, lse, g, opts, dm, scale_of(opts, dm.d),
                                               attention_dropout(opts, dm, q.device()));
  return {gr[0], gr[1], gr[2]};
}
}  // namespace detail

AttentionResult attention_unfused(const Tensor& q, const Tensor& kk, const Tensor& v, const AttentionOptions& opts) {
  Dims dm = check_attention("attention_unfused", q, kk, v, opts);
  if (opts.layout == AttentionLayout::kTokensFirst) {  // on [B, H, T, d] copies; the weights stay [B, H, T, S]
    const Shape& swap = kSwapTokensHeads;
    AttentionResult r = attention_unfused(permute(q, swap), permute(kk, swap), permute(v, swap), as_heads_first(opts));
    r.output = permute(r.output, swap);
    return r;
  }
  if (dm.rows > dm.S) {
    AttentionOptions all = opts;
    all.kv_length = 0;
    return attention_unfused(q, narrow(kk, -2, 0, dm.S), narrow(v, -2, 0, dm.S), all);
  }
  if (dm.group > 1) return attention_unfused(q, repeat_kv(kk, dm.group), repeat_kv(v, dm.group), opts);
  Tensor scores = mul(matmul(q, kk, false, true), scale_of(opts, dm.d));  // q kᵀ / √d
  const double ninf = -std::numeric_limits<double>::infinity();
  if (opts.causal) scores = masked_fill(scores, causal_mask(dm.T, dm.S, opts.causal_offset, q.device()), ninf);
  if (opts.mask.defined()) scores = masked_fill(scores, opts.mask, ninf);
  Tensor weights = softmax(scores, -1);
  return {matmul(opts.dropout > 0 ? dropout(weights, opts.dropout, true) : weights, v), weights};
}

Tensor repeat_kv(const Tensor& x, int64_t n_rep) {
  detail::check_defined(x, "repeat_kv");
  TG_CHECK(x.dim() >= 3, "repeat_kv", "expected [..., heads, S, d], got shape {}", x.shape());
  TG_CHECK(n_rep >= 1, "repeat_kv", "n_rep must be >= 1, got {}", n_rep);
  if (n_rep == 1) return x;
  Shape wide = x.shape(), out = x.shape();
  wide.insert(wide.begin() + (x.dim() - 2), n_rep);  // [..., H_kv, n_rep, S, d]
  out[x.dim() - 3] *= n_rep;
  return reshape(expand(unsqueeze(x, x.dim() - 2), wide), out);
}

namespace {
Tensor rotate(const Tensor& x, const Tensor& cos, const Tensor& sin, double sign) {
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  const int64_t T = x.size(-2), h = x.size(-1) / 2;
  if (x.is_cuda()) {
    detail::check_same_device("rotary_embedding", x, "x", cos, "cos");
    detail::check_same_device("rotary_embedding", x, "x", sin, "sin");
    dispatch_float(x.dtype(), "rotary_embedding", [](auto) {});
    cuda_ops::RopeArgs a;
    a.device = x.device().index;
    a.op = "rotary_embedding";
    a.type = detail::gpu_scalar(x.dtype());
    a.x = detail::gpu_ptr(x);
    a.cos = detail::gpu_ptr(cos);
    a.sin = detail::gpu_ptr(sin);
    a.y = detail::gpu_ptr(y);
    a.rows = x.numel() / (2 * h);
    a.T = T;
    a.h = h;
    a.sign = sign;
    cuda_ops::rope(a);
  } else {
    dispatch_float(x.dtype(), "rotary_embedding", [&](auto tag) {
      using V = decltype(tag);
      k::rope_rows<V>(y.data<V>(), x.data<V>(), cos.data<V>(), sin.data<V>(), x.numel() / (2 * h), T, h, static_cast<V>(sign));
    });
  }
  // Linear in x: the backward turns the gradient back by the same angles.
  return record("rotary_embedding", y, {x}, [cos, sin, sign](const Tensor& g, const Node&) {
    return Grads{rotate(to(g, cos.dtype()), cos, sin, -sign)};
  });
}
}  // namespace

Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  detail::check_float(x, "rotary_embedding");
  TG_CHECK(x.dim() >= 2 && x.size(-1) > 0 && x.size(-1) % 2 == 0, "rotary_embedding",
           "expected x [..., T, d] with d even and positive, got shape {}", x.shape());
  const Shape table{x.size(-2), x.size(-1) / 2};
  for (const Tensor* t : {&cos, &sin}) {
    detail::check_defined(*t, "rotary_embedding");
    TG_CHECK(t->shape() == table && t->dtype() == x.dtype(), "rotary_embedding",
             "{} has shape {} ({}), expected {} ({}) for x of shape {} ([T, d/2] in x's dtype)", t == &cos ? "cos" : "sin",
             t->shape(), t->dtype(), table, x.dtype(), x.shape());
  }
  return rotate(x, cos.detach(), sin.detach(), 1.0);
}

}  // namespace tg
