// Fused flash attention against the unfused reference built from generic ops.
#include "test_util.h"

#include <cmath>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace {
using namespace tgt;

struct Case {
  Shape lead;
  int64_t T, S, d, dv;
  bool causal;
  int mask_kind;  // 0 none, 1 key padding [B, 1, 1, S], 2 full [T, S]
  int64_t group = 1;  // query heads per key/value head (grouped-query attention; heads: lead's last dim)
};

Shape kv_lead(const Case& c) {
  Shape s = c.lead;
  s[s.rank() - 1] /= c.group;
  return s;
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << "lead " << c.lead.str() << " T " << c.T << " S " << c.S << " d " << c.d << " dv " << c.dv
      << (c.causal ? " causal" : "") << " mask " << c.mask_kind << " group " << c.group;
}

tg::AttentionOptions options(const Case& c) {
  tg::AttentionOptions o;
  o.causal = c.causal;
  if (c.mask_kind == 1) {
    // Key padding per batch element: the last (b + 1) keys of batch b are hidden.
    Shape ms{c.lead[0], 1, 1, c.S};
    std::vector<int64_t> m;
    for (int64_t b = 0; b < c.lead[0]; ++b)
      for (int64_t s = 0; s < c.S; ++s) m.push_back(s >= c.S - (b + 1) ? 1 : 0);
    o.mask = tg::from_vector(m, ms).to(tg::kBool);
  } else if (c.mask_kind == 2) {
    Tensor r = tg::rand({c.T, c.S}, tg::kFloat64);
    // Hide about 30% of pairs, but never key 0, so that every query sees at least one key.
    Tensor hide = tg::lt(r, 0.3);
    Tensor first = tg::from_vector(std::vector<int64_t>(static_cast<size_t>(c.S), 1), {c.S});
    first.data<int64_t>()[0] = 0;
    o.mask = tg::logical_and(hide, first.to(tg::kBool));
  }
  return o;
}

Shape with(const Shape& lead, int64_t a, int64_t b) {
  Shape s = lead;
  s.push_back(a);
  s.push_back(b);
  return s;
}

class Attention : public ::testing::TestWithParam<Case> {};

TEST_P(Attention, FusedMatchesUnfusedOutputsAndGradients) {
  const Case c = GetParam();
  tg::manual_seed(3);
  Tensor q = leaf(with(c.lead, c.T, c.d)), k = leaf(with(kv_lead(c), c.S, c.d)), v = leaf(with(kv_lead(c), c.S, c.dv));
  tg::AttentionOptions o = options(c);
  Tensor g = tg::randn(with(c.lead, c.T, c.dv), tg::kFloat64);
  Tensor ref = tg::attention_unfused(q, k, v, o).output;
  Tensor fused = tg::flash_attention(q, k, v, o);
  EXPECT_TRUE(close(fused, ref, 1e-10, 1e-12));
  std::vector<Tensor> gr = tg::grad({ref}, {q, k, v}, {g});
  std::vector<Tensor> gf = tg::grad({fused}, {q, k, v}, {g});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(close(gf[i], gr[i], 1e-9, 1e-11)) << "gradient " << i;
}

TEST_P(Attention, Float32AgreesToo) {
  const Case c = GetParam();
  tg::manual_seed(4);
  Tensor q = tg::randn(with(c.lead, c.T, c.d)).requires_grad_(), k = tg::randn(with(kv_lead(c), c.S, c.d)).requires_grad_();
  Tensor v = tg::randn(with(kv_lead(c), c.S, c.dv)).requires_grad_();
  tg::AttentionOptions o = options(c);
  Tensor ref = tg::attention_unfused(q, k, v, o).output, fused = tg::flash_attention(q, k, v, o);
  EXPECT_TRUE(close(fused, ref, 1e-4, 1e-5));
  Tensor g = tg::randn(ref.shape());
  std::vector<Tensor> gr = tg::grad({ref}, {q, k, v}, {g}), gf = tg::grad({fused}, {q, k, v}, {g});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(close(gf[i], gr[i], 1e-3, 1e-4)) << "gradient " << i;
}

