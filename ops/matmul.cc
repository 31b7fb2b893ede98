// matmul: 2-D and batched (broadcast batch dims), 1-D vectors, transpose flags. Transposed
// operands are read through strides by the packed GEMM (ops/kernels/gemm.h), never copied, and
// the backward picks transpose flags instead of transposing. Also linear (ops/nn.h), the product
// with a linear layer's bias and activation, and autocast's cache of packed weights.
#include "ops/matmul.h"

#include <atomic>

#include "graph/cuda.h"
#include "graph/factory.h"
#include "ops/autocast.h"
#include "ops/autocast_internal.h"
#include "ops/cpu_capability.h"
#include "ops/cuda/matmul.h"
#include "ops/cuda/nn.h"
#include "ops/elementwise.h"
#include "ops/kernels/bf16.h"
#include "ops/kernels/gemm.h"
#include "ops/kernels/layer_norm.h"
#include "ops/nn.h"
#include "ops/op_util.h"
#include "ops/reduce.h"
#include "ops/shape_ops.h"

namespace tg {
namespace {

Tensor matmul_as(const Tensor& a, const Tensor& b, bool ta, bool tb, bool autocast);

// A float32 weight's bfloat16 pack for op(B) (N x K), made once and kept with its storage until
// the data changes (the storage's version: in-place ops and optimizer steps bump it). `used`: the
// pack served a product since it was made, so an optimizer step remakes it at once
// (refresh_autocast_packs) rather than at its next use.
struct WeightPack {
  kernels::PackedB pack;
  mutable std::atomic<bool> used{false};
};

uint64_t pack_key(const Tensor& w, int64_t N, int64_t K, bool trans, CpuCapability path) {
  uint64_t key = 1469598103934665603ULL;
  for (uint64_t v : {w.impl().storage->version(), static_cast<uint64_t>(w.impl().offset), static_cast<uint64_t>(N),
                     static_cast<uint64_t>(K), static_cast<uint64_t>(trans), static_cast<uint64_t>(path)})
    key = (key ^ v) * 1099511628211ULL;
  return key;
}

bool same_pack(const kernels::PackedB& p, int64_t N, int64_t K, bool trans, CpuCapability path) {
  return p.N == N && p.K == K && p.trans == trans && p.path == path;
}

// Packs w's current data into `kept` (a pack of this slot that nothing else holds: its memory is
// reused) and files it under w's current key; `used` as WeightPack says.
void repack_in_place(const Tensor& w, int slot, const std::shared_ptr<const WeightPack>& kept, const kernels::Bf16Operand& op,
                     CpuCapability path, bool used) {
  const kernels::PackedB& p = kept->pack;
  kernels::pack_b_bf16(op, p.N, p.K, path, const_cast<kernels::PackedB&>(p));
  kept->used.store(used, std::memory_order_relaxed);
  w.impl().storage->set_derived(slot, pack_key(w, p.N, p.K, p.trans, path), kept);
}

std::shared_ptr<const kernels::PackedB> packed_weight(const Tensor& w, const kernels::Bf16Operand& op, int64_t N, int64_t K,
                                                      CpuCapability path) {
  const Storage& st = *w.impl().storage;
  const uint64_t key = pack_key(w, N, K, op.trans, path);
  const int slot = op.trans ? 0 : 1;  // forward x Wᵀ and backward G W each keep theirs
  if (auto p = std::static_pointer_cast<const WeightPack>(st.derived(slot, key)))
    if (same_pack(p->pack, N, K, op.trans, path)) {
      p->used.store(true, std::memory_order_relaxed);
      return {p, &p->pack};
    }
  // The stale pack of this slot is repacked in place when nothing else holds it (no fresh pages
  // after every optimizer step); otherwise a new one is made.
  auto old = std::static_pointer_cast<const WeightPack>(st.derived_any(slot));
  if (old && same_pack(old->pack, N, K, op.trans, path) && old.use_count() == 2) {
    repack_in_place(w, slot, old, op, path, /*used=*/true);
    return {old, &old->pack};
  }
  auto p = std::make_shared<WeightPack>();
  kernels::pack_b_bf16(op, N, K, path, p->pack);
  p->used.store(true, std::memory_order_relaxed);
  st.set_derived(slot, key, p);
  return {p, &p->pack};
}

// The nb products of a batch: many small ones (attention) one thread per product; few large
// ones in turn, with threads inside each.
template <class F>
void for_each_product(int64_t nb, int64_t mnk, const F& one) {
  if (nb > 1 && mnk <= (int64_t{1} << 21)) {
    kernels::parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i) one(i);
    });
  } else {
    for (int64_t i = 0; i < nb; ++i) one(i);
  }
}

