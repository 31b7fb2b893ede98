#include "models/attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "graph/cuda/runtime.h"
#include "graph/factory.h"
#include "graph/node.h"
#include "ops/autocast_internal.h"
#include "ops/ops.h"

namespace tg {

namespace {

// key_padding [B, S] -> [B, 1, 1, S], broadcast over heads and queries.
Tensor padding_as_4d(const Tensor& key_padding, const Tensor& q, int64_t S) {
  TG_CHECK(key_padding.dtype() == kBool && key_padding.dim() == 2, "scaled_dot_product_attention",
           "key_padding must be a bool [B, S] tensor, got {} {}", key_padding.dtype(), key_padding.shape());
  TG_CHECK(q.dim() == 4, "scaled_dot_product_attention",
           "key_padding needs 4-D [B, heads, T, d] inputs, got q of shape {}", q.shape());
  TG_CHECK(key_padding.size(0) == q.size(0) && key_padding.size(1) == S, "scaled_dot_product_attention",
           "key_padding has shape {}, expected [{}, {}] (batch, keys)", key_padding.shape(), q.size(0), S);
  return key_padding.reshape({key_padding.size(0), 1, 1, key_padding.size(1)});
}

// One bool mask (true = hidden) from the padding and explicit masks; undefined when neither.
Tensor combined_mask(const AttentionMask& m, const Tensor& q, int64_t S) {
  Tensor out = m.mask;
  if (out.defined())
    TG_CHECK(out.dtype() == kBool, "scaled_dot_product_attention", "mask must be bool (true = hidden), got {}",
             out.dtype());
  if (m.key_padding.defined()) {
    Tensor pad = padding_as_4d(m.key_padding, q, S);
    out = out.defined() ? logical_or(out, pad) : pad;
  }
  return out;
}

// scaled_dot_product_attention over the first kv_length keys and values (0: all of them): the
// filled part of a KVCache with room past it, read in place by the fused kernel.
// layout kTokensFirst (q [B, T, H, d], k and v [B, S, H_kv, d]) only on the fused path (no weights).
AttentionResult attend(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& m, bool need_weights,
                       double dropout_p, double scale, int64_t kv_length,
                       AttentionLayout layout = AttentionLayout::kHeadsFirst) {
  TG_CHECK(q.defined() && k.defined() && v.defined() && q.dim() >= 2 && k.dim() >= 2, "scaled_dot_product_attention",
           "expects q [..., T, d_k], k [..., S, d_k], v [..., S, d_v]");
  const double s = scale != 0 ? scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const int64_t keys = layout == AttentionLayout::kTokensFirst ? k.size(1) : k.size(-2);
  Tensor mask = combined_mask(m, q, kv_length > 0 ? kv_length : keys);
  TG_CHECK(m.causal_offset >= 0, "scaled_dot_product_attention", "causal_offset must be >= 0, got {}", m.causal_offset);
  if (!need_weights && dropout_p < 1)  // fused: the T x S weights are never stored (nor their dropout mask)
    return {flash_attention(q, k, v,
                            {.causal = m.causal, .causal_offset = m.causal_offset, .mask = mask, .scale = s,
                             .kv_length = kv_length, .dropout = std::max(dropout_p, 0.0), .layout = layout}),
            Tensor()};
  TG_CHECK(layout == AttentionLayout::kHeadsFirst, "scaled_dot_product_attention",
           "the weights form takes [..., T, d] tensors (AttentionLayout::kHeadsFirst)");
  if (kv_length > 0 && kv_length < k.size(-2))
    return attend(q, narrow(k, -2, 0, kv_length), narrow(v, -2, 0, kv_length), m, need_weights, dropout_p, scale, 0);

  // The same from generic ops, as written in the paper; grouped-query keys and values repeated.
  if (q.dim() >= 3 && k.dim() == q.dim() && v.dim() == q.dim() && k.size(-3) != q.size(-3)) {
    TG_CHECK(k.size(-3) > 0 && q.size(-3) % k.size(-3) == 0 && v.size(-3) == k.size(-3), "scaled_dot_product_attention",
             "q has {} heads but k and v have {} and {} (grouped-query attention needs a multiple)", q.size(-3),
             k.size(-3), v.size(-3));
    return scaled_dot_product_attention(q, repeat_kv(k, q.size(-3) / k.size(-3)), repeat_kv(v, q.size(-3) / k.size(-3)), m,
                                        need_weights, dropout_p, scale);
  }
  Tensor scores = matmul(q, k, false, true) * s;  // Q Kᵀ / √d_k   [..., T, S]
  if (m.causal) {
    Tensor c = causal_mask(q.size(-2), k.size(-2), m.causal_offset, q.device());
    mask = mask.defined() ? logical_or(mask, c) : c;
  }
  Tensor weights;
  if (mask.defined()) {
    // The most negative finite value rather than -inf: a query that sees no key at all then gets
    // zero weights and a zero output (as in the fused kernel), not NaN.
    const double lowest = q.dtype() == kFloat64 ? std::numeric_limits<double>::lowest()
                                                : static_cast<double>(std::numeric_limits<float>::lowest());
    weights = softmax(masked_fill(scores, mask, lowest), -1);
    // Zero the rows of queries that see no key; on the CPU the mask alone says whether any exists (a
    // causal mask without padding has none), and then the pass over the weights and its backward are
    // skipped. A GPU always takes the pass: reading the answer would wait for the device.
    const Tensor keys_seen = sum(logical_not(mask).to(q.dtype()), {-1}, true);  // [..., T, 1]
    if (keys_seen.numel() > 0 && (q.is_cuda() || amin(keys_seen).item() == 0))
      weights = where(gt(keys_seen, 0.0), weights, 0.0);
  } else {
    weights = softmax(scores, -1);
  }
  Tensor w = dropout_p > 0 ? dropout(weights, dropout_p, true) : weights;
  return {matmul(w, v), weights};
}

}  // namespace

AttentionResult scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const AttentionMask& m, bool need_weights, double dropout_p,
                                             double scale) {
  return attend(q, k, v, m, need_weights, dropout_p, scale, 0);
}