// The backward a GPU runs (public ops from the saved log-sum-exp) against the CPU's fused kernel:
// checked here, on every case, so that CI catches a wrong formula without a GPU.
Tensor saved_lse(const Tensor& q, const Tensor& k, const tg::AttentionOptions& o) {
  const int64_t T = q.size(-2), S = o.kv_length > 0 ? o.kv_length : k.size(-2), group = q.size(-3) / k.size(-3);
  Tensor kk = tg::repeat_kv(tg::narrow(k, -2, 0, S), group);
  Tensor sc = tg::mul(tg::matmul(q, kk, false, true), o.scale != 0 ? o.scale : 1.0 / std::sqrt(double(q.size(-1))));
  const double ninf = -std::numeric_limits<double>::infinity();
  if (o.causal) sc = tg::masked_fill(sc, tg::causal_mask(T, S, o.causal_offset), ninf);
  if (o.mask.defined()) sc = tg::masked_fill(sc, o.mask, ninf);
  return tg::logsumexp(sc, {-1}, false);
}

void expect_backward_from_ops_matches(const Tensor& q, const Tensor& k, const Tensor& v, const tg::AttentionOptions& o) {
  Tensor fused = tg::flash_attention(q, k, v, o);
  Tensor g = tg::randn(fused.shape(), tg::kFloat64);
  std::vector<Tensor> want = tg::grad({fused}, {q, k, v}, {g});
  tg::NoGradGuard no_grad;
  std::vector<Tensor> got =
      tg::detail::flash_attention_backward_from_ops(q, k, v, fused.detach(), saved_lse(q, k, o), g, o);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(close(got[i], want[i], 1e-10, 1e-12)) << "gradient " << i;
}

TEST_P(Attention, TheGpusBackwardFromOpsMatchesTheFusedKernel) {
  const Case c = GetParam();
  tg::manual_seed(6);
  expect_backward_from_ops_matches(leaf(with(c.lead, c.T, c.d)), leaf(with(kv_lead(c), c.S, c.d)),
                                   leaf(with(kv_lead(c), c.S, c.dv)), options(c));
}