// The products of matmul_nd on a GPU: one strided-batched cuBLASLt call where the batch offsets
// are uniform (no broadcast, or one operand shared by the whole batch), else one call a product.
// Under autocast the float32 operands are rounded to bfloat16 first (float32 sums and output).
// Autocast's bfloat16 copy of a float32 GPU tensor that views its storage from the start, kept in
// the storage's derived slot 0 (CPU packs use the slots of CPU storages only) under a key of its
// version, remade when stale: a weight's serves every product until the optimizer changes it (and
// rewrites the copy in its pass); an activation's serves every product that reads it while its
// storage lives (Q, K and V of one input, the two products of one gradient, a forward's input
// again in the backward). Writes through raw pointers must bump_version(), as for the CPU packs.
constexpr int kGpuBf16Slot = 0;
uint64_t gpu_bf16_key(uint64_t version) { return (version << 1) | 1; }
bool covers_storage(const Tensor& x) {
  return x.is_cuda() && x.dtype() == kFloat32 && x.impl().offset == 0 &&
         static_cast<size_t>(x.numel()) * sizeof(float) <= x.impl().storage->nbytes();
}
bool whole_weight(const Tensor& w) { return covers_storage(w) && w.is_leaf() && w.requires_grad(); }
Tensor autocast_operand(const Tensor& x) {
  NoGradGuard ng;  // the backward recomputes its own products
  if (!covers_storage(x)) return to(x.detach(), kBFloat16);
  const Storage& st = *x.impl().storage;
  const uint64_t key = gpu_bf16_key(st.version());
  if (auto c = std::static_pointer_cast<const Tensor>(st.derived(kGpuBf16Slot, key)); c && c->numel() == x.numel())
    return c->shape() == x.shape() ? *c : reshape(*c, x.shape());  // (a reshape of the same data)
  auto c = std::make_shared<const Tensor>(to(x.detach(), kBFloat16));
  st.set_derived(kGpuBf16Slot, key, c);
  return *c;
}

void gpu_matmul(const Tensor& a0, const Tensor& b0, const Tensor& out, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                const std::vector<int64_t>& aoff, const std::vector<int64_t>& boff, bool autocast,
                const Tensor& bias = Tensor(), bool relu = false, bool accumulate = false) {
  if (aoff.empty() || M == 0 || N == 0) return;  // an empty batch or output: nothing to write
  Tensor a = a0, b = b0;
  if (autocast) {  // weights from their kept bfloat16 copies
    a = autocast_operand(a0);
    b = autocast_operand(b0);
  }
  cuda_ops::GemmArgs g;
  g.device = a.device().index;
  g.op = "matmul";
  g.in_type = detail::gpu_scalar(a.dtype());
  g.out_type = detail::gpu_scalar(out.dtype());
  g.tf32 = a.dtype() == kFloat32 && cuda::allow_tf32();
  g.M = M;
  g.N = N;
  g.K = K;
  g.trans_a = ta;
  g.trans_b = tb;
  g.accumulate = accumulate;
  g.relu = relu;  // a linear layer's bias and ReLU in cuBLASLt's epilogue: one product
  if (bias.defined()) g.bias = detail::gpu_ptr(bias);
  const int64_t nb = static_cast<int64_t>(aoff.size());
  auto uniform = [nb](const std::vector<int64_t>& off) {
    const int64_t step = nb > 1 ? off[1] - off[0] : 0;
    for (int64_t i = 0; i < nb; ++i)
      if (off[static_cast<size_t>(i)] != off[0] + i * step) return int64_t{-1};
    return step;
  };
  const int64_t sa = uniform(aoff), sb = uniform(boff);
  const size_t ea = dtype_size(a.dtype()), eo = dtype_size(out.dtype());
  if (sa >= 0 && sb >= 0) {
    g.batch = nb;
    g.A = static_cast<const char*>(detail::gpu_ptr(a)) + aoff[0] * M * K * static_cast<int64_t>(ea);
    g.B = static_cast<const char*>(detail::gpu_ptr(b)) + boff[0] * K * N * static_cast<int64_t>(ea);
    g.C = detail::gpu_ptr(out);
    g.stride_a = sa * M * K;
    g.stride_b = sb * K * N;
    g.stride_c = M * N;
    cuda_ops::gemm(g);
    return;
  }
  for (int64_t i = 0; i < nb; ++i) {
    g.A = static_cast<const char*>(detail::gpu_ptr(a)) + aoff[static_cast<size_t>(i)] * M * K * static_cast<int64_t>(ea);
    g.B = static_cast<const char*>(detail::gpu_ptr(b)) + boff[static_cast<size_t>(i)] * K * N * static_cast<int64_t>(ea);
    g.C = static_cast<char*>(detail::gpu_ptr(out)) + i * M * N * static_cast<int64_t>(eo);
    cuda_ops::gemm(g);
  }
}