MultiHeadAttention::MultiHeadAttention(int64_t d, int64_t h, double p, bool bias)
    : MultiHeadAttention(AttentionConfig{.d_model = d, .heads = h, .qkv_bias = bias, .out_bias = bias, .attn_dropout = p}) {}

MultiHeadAttention::MultiHeadAttention(const AttentionConfig& c)
    : d_model(c.d_model), num_heads(c.heads), num_kv_heads(c.kv_heads > 0 ? c.kv_heads : c.heads),
      d_k(c.head_dim > 0 ? c.head_dim : (c.heads > 0 ? c.d_model / c.heads : 0)), attn_dropout(c.attn_dropout) {
  const int64_t d = c.d_model, h = c.heads;
  TG_CHECK(d > 0 && h > 0 && (c.head_dim > 0 || d % h == 0), "MultiHeadAttention",
           "d_model ({}) must be a positive multiple of num_heads ({}) unless head_dim is given", d, h);
  TG_CHECK(c.head_dim >= 0 && c.kv_heads >= 0 && h % num_kv_heads == 0, "MultiHeadAttention",
           "num_heads ({}) must be a multiple of the key/value heads ({}), head_dim ({}) >= 0", h, num_kv_heads, c.head_dim);
  TG_CHECK(c.attn_dropout >= 0 && c.attn_dropout < 1, "MultiHeadAttention", "attention dropout must be in [0, 1), got {}",
           c.attn_dropout);
  w_q = register_module("w_q", std::make_shared<Linear>(d, h * d_k, c.qkv_bias));
  w_k = register_module("w_k", std::make_shared<Linear>(d, num_kv_heads * d_k, c.qkv_bias));
  w_v = register_module("w_v", std::make_shared<Linear>(d, num_kv_heads * d_k, c.qkv_bias));
  w_o = register_module("w_o", std::make_shared<Linear>(h * d_k, d, c.out_bias));
  // Xavier-uniform projections (each its own matrix) and zero biases.
  for (auto& lin : {w_q, w_k, w_v, w_o}) {
    xavier_uniform_(lin->weight);
    if (lin->bias.defined()) zeros_(lin->bias);
  }
}

Tensor KVCache::keys() const { return k.defined() && k.size(2) > len ? narrow(k, 2, 0, len) : k; }
Tensor KVCache::values() const { return v.defined() && v.size(2) > len ? narrow(v, 2, 0, len) : v; }