TEST(AttentionOps, TheGpusBackwardFromOpsHandlesKvLengthAndRowsThatSeeNothing) {
  tg::manual_seed(7);
  // A preallocated cache of 9 rows with 6 filled, grouped heads, a cache offset.
  expect_backward_from_ops_matches(leaf({2, 4, 3, 8}), leaf({2, 2, 9, 8}), leaf({2, 2, 9, 5}),
                                   {.causal = true, .causal_offset = 3, .kv_length = 6});
  Tensor mask = tg::from_vector<int64_t>({1, 1, 0, 1}, {2, 2}).to(tg::kBool);  // query 0 sees nothing
  expect_backward_from_ops_matches(leaf({1, 2, 3}), leaf({1, 2, 3}), leaf({1, 2, 3}), {.mask = mask});
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Attention,
    ::testing::Values(Case{{2, 3}, 5, 5, 4, 4, false, 0}, Case{{2, 3}, 5, 5, 4, 4, true, 0},
                      Case{{1, 2}, 64, 64, 16, 16, true, 0}, Case{{2, 1}, 65, 65, 8, 8, true, 1},
                      Case{{2, 2}, 130, 130, 8, 12, false, 1}, Case{{3}, 7, 100, 8, 5, false, 2},
                      Case{{3}, 100, 7, 8, 8, true, 0}, Case{{1, 1}, 1, 1, 3, 3, false, 0},
                      Case{{2, 2}, 129, 67, 16, 16, true, 2}, Case{{1, 2}, 70, 70, 64, 64, true, 1},
                      // Grouped-query attention: 2 and 3 query heads per key/value head, multi-query.
                      Case{{2, 4}, 9, 9, 8, 8, true, 1, 2}, Case{{1, 6}, 70, 70, 16, 16, true, 0, 3},
                      Case{{2, 4}, 5, 30, 8, 6, false, 2, 4}, Case{{3, 2, 4}, 1, 12, 8, 8, false, 0, 4}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

TEST(AttentionOps, Gradcheck) {
  tg::manual_seed(5);
  Tensor q = leaf({2, 6, 4}), k = leaf({2, 9, 4}), v = leaf({2, 9, 3});
  for (bool causal : {false, true}) {
    tg::AttentionOptions o{.causal = causal};
    EXPECT_TRUE(gradcheck_ok([&](const std::vector<Tensor>& in) { return tg::flash_attention(in[0], in[1], in[2], o); },
                             {q, k, v}));
  }
  // Grouped-query: 4 query heads on 2 key/value heads, with a cache-like offset.
  EXPECT_TRUE(gradcheck_ok(
      [&](const std::vector<Tensor>& in) { return tg::flash_attention(in[0], in[1], in[2], {.causal = true, .causal_offset = 2}); },
      {leaf({2, 4, 3, 4}), leaf({2, 2, 5, 4}), leaf({2, 2, 5, 3})}));
  // The unfused form is differentiable twice.
  EXPECT_TRUE(gradgradcheck_ok(
      [&](const std::vector<Tensor>& in) { return tg::attention_unfused(in[0], in[1], in[2], {.causal = true}).output; },
      {leaf({1, 4, 3}), leaf({1, 4, 3}), leaf({1, 4, 2})}));
}

// Dropout on the weights: the fused kernel draws the mask dropout() draws over the unfused
// weights from the same seed (and, in a SampleKeyScope, keyed by sample), never storing it: the
// same outputs and gradients; the row sums count the dropped weights; gradcheck holds with the
// mask fixed by reseeding; the backward from ops (the GPU's) regenerates the same mask.
TEST(AttentionOps, DropoutOnTheWeightsIsTheUnfusedFormsMask) {
  struct Variant {
    Shape q, kv;
    tg::AttentionOptions o;
  };
  std::vector<Variant> variants = {
      {{2, 3, 70, 8}, {2, 3, 70, 8}, {.causal = true, .dropout = 0.3}},
      {{2, 4, 5, 8}, {2, 2, 9, 8}, {.causal = true, .causal_offset = 2, .kv_length = 7, .dropout = 0.5}},  // GQA, cache
      {{3, 2, 6, 4}, {3, 2, 66, 4}, {.dropout = 0.1}}};
  for (size_t vi = 0; vi < variants.size(); ++vi) {
    const Variant& vc = variants[vi];
    for (bool by_sample : {false, true}) {
      tg::manual_seed(21);
      const Tensor q = leaf(vc.q), k = leaf(vc.kv), v = leaf(vc.kv), g = tg::randn(vc.q, tg::kFloat64);
      auto run = [&](bool fused) {
        tg::manual_seed(99);
        std::unique_ptr<tg::SampleKeyScope> scope;
        if (by_sample) {
          std::vector<int64_t> samples;
          for (int64_t b = 0; b < vc.q[0]; ++b) samples.push_back(10 + 3 * b);
          scope = std::make_unique<tg::SampleKeyScope>(77, samples);
        }
        const Tensor out = fused ? tg::flash_attention(q, k, v, vc.o) : tg::attention_unfused(q, k, v, vc.o).output;
        std::vector<Tensor> grads = tg::grad({out}, {q, k, v}, {g});
        grads.insert(grads.begin(), out.detach());
        return grads;
      };
      const std::vector<Tensor> fused = run(true), unfused = run(false);
      const std::string what = "variant " + std::to_string(vi) + (by_sample ? " keyed by sample" : "");
      for (int i = 0; i < 4; ++i) EXPECT_TRUE(close(fused[i], unfused[i], 1e-10, 1e-12)) << what << " tensor " << i;
      // The same seed without dropout gives another output: the mask did something.
      tg::AttentionOptions none = vc.o;
      none.dropout = 0;
      EXPECT_FALSE(close(fused[0], tg::flash_attention(q, k, v, none).detach(), 1e-3, 1e-3)) << what;
    }
  }
  // gradcheck (float64) with the mask held fixed by reseeding before each call.
  tg::AttentionOptions o{.causal = true, .dropout = 0.4};
  EXPECT_TRUE(gradcheck_ok(
      [&](const std::vector<Tensor>& in) {
        tg::manual_seed(3);
        return tg::flash_attention(in[0], in[1], in[2], o);
      },
      {leaf({2, 6, 4}), leaf({2, 9, 4}), leaf({2, 9, 3})}));
  // The GPU's backward from ops regenerates the same mask.
  tg::manual_seed(4);
  const Tensor q = leaf({2, 2, 9, 8}), k = leaf({2, 2, 11, 8}), v = leaf({2, 2, 11, 6});
  tg::manual_seed(5);
  const Tensor fused = tg::flash_attention(q, k, v, o);
  const Tensor g = tg::randn(fused.shape(), tg::kFloat64);
  const std::vector<Tensor> want = tg::grad({fused}, {q, k, v}, {g});
  tg::NoGradGuard no_grad;
  tg::manual_seed(5);
  const std::vector<Tensor> got = tg::detail::flash_attention_backward_from_ops(q, k, v, fused.detach(), saved_lse(q, k, o), g, o);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(close(got[i], want[i], 1e-10, 1e-12)) << "gradient " << i;
  EXPECT_TRUE(throws_with([&] { (void)tg::flash_attention(q, k, v, {.dropout = 1.0}); },
                          {"flash_attention: dropout must be in [0, 1), got 1"}));
}

// AttentionLayout::kTokensFirst ([B, T, H, d]) is the [B, H, T, d] attention permuted, bit for bit:
// outputs and gradients, fused and unfused, with padding and general masks, grouped heads with a
// partly read cache, and dropout keyed by generator and by sample. (On a GPU the tensor cores read
// the layout in place: tests/gpu.)
TEST(AttentionOps, TokensFirstLayoutIsThePermutedHeadsFirst) {
  struct Variant {
    Shape q, kv;  // [B, H, T, d] and [B, H_kv, S, d]
    tg::AttentionOptions o;
    bool pad = false, by_sample = false;
  };
  const std::vector<Variant> variants = {
      {{2, 3, 7, 8}, {2, 3, 9, 8}, {}, true},
      {{2, 4, 5, 8}, {2, 2, 9, 8}, {.causal = true, .causal_offset = 2, .kv_length = 7, .dropout = 0.5}},
      {{3, 2, 6, 4}, {3, 2, 6, 4}, {.causal = true, .dropout = 0.2}, false, true}};
  const Shape swap{0, 2, 1, 3};
  for (size_t vi = 0; vi < variants.size(); ++vi) {
    const Variant& vc = variants[vi];
    tg::manual_seed(31);
    const Tensor q = leaf(vc.q), k = leaf(vc.kv), v = leaf(vc.kv), g = tg::randn(vc.q, tg::kFloat64);
    tg::AttentionOptions heads_first = vc.o;
    if (vc.pad) heads_first.mask = tg::gt(tg::randn({vc.q[0], 1, 1, vc.kv[2]}), 0.8);
    tg::AttentionOptions tokens_first = heads_first;
    tokens_first.layout = tg::AttentionLayout::kTokensFirst;
    for (bool fused : {true, false}) {
      auto run = [&](const std::vector<Tensor>& in, const tg::AttentionOptions& o, const Tensor& grad) {
        tg::manual_seed(8);
        std::unique_ptr<tg::SampleKeyScope> scope;
        if (vc.by_sample) scope = std::make_unique<tg::SampleKeyScope>(5, std::vector<int64_t>{4, 9, 2});
        const Tensor out = fused ? tg::flash_attention(in[0], in[1], in[2], o) : tg::attention_unfused(in[0], in[1], in[2], o).output;
        std::vector<Tensor> r = tg::grad({out}, in, {grad});
        r.insert(r.begin(), out.detach());
        return r;
      };
      const std::vector<Tensor> want = run({q, k, v}, heads_first, g);
      auto tokens = [&](const Tensor& x) {  // the same values as a [B, T, H, d] leaf
        Tensor t = tg::permute(x, swap).detach();
        t.requires_grad_();
        return t;
      };
      const std::vector<Tensor> got = run({tokens(q), tokens(k), tokens(v)}, tokens_first, tg::permute(g, swap));
      for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(got[i].shape(), tg::permute(want[i], swap).shape()) << "variant " << vi << " tensor " << i;
        EXPECT_TRUE(close(tg::permute(got[i], swap), want[i], 0, 0)) << "variant " << vi << (fused ? " fused" : " unfused")
                                                                     << " tensor " << i;
      }
    }
  }
  const Tensor t3 = tg::ones({2, 4, 8});
  EXPECT_TRUE(throws_with([&] { (void)tg::flash_attention(t3, t3, t3, {.layout = tg::AttentionLayout::kTokensFirst}); },
                          {"flash_attention: AttentionLayout::kTokensFirst takes q [B, T, H, d]", "[2, 4, 8]"}));
}

TEST(AttentionOps, WeightsAreRowStochasticAndRespectMasks) {
  Tensor q = tg::randn({1, 2, 6, 4}), k = tg::randn({1, 2, 6, 4}), v = tg::randn({1, 2, 6, 4});
  tg::AttentionResult r = tg::attention_unfused(q, k, v, {.causal = true});
  EXPECT_TRUE(close(tg::sum(r.weights, {-1}), std::vector<double>(12, 1.0), 1e-5, 1e-6));
  std::vector<float> w = r.weights.to_vector<float>();
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 6; ++i)
      for (int j = i + 1; j < 6; ++j) EXPECT_EQ(w[(h * 6 + i) * 6 + j], 0.0f);
}