// op(a) op(b) for operands of rank >= 2 and the same float dtype (with ta, a holds [..., K, M];
// with tb, b holds [..., N, K]): the output's shape and, for every output batch index, the batch
// offsets of a and b (stride 0 where broadcast).
struct ProductPlan {
  Shape out_shape;
  int64_t M = 0, N = 0, K = 0;
  std::vector<int64_t> aoff, boff;
};
ProductPlan plan_product(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  const int64_t ar = as[as.rank() - 2], ac = as[as.rank() - 1];
  const int64_t br = bs[bs.rank() - 2], bc = bs[bs.rank() - 1];
  ProductPlan p;
  p.M = ta ? ac : ar;
  p.K = ta ? ar : ac;
  const int64_t K2 = tb ? bc : br;
  p.N = tb ? br : bc;
  TG_CHECK(p.K == K2, "matmul", "shapes {}{} and {}{} cannot be multiplied (inner dimensions {} and {} differ)", as,
           ta ? " (transposed)" : "", bs, tb ? " (transposed)" : "", p.K, K2);
  Shape abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
  const Shape batch = broadcast_shapes(abatch, bbatch, "matmul");
  p.out_shape = batch;
  p.out_shape.push_back(p.M);
  p.out_shape.push_back(p.N);
  const int64_t nb = batch.numel();
  BroadcastPlan plan = make_broadcast_plan(batch, {abatch, bbatch});
  p.aoff.resize(static_cast<size_t>(nb));
  p.boff.resize(static_cast<size_t>(nb));
  for_each_run(plan, [&](int64_t o, const int64_t* in, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      p.aoff[o + i] = in[0] + i * plan.inner_stride[0];
      p.boff[o + i] = in[1] + i * plan.inner_stride[1];
    }
  });
  return p;
}

// out (contiguous, p.out_shape) = op(a) op(b), or += when accumulate (not for bfloat16 operands
// without autocast). autocast: float32 operands multiplied as bfloat16 (float32 sums and output).
void run_product(const Tensor& a, const Tensor& b, bool ta, bool tb, bool autocast, const ProductPlan& p, const Tensor& out,
                 bool accumulate) {
  const int64_t M = p.M, N = p.N, K = p.K;
  const int64_t ac = a.size(-1), bc = b.size(-1);
  const std::vector<int64_t>& aoff = p.aoff;
  const std::vector<int64_t>& boff = p.boff;
  const int64_t nb = static_cast<int64_t>(aoff.size());
  TG_CHECK(!accumulate || a.dtype() != kBFloat16, "matmul", "a bfloat16 product is not added into an existing sum");
  if (a.is_cuda()) {
    gpu_matmul(a, b, out, ta, tb, M, N, K, aoff, boff, autocast, Tensor(), false, accumulate);
  } else if (autocast) {
    // Autocast: float32 operands rounded to bfloat16 while packed, float32 sums and output.
    const auto path = cpu_capability();
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    float* pc = out.data<float>();
    std::shared_ptr<const kernels::PackedB> packed;
    if (nb == 1 && b.is_leaf() && b.requires_grad()) packed = packed_weight(b, {pb, false, bc, tb}, N, K, path);
    auto one = [&](int64_t i) {
      kernels::gemm_bf16(M, N, K, {pa + aoff[i] * M * K, false, ac, ta}, {pb + boff[i] * K * N, false, bc, tb}, pc + i * M * N, N,
                         accumulate, path, packed.get());
    };
    for_each_product(nb, M * N * K, one);
  } else if (a.dtype() == kBFloat16) {
    // bfloat16 x bfloat16: float32 sums on the path ops/kernels/bf16.h chose, each rounded once to bfloat16.
    const auto* pa = reinterpret_cast<const uint16_t*>(a.data<bfloat16>());
    const auto* pb = reinterpret_cast<const uint16_t*>(b.data<bfloat16>());
    auto* pc = reinterpret_cast<uint16_t*>(out.data<bfloat16>());
    const auto path = cpu_capability();
    auto one = [&](int64_t i) {
      kernels::gemm_bf16_to_bf16(M, N, K, {pa + aoff[i] * M * K, true, ac, ta}, {pb + boff[i] * K * N, true, bc, tb},
                                 pc + i * M * N, N, path);
    };
    for_each_product(nb, M * N * K, one);
  } else dispatch_float(a.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    auto one = [&](int64_t i) {
      kernels::gemm<T>(ta, tb, M, N, K, pa + aoff[i] * M * K, ac, pb + boff[i] * K * N, bc, po + i * M * N, N, accumulate);
    };
    for_each_product(nb, M * N * K, one);
  });
}