namespace {
// Positions [0, n) of every head of batch row sb of src [B, H, *, d] into batch row db of dst
// [B', H, *, d], from position `at` (src and dst may differ in their room along dim 2).
void copy_positions(const Tensor& src, int64_t sb, const Tensor& dst, int64_t db, int64_t n, int64_t at) {
  const int64_t H = src.size(1), d = src.size(3), es = static_cast<int64_t>(dtype_size(src.dtype()));
  const int64_t s_room = src.size(2), d_room = dst.size(2);
  if (src.is_cuda()) {  // H rows of n positions, between the two pitches
    TG_CHECK(dst.device() == src.device(), "KVCache", "the cache is on {} and the new keys on {}", dst.device(), src.device());
    auto base = [es](const Tensor& t) {
      return static_cast<unsigned char*>(t.impl().storage->data()) + t.impl().offset * es;
    };
    cuda_rt::copy_rows_on_device(src.device().index, base(dst) + ((db * H) * d_room + at) * d * es,
                                 static_cast<size_t>(d_room * d * es), base(src) + (sb * H) * s_room * d * es,
                                 static_cast<size_t>(s_room * d * es), static_cast<size_t>(n * d * es),
                                 static_cast<size_t>(H), "KVCache");
    return;
  }
  const auto* s = static_cast<const unsigned char*>(src.raw_data());
  auto* o = static_cast<unsigned char*>(dst.raw_data());
  for (int64_t h = 0; h < H; ++h)
    std::memcpy(o + ((db * H + h) * d_room + at) * d * es, s + (sb * H + h) * s_room * d * es, static_cast<size_t>(n * d * es));
}
// ... every batch row, in order.
void copy_positions(const Tensor& src, const Tensor& dst, int64_t n, int64_t at) {
  for (int64_t b = 0; b < src.size(0); ++b) copy_positions(src, b, dst, b, n, at);
  dst.impl().storage->bump_version();
}

bool only_holder(const Tensor& t) { return t.impl_ptr().use_count() == 1 && t.impl().storage.use_count() == 1; }
// Whether a gradient flows through these (then the cache joins by concat, differentiably).
bool differentiable(const Tensor& a, const Tensor& b) {
  return grad_enabled() && ((a.defined() && a.requires_grad()) || (b.defined() && b.requires_grad()));
}
}  // namespace

void KVCache::append(const Tensor& new_k, const Tensor& new_v) {
  TG_CHECK(new_k.dim() == 4 && new_v.dim() == 4 && new_k.size(0) == new_v.size(0) && new_k.size(1) == new_v.size(1) &&
               new_k.size(2) == new_v.size(2) && new_k.dtype() == new_v.dtype(),
           "KVCache", "expects keys and values [B, heads, T, d], got {} and {}", new_k.shape(), new_v.shape());
  if (k.defined())
    TG_CHECK(k.size(0) == new_k.size(0) && k.size(1) == new_k.size(1) && k.size(3) == new_k.size(3) &&
                 v.size(3) == new_v.size(3) && k.dtype() == new_k.dtype(),
             "KVCache", "holds keys {} and values {} ({}), cannot append {} and {} ({})", k.shape(), v.shape(), k.dtype(),
             new_k.shape(), new_v.shape(), new_k.dtype());
  const int64_t T = new_k.size(2);
  if (differentiable(new_k, new_v) || differentiable(k, v)) {
    k = len > 0 ? concat({keys(), new_k}, 2) : new_k;
    v = len > 0 ? concat({values(), new_v}, 2) : new_v;
    len += T;
    return;
  }
  // In place: into the room past len when this cache alone holds its buffers, else into new
  // buffers with room for as many positions again (a copy of a cache shares its buffers until one
  // of them appends: then it gets its own).
  if (!k.defined() || k.size(2) < len + T || !only_holder(k) || !only_holder(v)) {
    const int64_t capacity = std::max({len + T, 2 * len, reserve > 0 ? reserve : int64_t{64}});
    auto room = [&](const Tensor& old, const Tensor& like) {
      Tensor t = Tensor::empty({like.size(0), like.size(1), capacity, like.size(3)}, like.dtype(), like.device());
      if (len > 0) copy_positions(old, t, len, 0);
      return t;
    };
    k = room(k, new_k);
    v = room(v, new_v);
  }
  copy_positions(new_k, k, T, len);
  copy_positions(new_v, v, T, len);
  len += T;
}

