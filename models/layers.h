#pragma once
// Basic layers: Linear, Embedding, LayerNorm, Dropout, positional encodings; and the initialisers
// PyTorch uses (all drawing from tg::manual_seed's generator, so a seed fixes every weight).
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "module.h"
#include "../ops/nn.h"

namespace tg {

// In-place initialisers (no gradient is recorded; a bfloat16 tensor gets float32 draws, rounded).
//
// While a SkipInitGuard lives on this thread, the random initialisers (uniform_, normal_ and those
// built on them) leave tensors as they are and draw nothing: for a model whose every weight is
// loaded right after it is built (BertModel::from_pretrained), as PyTorch's skip_init.
class SkipInitGuard {
 public:
  SkipInitGuard();
  ~SkipInitGuard();
  SkipInitGuard(const SkipInitGuard&) = delete;
  SkipInitGuard& operator=(const SkipInitGuard&) = delete;

 private:
  bool prev_;
};
void uniform_(const Tensor& t, double low, double high);
void normal_(const Tensor& t, double mean, double stddev);
void zeros_(const Tensor& t);
void ones_(const Tensor& t);
// Glorot & Bengio: U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)); fans of a [out, in] matrix.
void xavier_uniform_(const Tensor& t, double gain = 1.0);
// PyTorch's default for Linear weights: kaiming_uniform_(a = sqrt(5)), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
void kaiming_uniform_default_(const Tensor& t);

// y = x Wᵀ + b, W [out, in]; x [..., in] -> [..., out]. Initialised as torch.nn.Linear.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) const;
  // act(x Wᵀ + b) with the bias and activation fused into one pass (the feed-forward's first half).
  Tensor forward(const Tensor& x, Activation act) const;
  std::string type_name() const override { return "Linear"; }
  int64_t in_features, out_features;
  Tensor weight, bias;  // bias undefined when built without one
};

struct EmbeddingOptions {
  int64_t padding_idx = -1;  // >= 0: that row starts at zero and never receives a gradient
  double init_std = 1.0;     // N(0, init_std), as torch.nn.Embedding (init_std 1)
};

// A lookup table [num_embeddings, dim]: ids (int64, any shape) -> [..., dim].
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, const EmbeddingOptions& opts = {});
  // Pretrained vectors [n, dim] (e.g. from word2vec); frozen: they are not trained.
  static std::shared_ptr<Embedding> from_pretrained(const Tensor& vectors, bool frozen = true, int64_t padding_idx = -1);
  Tensor forward(const Tensor& ids) const;
  std::string type_name() const override { return "Embedding"; }
  int64_t num_embeddings, dim, padding_idx;
  Tensor weight;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5);
  Tensor forward(const Tensor& x) const { return layer_norm(x, 1, weight, bias, eps); }
  std::string type_name() const override { return "LayerNorm"; }
  int64_t dim;
  double eps;
  Tensor weight, bias;
};

// y = x / sqrt(mean(x²) + eps) * weight over the last dim (Llama, Mistral, Qwen2): LayerNorm
// without the centring and the bias. weight starts at 1.
class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t dim, double eps = 1e-6);
  Tensor forward(const Tensor& x) const { return rms_norm(x, weight, eps); }
  std::string type_name() const override { return "RMSNorm"; }
  int64_t dim;
  double eps;
  Tensor weight;
};

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.1);
  Tensor forward(const Tensor& x) const { return p > 0 ? dropout(x, p, is_training()) : x; }
  std::string type_name() const override { return "Dropout"; }
  double p;
};

// The paper's fixed encoding: PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same).
// forward(x [B, T, d]) = x + PE[:T] (a buffer, not a parameter). start shifts the positions
// (decoding one step at a time).
class SinusoidalPositionalEncoding : public Module {
 public:
  SinusoidalPositionalEncoding(int64_t dim, int64_t max_len = 4096);
  Tensor forward(const Tensor& x, int64_t start = 0) const;
  std::string type_name() const override { return "SinusoidalPositionalEncoding"; }
  static Tensor table(int64_t max_len, int64_t dim, DType dtype = kFloat32);
  int64_t dim, max_len;
  Tensor pe;    // float32 (or what to() made it)
  Tensor pe64;  // the same in float64, for float64 inputs
};

// Learned absolute positions (GPT, BERT): forward(x [B, T, d]) = x + P[start : start + T].
class LearnedPositionalEmbedding : public Module {
 public:
  LearnedPositionalEmbedding(int64_t max_len, int64_t dim, double init_std = 0.02);
  Tensor forward(const Tensor& x, int64_t start = 0) const;
  std::string type_name() const override { return "LearnedPositionalEmbedding"; }
  int64_t max_len, dim;
  Tensor weight;
};

// Llama 3's rescaling of the rotary frequencies for long contexts (config "rope_type": "llama3"):
// wavelengths longer than original_max_position / low_freq_factor are stretched `factor` times,
// those shorter than original_max_position / high_freq_factor kept, the ones between blended.
struct RopeScaling {
  double factor = 0;  // 0: no scaling
  double low_freq_factor = 1, high_freq_factor = 4;
  int64_t original_max_position = 8192;
};

// Rotary position embedding (RoFormer; Llama, Mistral, Qwen2): position p turns the pair (i, i + d/2)
// of each query and key head by the angle p · inv_freq[i], inv_freq[i] = theta^(-2i/d). It has no
// parameters — W_Q and W_K learn to use it — and adds nothing to the values. MultiHeadAttention
// applies it to Q and K when given one (`rotary`); the scores q·k then depend on the distance
// between the positions, not on where they are.
class RotaryEmbedding : public Module {
 public:
  RotaryEmbedding(int64_t head_dim, double theta = 10000.0, const RopeScaling& scaling = {});
  // The cos and sin tables [T, head_dim / 2] of positions start .. start + T - 1, in dtype (float32
  // as Hugging Face computes them: float32 frequencies times float32 positions; float64 exactly).
  // The last one made is kept, so the layers of one forward share it. Made on the CPU and copied
  // to `device` once (the layers of a forward on a GPU share that copy).
  struct Tables {
    Tensor cos, sin;
  };
  Tables tables(int64_t start, int64_t T, DType dtype, Device device = kCPU) const;
  // x [..., T, head_dim] at positions start .. start + T - 1 -> rotated.
  Tensor forward(const Tensor& x, int64_t start = 0) const;
  std::string type_name() const override { return "RotaryEmbedding"; }
  int64_t head_dim;
  double theta;
  RopeScaling scaling;
  std::vector<double> inv_freq;  // [head_dim / 2], float64
  std::vector<float> inv_freq32;  // the same in float32 arithmetic, as transformers computes them

 private:
  struct Memo {
    std::mutex mu;
    int64_t start = -1, T = -1;
    DType dtype = kFloat32;
    Device device;
    Tables t;
  };
  std::shared_ptr<Memo> memo_ = std::make_shared<Memo>();
};

}  // namespace tg
