#include "models/layers.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "graph/factory.h"
#include "graph/node.h"
#include "ops/ops.h"

namespace tg {

namespace {
thread_local bool t_skip_init = false;
}
SkipInitGuard::SkipInitGuard() : prev_(t_skip_init) { t_skip_init = true; }
SkipInitGuard::~SkipInitGuard() { t_skip_init = prev_; }

// Draws in float32 for a bfloat16 tensor (the generator makes float32 and float64), then rounds.
static DType draw_dtype(const Tensor& t) { return t.dtype() == kBFloat16 ? kFloat32 : t.dtype(); }

void uniform_(const Tensor& t, double low, double high) {
  if (t_skip_init) return;
  NoGradGuard ng;
  const Tensor v = uniform(t.shape(), low, high, draw_dtype(t));
  t.detach().copy_(v.dtype() == t.dtype() ? v : v.to(t.dtype()));
}
void normal_(const Tensor& t, double mean, double stddev) {
  if (t_skip_init) return;
  NoGradGuard ng;
  const Tensor v = normal(t.shape(), mean, stddev, draw_dtype(t));
  t.detach().copy_(v.dtype() == t.dtype() ? v : v.to(t.dtype()));
}
void zeros_(const Tensor& t) {
  NoGradGuard ng;
  t.detach().fill_(0);
}
void ones_(const Tensor& t) {
  NoGradGuard ng;
  t.detach().fill_(1);
}

static std::pair<double, double> fans(const Tensor& t, const char* op) {
  TG_CHECK(t.dim() >= 2, op, "needs a tensor of rank >= 2 to compute fans, got shape {}", t.shape());
  double receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= static_cast<double>(t.size(d));
  return {static_cast<double>(t.size(1)) * receptive, static_cast<double>(t.size(0)) * receptive};
}

void xavier_uniform_(const Tensor& t, double gain) {
  auto [fan_in, fan_out] = fans(t, "xavier_uniform_");
  double a = gain * std::sqrt(6.0 / (fan_in + fan_out));
  uniform_(t, -a, a);
}

void kaiming_uniform_default_(const Tensor& t) {
  auto [fan_in, fan_out] = fans(t, "kaiming_uniform_");
  double bound = 1.0 / std::sqrt(fan_in);  // gain sqrt(2 / (1 + 5)) * sqrt(3 / fan_in)
  uniform_(t, -bound, bound);
}

// ---- Linear ----

Linear::Linear(int64_t in, int64_t out, bool has_bias) : in_features(in), out_features(out) {
  TG_CHECK(in > 0 && out > 0, "Linear", "in_features ({}) and out_features ({}) must be positive", in, out);
  weight = register_parameter("weight", empty({out, in}));
  kaiming_uniform_default_(weight);
  if (has_bias) {
    bias = register_parameter("bias", empty({out}));
    double bound = 1.0 / std::sqrt(static_cast<double>(in));
    uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x) const { return forward(x, Activation::kIdentity); }

Tensor Linear::forward(const Tensor& x, Activation act) const {
  TG_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == in_features, "Linear",
           "input of shape {} does not end in in_features = {}", x.defined() ? x.shape() : Shape{}, in_features);
  return linear(x, weight, bias, act);
}

// ---- Embedding ----

Embedding::Embedding(int64_t n, int64_t d, const EmbeddingOptions& opts)
    : num_embeddings(n), dim(d), padding_idx(opts.padding_idx) {
  TG_CHECK(n > 0 && d > 0, "Embedding", "num_embeddings ({}) and dim ({}) must be positive", n, d);
  TG_CHECK(padding_idx >= -1 && padding_idx < n, "Embedding",
           "padding_idx {} is out of range for {} embeddings (-1 for none)", padding_idx, n);
  weight = register_parameter("weight", empty({n, d}));
  normal_(weight, 0.0, opts.init_std);
  if (padding_idx >= 0) {  // the padding row starts at zero (contiguous: one span; zero bytes are 0 in every float type)
    const size_t row = static_cast<size_t>(d) * dtype_size(weight.dtype());
    std::memset(static_cast<char*>(weight.raw_data()) + static_cast<size_t>(padding_idx) * row, 0, row);
  }
}

std::shared_ptr<Embedding> Embedding::from_pretrained(const Tensor& vectors, bool frozen, int64_t padding_idx) {
  TG_CHECK(vectors.defined() && vectors.dim() == 2, "Embedding::from_pretrained",
           "vectors must be a 2-D [n, dim] tensor, got shape {}", vectors.defined() ? vectors.shape() : Shape{});
  auto e = std::make_shared<Embedding>(vectors.size(0), vectors.size(1), EmbeddingOptions{.padding_idx = padding_idx});
  e->to(vectors.dtype());
  {
    NoGradGuard ng;
    e->weight.copy_(vectors);
  }
  if (frozen) e->freeze();
  return e;
}

Tensor Embedding::forward(const Tensor& ids) const { return embedding(weight, ids, padding_idx); }

// ---- LayerNorm, Dropout ----

LayerNorm::LayerNorm(int64_t d, double e) : dim(d), eps(e) {
  TG_CHECK(d > 0, "LayerNorm", "dim must be positive, got {}", d);
  weight = register_parameter("weight", ones({d}));
  bias = register_parameter("bias", zeros({d}));
}

Dropout::Dropout(double prob) : p(prob) {
  TG_CHECK(p >= 0 && p < 1, "Dropout", "probability must be in [0, 1), got {}", p);
}

// ---- Positional encodings ----

Tensor SinusoidalPositionalEncoding::table(int64_t max_len, int64_t dim, DType dtype) {
  std::vector<double> v(static_cast<size_t>(max_len * dim));
  for (int64_t pos = 0; pos < max_len; ++pos)
    for (int64_t i = 0; i < dim; i += 2) {
      double angle = static_cast<double>(pos) / std::pow(10000.0, static_cast<double>(i) / static_cast<double>(dim));
      v[pos * dim + i] = std::sin(angle);
      if (i + 1 < dim) v[pos * dim + i + 1] = std::cos(angle);
    }
  return from_vector(v, {max_len, dim}, dtype);
}

SinusoidalPositionalEncoding::SinusoidalPositionalEncoding(int64_t d, int64_t len) : dim(d), max_len(len) {
  TG_CHECK(d > 0 && len > 0, "SinusoidalPositionalEncoding", "dim ({}) and max_len ({}) must be positive", d, len);
  pe64 = table(len, d, kFloat64);
  pe = register_buffer("pe", pe64.to(kFloat32));
}

Tensor SinusoidalPositionalEncoding::forward(const Tensor& x, int64_t start) const {
  TG_CHECK(x.dim() >= 2 && x.size(-1) == dim, "SinusoidalPositionalEncoding",
           "input of shape {} must be [..., T, {}]", x.shape(), dim);
  int64_t T = x.size(-2);
  TG_CHECK(start >= 0 && start + T <= max_len, "SinusoidalPositionalEncoding",
           "positions {}..{} exceed max_len {}", start, start + T - 1, max_len);
  // float64 inputs (gradient checks, PyTorch parity) read the table computed in float64.
  return add(x, x.dtype() == kFloat64 ? pe64.narrow(0, start, T).to(x.device()) : pe.narrow(0, start, T));
}

LearnedPositionalEmbedding::LearnedPositionalEmbedding(int64_t len, int64_t d, double init_std) : max_len(len), dim(d) {
  TG_CHECK(d > 0 && len > 0, "LearnedPositionalEmbedding", "dim ({}) and max_len ({}) must be positive", d, len);
  weight = register_parameter("weight", empty({len, d}));
  normal_(weight, 0.0, init_std);
}

Tensor LearnedPositionalEmbedding::forward(const Tensor& x, int64_t start) const {
  TG_CHECK(x.dim() >= 2 && x.size(-1) == dim, "LearnedPositionalEmbedding",
           "input of shape {} must be [..., T, {}]", x.shape(), dim);
  int64_t T = x.size(-2);
  TG_CHECK(start >= 0 && start + T <= max_len, "LearnedPositionalEmbedding",
           "positions {}..{} exceed max_len {}", start, start + T - 1, max_len);
  return add(x, weight.narrow(0, start, T));
}

RMSNorm::RMSNorm(int64_t d, double e) : dim(d), eps(e) {
  TG_CHECK(d > 0, "RMSNorm", "dim must be positive, got {}", d);
  TG_CHECK(e > 0 && std::isfinite(e), "RMSNorm", "eps must be positive and finite, got {}", e);
  weight = register_parameter("weight", ones({d}));
}

namespace {
// transformers' _compute_llama3_parameters, element by element, in T's arithmetic.
template <class T>
T llama3_scaled(T inv, const RopeScaling& s) {
  const T pi = static_cast<T>(3.14159265358979323846);
  const T old_len = static_cast<T>(s.original_max_position), factor = static_cast<T>(s.factor);
  const T low = static_cast<T>(s.low_freq_factor), high = static_cast<T>(s.high_freq_factor);
  const T wavelen = T(2) * pi / inv;
  const T low_wavelen = old_len / low, high_wavelen = old_len / high;
  if (wavelen > low_wavelen) return inv / factor;
  if (wavelen < high_wavelen) return inv;
  const T smooth = (old_len / wavelen - low) / (high - low);
  return (T(1) - smooth) * inv / factor + smooth * inv;
}
}  // namespace

RotaryEmbedding::RotaryEmbedding(int64_t d, double th, const RopeScaling& sc) : head_dim(d), theta(th), scaling(sc) {
  TG_CHECK(d > 0 && d % 2 == 0, "RotaryEmbedding", "head_dim must be even and positive, got {}", d);
  TG_CHECK(th > 1 && std::isfinite(th), "RotaryEmbedding", "rope_theta must be > 1 and finite, got {}", th);
  if (sc.factor != 0)
    TG_CHECK(sc.factor >= 1 && std::isfinite(sc.factor) && sc.original_max_position > 0 && sc.low_freq_factor > 0 &&
                 sc.high_freq_factor > sc.low_freq_factor && std::isfinite(sc.high_freq_factor),
             "RotaryEmbedding", "llama3 rope scaling needs factor >= 1, original_max_position_embeddings > 0 and "
             "0 < low_freq_factor < high_freq_factor; got {}, {}, {} and {}", sc.factor, sc.original_max_position,
             sc.low_freq_factor, sc.high_freq_factor);
  for (int64_t i = 0; i < d / 2; ++i) {
    double inv = 1.0 / std::pow(th, static_cast<double>(2 * i) / static_cast<double>(d));
    // transformers: 1.0 / (base ** (arange(0, d, 2).float() / d)) in float32.
    float inv32 = 1.0f / std::pow(static_cast<float>(th), static_cast<float>(2 * i) / static_cast<float>(d));
    if (sc.factor != 0) {
      inv = llama3_scaled(inv, sc);
      inv32 = llama3_scaled(inv32, sc);
    }
    inv_freq.push_back(inv);
    inv_freq32.push_back(inv32);
  }
}

RotaryEmbedding::Tables RotaryEmbedding::tables(int64_t start, int64_t T, DType dtype, Device device) const {
  TG_CHECK(start >= 0 && T >= 0, "RotaryEmbedding", "positions must be >= 0, got {} .. {}", start, start + T - 1);
  TG_CHECK(dtype == kFloat32 || dtype == kFloat64, "RotaryEmbedding", "tables are float32 or float64, not {}", dtype);
  std::lock_guard<std::mutex> lock(memo_->mu);
  if (memo_->start == start && memo_->T == T && memo_->dtype == dtype && memo_->device == device) return memo_->t;
  const int64_t h = head_dim / 2;
  std::vector<double> c(static_cast<size_t>(T * h)), s(c.size());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < h; ++i) {
      // float32: the angle rounded as transformers makes it (float32 position times float32
      // frequency), its cosine and sine then rounded once.
      const double a = dtype == kFloat64 ? static_cast<double>(start + t) * inv_freq[i]
                                         : static_cast<double>(static_cast<float>(start + t) * inv_freq32[i]);
      c[t * h + i] = std::cos(a);
      s[t * h + i] = std::sin(a);
    }
  memo_->t = {from_vector(c, {T, h}, dtype).to(device), from_vector(s, {T, h}, dtype).to(device)};
  memo_->device = device;
  memo_->start = start;
  memo_->T = T;
  memo_->dtype = dtype;
  return memo_->t;
}

Tensor RotaryEmbedding::forward(const Tensor& x, int64_t start) const {
  TG_CHECK(x.defined() && x.dim() >= 2 && x.size(-1) == head_dim, "RotaryEmbedding",
           "input of shape {} must be [..., T, {}]", x.defined() ? x.shape() : Shape{}, head_dim);
  const Tables t = tables(start, x.size(-2), x.dtype() == kFloat64 ? kFloat64 : kFloat32, x.device());
  return rotary_embedding(x, t.cos, t.sin);
}

}  // namespace tg