void KVCache::reorder(const Tensor& rows) {
  if (!k.defined()) return;
  if (k.size(2) == len || differentiable(k, v)) {
    const Tensor here = rows.to(k.device());  // the beams' choice, made on the host
    k = index_select(keys(), 0, here);
    v = index_select(values(), 0, here);
    return;
  }
  // Room past len: new buffers of the same capacity, each kept row's positions copied.
  TG_CHECK(rows.defined() && rows.dtype() == kInt64 && rows.dim() == 1, "KVCache::reorder",
           "rows must be an int64 [B'] tensor, got {}", rows.defined() ? rows.shape() : Shape{});
  const int64_t B = k.size(0), n = rows.size(0);
  const Tensor host_rows = rows.to(kCPU);
  const int64_t* r = host_rows.data<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    TG_CHECK(r[i] >= 0 && r[i] < B, "KVCache::reorder", "row {} is {}, but the cache holds {} sequences", i, r[i], B);
  auto pick = [&](const Tensor& t) {
    Tensor out = Tensor::empty({n, t.size(1), t.size(2), t.size(3)}, t.dtype(), t.device());
    for (int64_t i = 0; i < n; ++i) copy_positions(t, r[i], out, i, len, 0);
    return out;
  };
  k = pick(k);
  v = pick(v);
}

Tensor MultiHeadAttention::forward(const Tensor& x_q, const Tensor& x_kv, const AttentionMask& mask, KVCache* cache) {
  return run(x_q, x_kv, mask, record_weights, cache).output;
}

AttentionResult MultiHeadAttention::forward_with_weights(const Tensor& x_q, const Tensor& x_kv,
                                                         const AttentionMask& mask, KVCache* cache) {
  return run(x_q, x_kv, mask, true, cache);
}

AttentionResult MultiHeadAttention::run(const Tensor& x_q, const Tensor& x_kv, const AttentionMask& mask,
                                        bool need_weights, KVCache* cache) {
  const bool reuse = cache && cache->fixed && cache->k.defined();  // cross-attention keys already projected
  TG_CHECK(x_q.defined() && x_q.dim() == 3 && x_q.size(2) == d_model &&
               (reuse || (x_kv.defined() && x_kv.dim() == 3 && x_kv.size(2) == d_model && x_q.size(0) == x_kv.size(0))),
           "MultiHeadAttention", "expects x_q [B, T, {0}] and x_kv [B, S, {0}], got {1} and {2}", d_model,
           x_q.defined() ? x_q.shape() : Shape{}, x_kv.defined() ? x_kv.shape() : Shape{});
  const int64_t B = x_q.size(0), T = x_q.size(1);
  if (cache && cache->k.defined())
    TG_CHECK(cache->k.size(0) == B, "MultiHeadAttention", "the KVCache holds {} sequences but the input has {} "
             "(reorder the cache when the batch changes)", cache->k.size(0), B);
  // [B, L, heads·d_k] -> [B, heads, L, d_k]: head i is the i-th slice of width d_k of the projection.
  auto split_heads = [&](const Tensor& x, int64_t L, int64_t heads) {
    return x.reshape({B, L, heads, d_k}).permute({0, 2, 1, 3});
  };
  double p = is_training() ? attn_dropout : 0.0;
  // The fused kernel without a cache or rotary positions reads the projections as they are,
  // [B, L, heads, d_k] (AttentionLayout::kTokensFirst; on the CPU it permutes them itself): the
  // same numbers, and a GPU's tensor cores split and merge the heads with no copies.
  if (!cache && !rotary && !need_weights && p < 1) {
    const int64_t S = x_kv.size(1);
    // Trained under autocast on a GPU's tensor cores: the projections return bfloat16, which the
    // kernel reads and writes and W_O takes as it is (ops/autocast_internal.h).
    auto trained = [](const Linear& w) { return w.weight.requires_grad() || (w.bias.defined() && w.bias.requires_grad()); };
    const bool bf16 = x_kv.dtype() == kFloat32 &&
                      detail::autocast_attention_on_tensor_cores(x_q, d_k, x_q.requires_grad() || x_kv.requires_grad() ||
                                                                               trained(*w_q) || trained(*w_k) || trained(*w_v));
    auto project = [bf16](const Linear& w, const Tensor& x) {
      return bf16 ? detail::linear_bf16_output(x, w.weight, w.bias) : w.forward(x);
    };
    const Tensor q = project(*w_q, x_q).reshape({B, T, num_heads, d_k});       // Q = X_q W_Q
    const Tensor k = project(*w_k, x_kv).reshape({B, S, num_kv_heads, d_k});   // K = X_kv W_K
    const Tensor v = project(*w_v, x_kv).reshape({B, S, num_kv_heads, d_k});   // V = X_kv W_V
    const Tensor heads = attend(q, k, v, mask, false, p, scale, 0, AttentionLayout::kTokensFirst).output;
    return {w_o->forward(heads.reshape({B, T, num_heads * d_k})), Tensor()};  // Concat(head_1..head_h) W_O
  }
  // Rotary positions start after the cached ones (self-attention).
  const int64_t start = cache && !cache->fixed ? cache->length() : 0;

  Tensor q = split_heads(w_q->forward(x_q), T, num_heads);  // Q = X_q W_Q
  if (rotary) q = rotary->forward(q, start);
  Tensor k, v;
  AttentionMask m = mask;
  if (reuse) {
    k = cache->k;
    v = cache->v;
  } else {
    const int64_t S = x_kv.size(1);
    k = split_heads(w_k->forward(x_kv), S, num_kv_heads);  // K = X_kv W_K
    v = split_heads(w_v->forward(x_kv), S, num_kv_heads);  // V = X_kv W_V
    if (rotary) k = rotary->forward(k, start);
    if (cache && !cache->fixed) {  // self-attention: the new keys follow the cached ones
      m.causal_offset += cache->length();
      cache->append(k, v);
      k = cache->k;
      v = cache->v;
    } else if (cache) {  // cross-attention: projected once
      cache->k = k;
      cache->v = v;
      cache->len = S;
    }
  }
  const int64_t kv_length = cache ? cache->length() : 0;
  AttentionResult heads = attend(q, k, v, m, need_weights, p, scale, kv_length);
  Tensor concat = heads.output.permute({0, 2, 1, 3}).reshape({B, T, num_heads * d_k});  // Concat(head_1..head_h)
  if (record_weights && heads.weights.defined()) last_weights = heads.weights.detach();
  return {w_o->forward(concat), heads.weights};                                 // ... W_O
}