// bfloat16 inputs: the float32 computation rounded once, and a bfloat16 gradient back to each input.
TEST(AttentionOps, BFloat16IsFloat32RoundedOnce) {
  tg::manual_seed(9);
  Tensor q = tg::randn({2, 2, 5, 8}).to(tg::kBFloat16).requires_grad_(), k = tg::randn({2, 2, 7, 8}).to(tg::kBFloat16),
         v = tg::randn({2, 2, 7, 8}).to(tg::kBFloat16);
  Tensor out = tg::flash_attention(q, k, v, {.causal = true, .causal_offset = 2});
  EXPECT_EQ(out.dtype(), tg::kBFloat16);
  Tensor want = tg::flash_attention(q.detach().to(tg::kFloat32), k.to(tg::kFloat32), v.to(tg::kFloat32),
                                    {.causal = true, .causal_offset = 2}).to(tg::kBFloat16);
  EXPECT_EQ(out.to(tg::kFloat32).to_vector<float>(), want.to(tg::kFloat32).to_vector<float>());
  tg::sum(out.to(tg::kFloat32)).backward();
  EXPECT_EQ(q.grad().dtype(), tg::kBFloat16);
  EXPECT_EQ(q.grad().shape(), q.shape());
}

TEST(AttentionOps, RowWithNoVisibleKeyGivesZero) {
  Tensor q = leaf({1, 2, 3}), k = leaf({1, 2, 3}), v = leaf({1, 2, 3});
  Tensor mask = tg::from_vector<int64_t>({1, 1, 0, 1}, {2, 2}).to(tg::kBool);  // query 0 sees nothing
  Tensor out = tg::flash_attention(q, k, v, {.mask = mask});
  std::vector<double> o = out.to_vector<double>();
  EXPECT_EQ(o[0], 0.0);
  EXPECT_EQ(o[2], 0.0);
  tg::sum(out).backward();
  for (double g : q.grad().to_vector<double>()) EXPECT_TRUE(std::isfinite(g));
}