// The recorded output's node adds gradients into the engine's sums (Node::take_grad_sinks).
Tensor takes_sinks(Tensor out) {
  if (out.grad_fn()) out.grad_fn()->take_grad_sinks();
  return out;
}

// The gradient op(x) op(y) of a product's input, of shape `want`: added straight into `sink`, the
// sum the engine has gathered for that input (Node::grad_sink: a product with beta = 1, no separate
// sum pass) when it is offered and has the product's own shape and dtype — then `sink` itself is
// returned — else made and summed over broadcast batch dimensions.
Tensor product_grad(const Tensor& sink, const Tensor& x, const Tensor& y, bool tx, bool ty, bool autocast, const Shape& want) {
  if (sink.defined() && !grad_enabled() && x.dim() >= 2 && y.dim() >= 2 && sink.dtype() == x.dtype() &&
      x.dtype() != kBFloat16 && sink.device() == x.device() && sink.shape() == want) {
    const ProductPlan p = plan_product(x, y, tx, ty);
    if (p.out_shape == want) {
      run_product(x, y, tx, ty, autocast && x.dtype() == kFloat32, p, sink, /*accumulate=*/true);
      sink.impl().storage->bump_version();
      return sink;
    }
  }
  return sum_to(matmul_as(x, y, tx, ty, autocast), want);
}

// Both operands of rank >= 2 and the same float dtype. With ta, a holds [..., K, M]; with tb,
// b holds [..., N, K]. autocast: float32 operands multiplied as bfloat16 (float32 sums and output).
Tensor matmul_nd(const Tensor& a, const Tensor& b, bool ta, bool tb, bool autocast) {
  const ProductPlan p = plan_product(a, b, ta, tb);
  Tensor out = Tensor::empty(p.out_shape, a.dtype(), a.device());
  run_product(a, b, ta, tb, autocast, p, out, /*accumulate=*/false);
  // The backward products run in the forward's precision, whatever the autocast state then.
  return takes_sinks(record(autocast ? "matmul (bf16 autocast)" : "matmul", out, {a, b}, [a, b, ta, tb, autocast](const Tensor& g, const Node& n) {
    // C = op(A) op(B): d op(A) = g op(B)^T, d op(B) = op(A)^T g, then undo the op.
    Tensor ga, gb;
    if (n.needs(0)) {
      const Tensor sink = n.grad_sink(0);
      ga = ta ? product_grad(sink, b, g, tb, true, autocast, a.shape()) : product_grad(sink, g, b, false, !tb, autocast, a.shape());
    }
    if (n.needs(1)) {
      const Tensor sink = n.grad_sink(1);
      gb = tb ? product_grad(sink, g, a, true, ta, autocast, b.shape()) : product_grad(sink, a, g, !ta, false, autocast, b.shape());
    }
    return Grads{ga, gb};
  }));
}

Tensor matmul_as(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, bool autocast) {
  detail::check_float(a, "matmul");
  detail::check_float(b, "matmul");
  TG_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul", "both operands need at least one dimension, got shapes {} and {}",
           a.shape(), b.shape());
  TG_CHECK(a.dtype() == b.dtype(), "matmul", "operands have different dtypes ({} and {})", a.dtype(), b.dtype());
  detail::check_same_device("matmul", a, "first operand", b, "second operand");
  TG_CHECK(!(transpose_a && a.dim() < 2) && !(transpose_b && b.dim() < 2), "matmul",
           "a transpose flag needs an operand of rank >= 2, got shapes {} and {}", a.shape(), b.shape());
  autocast = autocast && a.dtype() == kFloat32;  // float64 (gradcheck) and bfloat16 tensors are never autocast
  if (a.dim() == 1 && b.dim() == 1) {
    TG_CHECK(a.numel() == b.numel(), "matmul", "vectors of lengths {} and {} differ", a.numel(), b.numel());
    return reshape(matmul_nd(reshape(a, {1, a.numel()}), reshape(b, {b.numel(), 1}), false, false, autocast), Shape{});
  }
  if (a.dim() == 1) return squeeze(matmul_nd(unsqueeze(a, 0), b, false, transpose_b, autocast), -2);
  if (b.dim() == 1) return squeeze(matmul_nd(a, unsqueeze(b, -1), transpose_a, false, autocast), -1);
  return matmul_nd(a, b, transpose_a, transpose_b, autocast);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  return matmul_as(a, b, transpose_a, transpose_b, autocast_enabled());
}