void fix_attention_projections(Module& m, Projections how) {
  if (how == Projections::kLearned) return;
  for (auto& [name, p] : m.named_parameters()) {
    const bool projection = std::ranges::any_of(std::array{"w_q.", "w_k.", "w_v."}, [&n = name](const char* child) {
      return n.starts_with(child) || n.find(std::string(".") + child) != std::string::npos;
    });
    if (!projection) continue;
    if (how == Projections::kIdentity) {
      const bool weight = name.ends_with(".weight");
      TG_CHECK(!weight || (p.dim() == 2 && p.size(0) == p.size(1)), "fix_attention_projections",
               "identity projections need square weights, but {} has shape {} (grouped-query attention?)", name, p.shape());
      NoGradGuard ng;
      p.detach().copy_(weight ? eye(p.size(0), p.dtype()).to(p.device()) : zeros(p.shape(), p.dtype(), p.device()));
    }
    m.freeze_parameter(name);
  }
}

namespace {
void collect_attention(Module& m, std::vector<MultiHeadAttention*>& out) {
  if (auto* a = dynamic_cast<MultiHeadAttention*>(&m)) out.push_back(a);
  for (auto& [name, child] : m.children()) collect_attention(*child, out);
}
}  // namespace

std::vector<MultiHeadAttention*> attention_modules(Module& m) {
  std::vector<MultiHeadAttention*> out;
  collect_attention(m, out);
  return out;
}

std::vector<Tensor> record_attention(Module& m, const std::function<void()>& forward) {
  struct Saved {
    MultiHeadAttention* module;
    bool record;
    Tensor last;
  };
  std::vector<Saved> saved;
  for (MultiHeadAttention* a : attention_modules(m)) {
    saved.push_back({a, a->record_weights, std::move(a->last_weights)});
    a->record_weights = true;
    a->last_weights = Tensor();
  }
  // Puts every module back as it was, on return or exception.
  struct Restore {
    std::vector<Saved>& saved;
    ~Restore() {
      for (Saved& s : saved) s.module->record_weights = s.record, s.module->last_weights = std::move(s.last);
    }
  } restore{saved};
  forward();
  std::vector<Tensor> out;
  out.reserve(saved.size());
  for (Saved& s : saved) out.push_back(s.module->last_weights);
  return out;
}

}  // namespace tg