TEST(AttentionOps, SameResultsAnyThreadCount) {
  tg::manual_seed(8);
  Tensor q = tg::randn({4, 2, 100, 16}).requires_grad_(), k = tg::randn({4, 2, 100, 16}).requires_grad_();
  Tensor v = tg::randn({4, 2, 100, 16}).requires_grad_();
  auto run = [&](int threads) {
    tg::set_num_threads(threads);
    q.zero_grad();
    Tensor o = tg::flash_attention(q, k, v, {.causal = true});
    tg::sum(o * o).backward();
    return std::make_pair(o.to_vector<float>(), q.grad().to_vector<float>());
  };
  auto a = run(1), b = run(2);
  tg::set_num_threads(2);
  EXPECT_EQ(a.first, b.first);
  EXPECT_EQ(a.second, b.second);
}

TEST(AttentionOps, MemoryDoesNotHoldTheScoreMatrix) {
  // T = 2048, 2 heads of 16: the weights would take 2 * 2048 * 2048 * 4 = 32 MB; q, k, v, the
  // output and the saved log-sum-exp take under 1.1 MB.
  tg::set_storage_cache_limit(0);
  Tensor q = tg::randn({2, 2048, 16}).requires_grad_(), k = tg::randn({2, 2048, 16}).requires_grad_();
  Tensor v = tg::randn({2, 2048, 16}).requires_grad_();
  size_t before = tg::storage_live_bytes();
  Tensor o = tg::flash_attention(q, k, v, {.causal = true});
  EXPECT_LT(tg::storage_live_bytes() - before, size_t{1} << 20);
  tg::sum(o).backward();
  tg::set_storage_cache_limit(tg::kStorageCacheAuto);
}