void refresh_autocast_packs(const Tensor& w) {
  if (!w.defined() || w.dtype() != kFloat32) return;
  const Storage& st = *w.impl().storage;
  const auto path = cpu_capability();
  for (int slot = 0; slot < 2; ++slot) {
    auto old = std::static_pointer_cast<const WeightPack>(st.derived_any(slot));
    // Only a pack that served a product since it was made (a model still trained under autocast),
    // on the path in use, that nothing else holds.
    if (!old || !old->used.load(std::memory_order_relaxed) || old->pack.path != path || old.use_count() != 2) continue;
    const kernels::PackedB& p = old->pack;
    if (p.N * p.K != w.numel()) continue;
    repack_in_place(w, slot, old, {w.data<float>(), false, p.trans ? p.K : p.N, p.trans}, path, /*used=*/false);
  }
}

namespace {
// act(x wᵀ + bias) for x [..., in] (its leading dims the product's rows), act Identity or ReLU, bias
// optional, as one node whose gradient for x has x's shape (so it can be added straight into the
// sum gathered for x: the Q, K and V projections of one input): the product's output gets the bias
// and activation block by block (under autocast in the bfloat16 kernel's epilogue, else one pass
// after the float GEMM; on a GPU in cuBLASLt's epilogue), and the backward needs only the output
// (ReLU's derivative is y > 0, as x wᵀ + b > 0).
// x and w float32 or float64 alike; under autocast x may be bfloat16 with a float32 w (a product of
// bfloat16 operands with a float32 output, x's gradient in bfloat16), and `out` may be bfloat16
// (Identity only: the float32 sums plus the bias rounded to bfloat16, rounded once, as PyTorch's
// autocast linear returns; the gradient arrives in bfloat16).
Tensor linear_fused(const Tensor& x, const Tensor& w, const Tensor& bias, bool relu, const Shape& out_shape, DType out) {
  const int64_t in = w.size(1), features = w.size(0);
  int64_t rows = 1;  // (the leading dimensions' product: in may be 0)
  for (int64_t i = 0; i + 1 < x.dim(); ++i) rows *= x.size(i);
  const bool autocast = autocast_enabled() && w.dtype() == kFloat32 && (x.dtype() == kFloat32 || x.dtype() == kBFloat16);
  const bool x_bf16 = x.dtype() == kBFloat16, out_bf16 = out == kBFloat16;
  TG_CHECK((!x_bf16 || autocast) && (!out_bf16 || (autocast && !x_bf16)), "linear", "a bfloat16 input or output needs "
           "autocast and a float32 input and weight for a bfloat16 output (input {}, weight {}, output {})", x.dtype(),
           w.dtype(), out);
  Tensor y = Tensor::empty(out_shape, out, x.device());
  Tensor x2;
  {
    NoGradGuard ng;  // a view of x's data, not recorded (the node's input is x)
    x2 = x.dim() == 2 ? x.detach() : reshape(x.detach(), {rows, in});
  }
  // On a GPU under autocast the backward needs x only as the bfloat16 copy the forward multiplied:
  // the node keeps that copy, not x (as PyTorch's autocast keeps its cast input), so x may go.
  const bool keep_bf16 = x.is_cuda() && autocast;
  const Tensor xs = keep_bf16 ? autocast_operand(x.detach()) : x;  // (x's shape either way)
  if (x.is_cuda()) {  // cuBLASLt's epilogue adds the bias (and takes the ReLU) in the product's call
    const Tensor b = out_bf16 && bias.defined() ? autocast_operand(bias) : bias;  // (a bfloat16 output's bias in bfloat16)
    gpu_matmul(keep_bf16 ? xs : x2, w, y, false, true, rows, features, in, {0}, {0}, autocast, b, relu);
  } else if (autocast) {
    const auto path = cpu_capability();
    const float* pw = w.data<float>();
    std::shared_ptr<const kernels::PackedB> packed;
    if (w.is_leaf() && w.requires_grad()) packed = packed_weight(w, {pw, false, in, true}, features, in, path);
    NoGradGuard ng;
    // (a bfloat16 output: float32 sums plus the bias rounded as the GPU's epilogue reads it, then rounded once)
    const Tensor b = out_bf16 && bias.defined() ? to(to(bias.detach(), kBFloat16), kFloat32) : bias;
    const Tensor y32 = out_bf16 ? Tensor::empty(out_shape, kFloat32) : y;
    const kernels::Bf16Epilogue ep{b.defined() ? b.data<float>() : nullptr, relu};
    const kernels::Bf16Operand xa{x_bf16 ? static_cast<const void*>(x2.data<bfloat16>()) : x2.data<float>(), x_bf16, in, false};
    kernels::gemm_bf16(rows, features, in, xa, {pw, false, in, true}, y32.data<float>(), features, false, path, packed.get(),
                       b.defined() || relu ? &ep : nullptr);
    if (out_bf16) y = to(y32, kBFloat16);
  } else {
    dispatch_float(x.dtype(), "linear", [&](auto tag) {
      using T = decltype(tag);
      T* py = y.data<T>();
      kernels::gemm<T>(false, true, rows, features, in, x2.data<T>(), in, w.data<T>(), in, py, features);
      if (bias.defined()) {
        if (relu) kernels::bias_act_forward<T>(py, bias.data<T>(), py, rows, features, kernels::Relu{});
        else kernels::bias_act_forward<T>(py, bias.data<T>(), py, rows, features, kernels::Identity{});
      }
    });
  }
  const char* name = autocast ? "linear (bf16 autocast)" : "linear";
  return takes_sinks(record(name, y, {x, w, bias}, [xs, w, bias, rows, relu, autocast, keep_bf16, x_bf16, out_bf16](const Tensor& g0,
                                                                                                       const Node& n) {
    // d = g act'(x wᵀ + b); dx = d w, dw = dᵀ x, dbias = d's column sums (all 2-D: rows x features).
    // xs: x itself (recorded again by a create_graph backward), or on a GPU under autocast its
    // bfloat16 copy. On the CPU bfloat16 tensors take part as float32 (the same values, which the
    // autocast products round back to exactly those bfloat16s).
    const int64_t D = w.size(0);
    const Tensor xs_cpu = x_bf16 && !keep_bf16 ? to(xs, kFloat32) : xs;
    const Tensor x2 = xs_cpu.dim() == 2 ? xs_cpu : reshape(xs_cpu, {rows, w.size(1)});
    Tensor g = g0.dim() == 2 ? g0 : reshape(g0, {rows, D});
    if (out_bf16 && !keep_bf16) g = to(g, kFloat32);
    // The output as the backward reads it for ReLU's y > 0 (a bfloat16 output, on the CPU, as float32).
    auto output = [&] { return out_bf16 && !keep_bf16 ? to(n.output(), kFloat32) : n.output(); };
    Tensor d;
    Tensor gb;
    if (out_bf16 && keep_bf16) {  // a bfloat16 gradient, read by the products as it is
      if (relu || n.needs(2)) g = to(g, kBFloat16);  // (one summed with a float32 gradient, or a hook's, may be float32)
      d = relu ? Tensor::empty(g.shape(), kBFloat16, g.device()) : g;
      const void* y = relu ? detail::gpu_ptr(n.output()) : nullptr;
      if (n.needs(2)) {  // one pass: d = g where y > 0 (ReLU), and the bias's column sums of d in float32
        gb = Tensor::empty(bias.shape(), kFloat32, g.device());
        const Tensor partial = Tensor::empty({cuda_ops::bf16_column_sums_scratch(rows, D)}, kFloat32, g.device());
        cuda_ops::bf16_backward_with_sums(g.device().index, "linear", detail::gpu_ptr(g), y,
                                          relu ? detail::gpu_ptr(d) : nullptr, static_cast<float*>(detail::gpu_ptr(gb)),
                                          static_cast<float*>(detail::gpu_ptr(partial)), rows, D);
      } else if (relu) {  // d = g where y > 0, in bfloat16
        cuda_ops::relu_backward_bf16(g.device().index, "linear", detail::gpu_ptr(g), y, detail::gpu_ptr(d), d.numel());
      }
    } else if (relu && g.is_cuda() && !grad_enabled()) {  // one pass: d = g where y > 0, then the bias's column sums
      d = Tensor::empty(g.shape(), g.dtype(), g.device());
      if (n.needs(2)) gb = Tensor::empty(bias.shape(), g.dtype(), g.device());
      const Tensor partial = gb.defined() ? Tensor::empty({cuda_ops::norm_backward_scratch(rows, D)}, g.dtype(), g.device())
                                          : Tensor();
      const Tensor y = n.output();
      cuda_ops::BiasActArgs a;
      a.device = g.device().index;
      a.op = "linear";
      a.act = cuda_ops::math::Unary::kRelu;
      a.type = detail::gpu_scalar(g.dtype());
      a.x = detail::gpu_ptr(y);  // relu'(x wᵀ + b) is y > 0 (no bias added again)
      a.rows = rows;
      a.D = D;
      cuda_ops::bias_act_backward(a, detail::gpu_ptr(g), detail::gpu_ptr(d), gb.defined() ? detail::gpu_ptr(gb) : nullptr,
                                  partial.defined() ? detail::gpu_ptr(partial) : nullptr);
    } else if (grad_enabled() || g.is_cuda()) {  // recorded backward (higher order), or on a GPU: from public ops
      d = relu ? where(gt(reshape(output(), {rows, D}), 0.0), g, 0.0) : g;
      if (n.needs(2)) gb = sum_to(d, bias.shape());
    } else if (relu) {
      d = Tensor::empty(g.shape(), g.dtype());
      if (n.needs(2)) gb = Tensor::empty(bias.shape(), g.dtype());
      const Tensor zero = zeros({D}, g.dtype());
      dispatch_float(g.dtype(), "linear", [&](auto tag) {
        using T = decltype(tag);
        kernels::bias_act_backward<T>(g.data<T>(), output().data<T>(), zero.data<T>(), d.data<T>(),
                                      gb.defined() ? gb.data<T>() : nullptr, rows, D, kernels::ReluGrad{});
      });
    } else {
      d = g;
      if (n.needs(2)) {  // bias_act's column sums, in its fixed row blocks
        gb = Tensor::empty(bias.shape(), g.dtype());
        dispatch_float(g.dtype(), "linear", [&](auto tag) {
          using T = decltype(tag);
          kernels::bias_act_backward<T>(g.data<T>(), nullptr, nullptr, nullptr, gb.data<T>(), rows, D,
                                        kernels::IdentityGrad{});
        });
      }
    }
    if (keep_bf16) {  // both products from bfloat16 operands (d's copy made once, x's from the forward)
      TG_CHECK(!grad_enabled(), "linear", "under autocast on a GPU the backward keeps the input in bfloat16 only, so "
               "it cannot be differentiated again (create_graph): run that forward outside autocast");
      // op(a) op(b), 2-D, in `type`: a float32 output into input i's gathered sum where the engine
      // offers it (beta = 1), else a fresh tensor of `want`'s shape.
      auto product = [&](size_t i, const Tensor& a, const Tensor& b, bool ta, bool tb, const Shape& want, DType type) {
        const int64_t M = ta ? a.size(1) : a.size(0), K = ta ? a.size(0) : a.size(1), N = tb ? b.size(0) : b.size(1);
        const Tensor sink = type == kFloat32 ? n.grad_sink(i) : Tensor();
        const bool into = sink.defined() && sink.dtype() == kFloat32;
        const Tensor o = into ? sink : Tensor::empty(want, type, a.device());
        gpu_matmul(a, b, o, ta, tb, M, N, K, {0}, {0}, /*autocast=*/true, Tensor(), false, /*accumulate=*/into);
        if (into) o.impl().storage->bump_version();
        return o;
      };
      return Grads{n.needs(0) ? product(0, d, w, false, false, xs.shape(), x_bf16 ? kBFloat16 : kFloat32) : Tensor(),
                   n.needs(1) ? product(1, d, x2, true, false, w.shape(), kFloat32) : Tensor(), gb};
    }
    Tensor gx, gw;
    if (n.needs(0)) {  // dx = d w, as [rows, in]: into x's gathered sum (a view of it) where offered
      const Tensor sink = n.grad_sink(0);
      Tensor sink2;
      if (sink.defined() && !x_bf16) {
        NoGradGuard ng;
        sink2 = reshape(sink, {rows, w.size(1)});
      }
      const Tensor r = product_grad(sink2, d, w, false, false, autocast, Shape{rows, w.size(1)});
      gx = sink2.defined() && r.same(sink2) ? sink : reshape(r, xs.shape());
      if (x_bf16) gx = to(gx, kBFloat16);
    }
    if (n.needs(1)) gw = product_grad(n.grad_sink(1), d, x2, true, false, autocast, w.shape());
    return Grads{gx, gw, gb};
  }, relu));
}
}  // namespace