TEST(AttentionOps, Errors) {
  Tensor q = tg::ones({2, 4, 8}), k = tg::ones({2, 5, 8}), v = tg::ones({2, 5, 3});
  EXPECT_TRUE(throws_with([&] { tg::flash_attention(q, tg::ones({2, 5, 7}), v); }, {"flash_attention", "head size 8", "7"}));
  EXPECT_TRUE(throws_with([&] { tg::flash_attention(q, k, tg::ones({2, 6, 3})); }, {"flash_attention", "5 keys", "6 values"}));
  EXPECT_TRUE(throws_with([&] { tg::flash_attention(q, tg::ones({3, 5, 8}), tg::ones({3, 5, 3})); }, {"leading dims"}));
  EXPECT_TRUE(throws_with([&] { tg::flash_attention(tg::ones({4}), k, v); }, {"rank"}));
  EXPECT_TRUE(throws_with([&] { tg::flash_attention(q, k, v, {.mask = tg::ones({4, 5})}); }, {"mask must be bool"}));
  EXPECT_TRUE(throws_with([&] { tg::flash_attention(q, k, v, {.mask = tg::ones({4, 4}).to(tg::kBool)}); },
                          {"mask of shape [4, 4]", "[2, 4, 5]"}));
  Tensor qq = leaf({1, 2, 2}), kq = leaf({1, 2, 2}), vq = leaf({1, 2, 2});
  Tensor out = tg::flash_attention(qq, kq, vq);
  EXPECT_TRUE(throws_with([&] { tg::grad({tg::sum(out)}, {qq}, {}, {.create_graph = true}); },
                          {"flash_attention", "attention_unfused"}));
}

}  // namespace