namespace detail {
Tensor gpu_bf16_copy(const Tensor& w) {
  // (An optimizer asks right after bumping w's version for its step: a copy current before the bump
  // is rewritten by the update; a stale one is left to be remade at its next product, so an update
  // the non-finite flag skips never leaves a stale copy marked fresh.)
  if (!whole_weight(w)) return Tensor();
  const Storage& st = *w.impl().storage;
  auto c = std::static_pointer_cast<const Tensor>(st.derived(kGpuBf16Slot, gpu_bf16_key(st.version() - 1)));
  return c && c->shape() == w.shape() ? *c : Tensor();
}
void keep_gpu_bf16_copy(const Tensor& x, const Tensor& copy) {
  if (!covers_storage(x) || !copy.defined() || copy.numel() != x.numel() || copy.dtype() != kBFloat16) return;
  const Storage& st = *x.impl().storage;
  st.set_derived(kGpuBf16Slot, gpu_bf16_key(st.version()), std::make_shared<const Tensor>(copy));
}
void mark_gpu_bf16_copy_fresh(const Tensor& w) {
  const Storage& st = *w.impl().storage;
  if (auto c = st.derived_any(kGpuBf16Slot)) st.set_derived(kGpuBf16Slot, gpu_bf16_key(st.version()), std::move(c));
}
}  // namespace detail

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act) {
  detail::check_float(x, "linear");
  detail::check_float(weight, "linear");
  TG_CHECK(weight.dim() == 2, "linear", "weight must be [out, in], got shape {}", weight.shape());
  const int64_t in = weight.size(1), out = weight.size(0);
  TG_CHECK(x.dim() >= 1 && x.size(-1) == in, "linear", "input of shape {} does not end in in_features = {} (weight {})",
           x.shape(), in, weight.shape());
  // Under autocast a bfloat16 input meets a float32 weight as PyTorch's autocast lets it (the
  // product is in bfloat16 either way; the output float32, as every autocast product's).
  const bool mixed = autocast_enabled() && x.dtype() == kBFloat16 && weight.dtype() == kFloat32;
  TG_CHECK(x.dtype() == weight.dtype() || mixed, "linear", "input and weight have different dtypes ({} and {})", x.dtype(),
           weight.dtype());
  if (bias.defined()) {
    detail::check_float(bias, "linear");
    TG_CHECK(bias.dim() == 1 && bias.size(0) == out && bias.dtype() == weight.dtype(), "linear",
             "bias of shape {} ({}) does not match weight {} ({})", bias.shape(), bias.dtype(), weight.shape(), weight.dtype());
  }
  // All leading dims become rows of one product: [rows, in] x [out, in]ᵀ.
  Shape out_shape = x.shape();
  out_shape.back() = out;
  detail::check_same_device("linear", x, "input", weight, "weight");
  if (bias.defined()) detail::check_same_device("linear", x, "input", bias, "bias");
  // One node: on the CPU the fused kernel, on a GPU cuBLASLt's bias (and ReLU) epilogue.
  if ((x.dtype() != kBFloat16 || mixed) && (!x.is_cuda() || in > 0)) {
    const DType dt = weight.dtype();
    if (bias.defined() && (act == Activation::kIdentity || act == Activation::kRelu))
      return linear_fused(x, weight, bias, act == Activation::kRelu, out_shape, dt);
    if (!bias.defined()) {
      const Tensor y = linear_fused(x, weight, bias, false, out_shape, dt);
      switch (act) {
        case Activation::kIdentity: return y;
        case Activation::kRelu: return relu(y);
        case Activation::kGelu: return gelu(y);
        case Activation::kGeluTanh: return gelu(y, GeluApprox::kTanh);
      }
    }
  }
  const Tensor xm = mixed ? to(x, kFloat32) : x;  // (a GELU linear with a bias: the product, then bias_act)
  const Tensor x2 = xm.dim() == 2 ? xm : reshape(xm, {xm.numel() / in, in});
  Tensor y = matmul(x2, weight, false, true);
  if (bias.defined()) y = bias_act(y, bias, act);
  else if (act == Activation::kRelu) y = relu(y);
  else if (act == Activation::kGelu) y = gelu(y);
  else if (act == Activation::kGeluTanh) y = gelu(y, GeluApprox::kTanh);
  return x.dim() == 2 ? y : reshape(y, out_shape);
}

namespace detail {
Tensor linear_bf16_output(const Tensor& x, const Tensor& weight, const Tensor& bias, bool relu) {
  TG_CHECK(autocast_enabled() && x.dtype() == kFloat32 && weight.dtype() == kFloat32 && weight.dim() == 2 &&
               x.dim() >= 1 && x.size(-1) == weight.size(1) && (!bias.defined() || bias.dtype() == kFloat32),
           "linear", "a bfloat16 output needs autocast, a float32 input [..., {}] and weight, got input {} ({}) and "
           "weight {} ({})", weight.dim() == 2 ? weight.size(1) : 0, x.shape(), x.dtype(), weight.shape(), weight.dtype());
  if (x.is_cuda() && weight.size(1) == 0) return to(linear(x, weight, bias, relu ? Activation::kRelu : Activation::kIdentity), kBFloat16);
  Shape out_shape = x.shape();
  out_shape.back() = weight.size(0);
  detail::check_same_device("linear", x, "input", weight, "weight");
  if (bias.defined()) detail::check_same_device("linear", x, "input", bias, "bias");
  return linear_fused(x, weight, bias, relu, out_shape, kBFloat16);
}
}  // namespace detail


}  // namespace tg
