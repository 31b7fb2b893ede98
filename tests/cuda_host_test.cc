// The host half of the GPU kernels, checked on the CPU (no GPU needed): the broadcast plans the
// elementwise kernels index through, and the per-element formulas they compute (ops/cuda/math.h),
// against the CPU's ops, and the per-element formulas of dropout's mask and the optimizers' updates
// against the CPU's vectorised kernels. A wrong plan or formula fails here, in CI, before any GPU sees it.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "ops/cuda/math.h"
#include "ops/cuda/attention.h"
#include "ops/cuda/matmul.h"
#include "ops/cuda/mma_layout.h"
#include "ops/cuda/reduce.h"
#include "ops/cuda/strided.h"
#include "ops/kernels/dropout.h"
#include "ops/kernels/optim.h"
#include "tapegrad.h"

namespace {

using tg::Tensor;
namespace m = tg::cuda_ops::math;

tg::cuda_ops::StridedPlan plan_of(const tg::Shape& out, const std::vector<tg::Shape>& ins) {
  const int64_t* shapes[3] = {};
  int ranks[3] = {};
  for (size_t k = 0; k < ins.size(); ++k) {
    shapes[k] = ins[k].data();
    ranks[k] = static_cast<int>(ins[k].rank());
  }
  tg::cuda_ops::StridedPlan p;
  EXPECT_TRUE(tg::cuda_ops::make_strided_plan(static_cast<int>(out.rank()), out.data(), static_cast<int>(ins.size()),
                                              shapes, ranks, &p));
  return p;
}

// What the GPU's binary kernel computes, run on the host through the same plan.
std::vector<double> apply_plan(const tg::cuda_ops::StridedPlan& p, const std::vector<double>& a,
                               const std::vector<double>& b) {
  std::vector<double> out(static_cast<size_t>(p.numel));
  for (int64_t i = 0; i < p.numel; ++i) {
    int64_t off[3];
    tg::cuda_ops::plan_offsets(p, i, off);
    out[static_cast<size_t>(i)] = m::binary(m::Binary::kSub, a[static_cast<size_t>(off[0])], b[static_cast<size_t>(off[1])]);
  }
  return out;
}

TEST(CudaHost, BroadcastPlansIndexAsTheCpuBroadcasts) {
  tg::manual_seed(3);
  const std::vector<std::pair<tg::Shape, tg::Shape>> cases = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}},       {{4, 1, 3}, {5, 1}},     {{1}, {7, 2}},          {{}, {3, 4}},
      {{3, 1, 4, 1}, {1, 5, 1, 6}},          {{2, 3, 4, 5, 6}, {3, 1, 5, 1}}, {{6, 1, 1, 2}, {1, 1}},
      {{1, 1, 1}, {1, 1, 1}},                {{0, 3}, {3}},       {{2, 1, 2, 1, 2, 1, 2, 1}, {2, 1, 2, 1, 2, 1, 2}}};
  for (const auto& [sa, sb] : cases) {
    Tensor a = tg::randn(sa, tg::kFloat64), b = tg::randn(sb, tg::kFloat64);
    Tensor want = tg::sub(a, b);
    auto p = plan_of(want.shape(), {sa, sb});
    EXPECT_LE(p.rank, tg::cuda_ops::StridedPlan::kMaxDims);
    EXPECT_EQ(apply_plan(p, a.to_vector<double>(), b.to_vector<double>()), want.to_vector<double>())
        << sa.str() << " - " << sb.str();
  }
  // Same shapes are flat; a row plus a column merges to two dimensions, whatever the rank.
  EXPECT_TRUE(plan_of({5, 6, 7}, {{5, 6, 7}, {5, 6, 7}}).flat);
  auto p = plan_of({8, 1, 9, 10}, {{8, 1, 9, 10}, {10}});
  EXPECT_FALSE(p.flat);
  EXPECT_EQ(p.rank, 2);
  EXPECT_EQ(p.size[0], 72);
  EXPECT_EQ(p.size[1], 10);
  // Nine dimensions that alternate between the inputs cannot merge: refused (the op names itself).
  const tg::Shape a9{2, 1, 2, 1, 2, 1, 2, 1, 2}, b9{2, 1, 2, 1, 2, 1, 2, 1};
  const int64_t* shapes[2] = {a9.data(), b9.data()};
  const int ranks[2] = {9, 8};
  const tg::Shape out9{2, 2, 2, 2, 2, 2, 2, 2, 2};
  tg::cuda_ops::StridedPlan q;
  EXPECT_FALSE(tg::cuda_ops::make_strided_plan(9, out9.data(), 2, shapes, ranks, &q));
}

TEST(CudaHost, MaximumAndMinimumPropagateNaNOnTheCpuToo) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (tg::DType d : {tg::kFloat32, tg::kFloat64}) {
    std::vector<double> v(40, 2.0);
    v[0] = v[17] = nan;  // in the vector body and the tail
    Tensor a = tg::from_vector(v, {40}, d), b = tg::full({40}, 1.5, d);
    for (const Tensor& r : {tg::maximum(a, b), tg::minimum(a, b), tg::maximum(b, a), tg::minimum(b, a)}) {
      const std::vector<double> got = r.to_vector<double>();
      EXPECT_TRUE(std::isnan(got[0]) && std::isnan(got[17])) << tg::dtype_name(d);
      EXPECT_FALSE(std::isnan(got[1]));
    }
  }
}

TEST(CudaHost, BFloat16RoundingIsTheCpusBitForBit) {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 3.3895e38f, 3.4e38f, -3.4e38f,
                               std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::denorm_min(), 1e-40f, 1.00390625f, 1.01171875f};
  std::mt19937 rng(5);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, sizeof f);
    values.push_back(f);
  }
  for (float f : values) {
    ASSERT_EQ(m::float_to_bf16(f), tg::bfloat16(f).bits) << f;
    const uint16_t b = m::float_to_bf16(f);
    const float back = m::bf16_to_float(b);
    const float cpu = static_cast<float>(tg::bfloat16::from_bits(b));
    ASSERT_EQ(std::memcmp(&back, &cpu, sizeof back), 0);
  }
}

template <class T>
void expect_close(const std::vector<T>& got, const std::vector<T>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << what << " at " << i;
      continue;
    }
    EXPECT_LE(std::fabs(g - w), tol * (1 + std::fabs(w))) << what << " at " << i << ": " << g << " vs " << w;
  }
}

// Every unary code against the CPU op it stands for, in float32 and float64.
TEST(CudaHost, UnaryFormulasMatchTheCpuOps) {
  tg::manual_seed(9);
  struct Case {
    m::Unary code;
    std::function<Tensor(const Tensor&)> cpu;
    bool positive;
    double a, b;
  };
  const std::vector<std::pair<std::string, Case>> cases = {
      {"affine", {m::Unary::kAffine, [](const Tensor& x) { return tg::add(tg::mul(x, -1.5), 0.25); }, false, -1.5, 0.25}},
      {"exp", {m::Unary::kExp, [](const Tensor& x) { return tg::exp(x); }, false, 0, 0}},
      {"log", {m::Unary::kLog, [](const Tensor& x) { return tg::log(x); }, true, 0, 0}},
      {"sqrt", {m::Unary::kSqrt, [](const Tensor& x) { return tg::sqrt(x); }, true, 0, 0}},
      {"rsqrt", {m::Unary::kRsqrt, [](const Tensor& x) { return tg::rsqrt(x); }, true, 0, 0}},
      {"abs", {m::Unary::kAbs, [](const Tensor& x) { return tg::abs(x); }, false, 0, 0}},
      {"sign", {m::Unary::kSign, [](const Tensor& x) { return tg::sign(x); }, false, 0, 0}},
      {"square", {m::Unary::kSquare, [](const Tensor& x) { return tg::square(x); }, false, 0, 0}},
      {"reciprocal", {m::Unary::kReciprocal, [](const Tensor& x) { return tg::reciprocal(x); }, true, 0, 0}},
      {"tanh", {m::Unary::kTanh, [](const Tensor& x) { return tg::tanh(x); }, false, 0, 0}},
      {"sigmoid", {m::Unary::kSigmoid, [](const Tensor& x) { return tg::sigmoid(x); }, false, 0, 0}},
      {"relu", {m::Unary::kRelu, [](const Tensor& x) { return tg::relu(x); }, false, 0, 0}},
      {"silu", {m::Unary::kSilu, [](const Tensor& x) { return tg::silu(x); }, false, 0, 0}},
      {"erf", {m::Unary::kErf, [](const Tensor& x) { return tg::erf(x); }, false, 0, 0}},
      {"sin", {m::Unary::kSin, [](const Tensor& x) { return tg::sin(x); }, false, 0, 0}},
      {"cos", {m::Unary::kCos, [](const Tensor& x) { return tg::cos(x); }, false, 0, 0}},
      {"gelu", {m::Unary::kGeluErf, [](const Tensor& x) { return tg::gelu(x); }, false, 0, 0}},
      {"gelu_tanh", {m::Unary::kGeluTanh, [](const Tensor& x) { return tg::gelu(x, tg::GeluApprox::kTanh); }, false, 0, 0}},
      {"pow 3", {m::Unary::kPowScalar, [](const Tensor& x) { return tg::pow(x, 3.0); }, false, 3, 0}},
      {"pow 0.5", {m::Unary::kPowScalar, [](const Tensor& x) { return tg::pow(x, 0.5); }, true, 0.5, 0}},
      {"clamp", {m::Unary::kClamp, [](const Tensor& x) { return tg::clamp(x, -0.5, 0.75); }, false, -0.5, 0.75}},
  };
  for (const auto& [name, c] : cases) {
    Tensor x64 = tg::mul(tg::randn({257}, tg::kFloat64), 3.0);
    if (c.positive) x64 = tg::add(tg::abs(x64), 0.01);
    Tensor x32 = x64.to(tg::kFloat32);
    std::vector<float> got32;
    for (float v : x32.to_vector<float>()) got32.push_back(m::unary<float>(c.code, v, float(c.a), float(c.b)));
    expect_close(got32, c.cpu(x32).to_vector<float>(), 2e-6, name + " float32");
    std::vector<double> got64;
    for (double v : x64.to_vector<double>()) got64.push_back(m::unary<double>(c.code, v, c.a, c.b));
    expect_close(got64, c.cpu(x64).to_vector<double>(), 1e-13, name + " float64");
  }
}

TEST(CudaHost, BinaryAndCompareFormulasMatchTheCpuOps) {
  tg::manual_seed(10);
  Tensor a = tg::randn({300}, tg::kFloat64), b = tg::randn({300}, tg::kFloat64);
  // NaN and ties where maximum/minimum and the comparisons must agree with the CPU.
  std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  av[0] = std::nan(""), bv[1] = std::nan(""), av[2] = bv[2] = 0.5;
  a = tg::from_vector(av, {300}, tg::kFloat64);
  b = tg::from_vector(bv, {300}, tg::kFloat64);
  Tensor pa = tg::add(tg::abs(a), 0.1);
  const std::vector<std::tuple<std::string, m::Binary, Tensor, Tensor, Tensor>> cases = {
      {"add", m::Binary::kAdd, a, b, tg::add(a, b)},       {"sub", m::Binary::kSub, a, b, tg::sub(a, b)},
      {"mul", m::Binary::kMul, a, b, tg::mul(a, b)},       {"div", m::Binary::kDiv, a, b, tg::div(a, b)},
      {"pow", m::Binary::kPow, pa, b, tg::pow(pa, b)},     {"maximum", m::Binary::kMax, a, b, tg::maximum(a, b)},
      {"minimum", m::Binary::kMin, a, b, tg::minimum(a, b)},
      {"bce", m::Binary::kBceWithLogits, a, tg::sigmoid(b),
       tg::binary_cross_entropy_with_logits(a.narrow(0, 3, 297), tg::sigmoid(b).narrow(0, 3, 297), tg::Reduction::kNone)},
  };
  for (const auto& [name, code, x, y, want] : cases) {
    std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>(), got;
    const size_t skip = name == "bce" ? 3 : 0;  // the CPU loss refuses NaN inputs: compared without them
    for (size_t i = skip; i < xv.size(); ++i) got.push_back(m::binary<double>(code, xv[i], yv[i]));
    expect_close(got, want.to_vector<double>(), 1e-13, name);
  }
  const std::vector<std::tuple<std::string, m::Compare, Tensor>> cmps = {
      {"eq", m::Compare::kEq, tg::eq(a, b)}, {"ne", m::Compare::kNe, tg::ne(a, b)}, {"lt", m::Compare::kLt, tg::lt(a, b)},
      {"le", m::Compare::kLe, tg::le(a, b)}, {"gt", m::Compare::kGt, tg::gt(a, b)}, {"ge", m::Compare::kGe, tg::ge(a, b)}};
  for (const auto& [name, code, want] : cmps) {
    std::vector<bool> got;
    for (size_t i = 0; i < av.size(); ++i) got.push_back(m::compare<double>(code, av[i], bv[i]));
    EXPECT_EQ(got, want.to_vector<bool>()) << name;
  }
  // The fused GELU derivatives: against the same derivative built from public ops.
  for (bool tanh_form : {false, true}) {
    Tensor g = tg::randn({50}, tg::kFloat64);
    Tensor want = tg::grad_of_gelu(g, a.narrow(0, 3, 50), tanh_form ? tg::GeluApprox::kTanh : tg::GeluApprox::kNone);
    std::vector<double> gv = g.to_vector<double>(), got;
    for (size_t i = 0; i < 50; ++i)
      got.push_back(m::binary<double>(tanh_form ? m::Binary::kGeluTanhGrad : m::Binary::kGeluErfGrad, gv[i], av[i + 3]));
    expect_close(got, want.to_vector<double>(), 1e-13, tanh_form ? "gelu tanh grad" : "gelu erf grad");
  }
}

// cuBLAS's column-major product, done on the host as cuBLAS defines it, over the operands and
// leading dimensions gemm_mapping gives for a row-major product: it must equal tg::matmul.
std::vector<double> column_major_gemm(const tg::cuda_ops::GemmMapping& g, const std::vector<double>& first,
                                      const std::vector<double>& second) {
  auto at = [](const std::vector<double>& m, const tg::cuda_ops::ColumnMajorOperand& o, int64_t r, int64_t c) {
    // element (r, c) of op(stored), stored column-major with o.ld
    return o.transpose ? m[static_cast<size_t>(c + r * o.ld)] : m[static_cast<size_t>(r + c * o.ld)];
  };
  std::vector<double> c(static_cast<size_t>(g.ldc * g.n));
  for (int64_t j = 0; j < g.n; ++j)
    for (int64_t i = 0; i < g.m; ++i) {
      double s = 0;
      for (int64_t p = 0; p < g.k; ++p) s += at(first, g.first, i, p) * at(second, g.second, p, j);
      c[static_cast<size_t>(i + j * g.ldc)] = s;
    }
  return c;
}

TEST(CudaHost, RowMajorProductsMapOntoCublasColumnMajorOnes) {
  tg::manual_seed(12);
  const int64_t M = 5, N = 3, K = 4;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Tensor a = tg::randn(ta ? tg::Shape{K, M} : tg::Shape{M, K}, tg::kFloat64);
      Tensor b = tg::randn(tb ? tg::Shape{N, K} : tg::Shape{K, N}, tg::kFloat64);
      const auto g = tg::cuda_ops::gemm_mapping(M, N, K, ta, tb);
      EXPECT_EQ(g.m, N);
      EXPECT_EQ(g.n, M);
      // the operands' stored shapes, column-major: rows x cols must hold the whole matrix at ld
      EXPECT_EQ(g.first.rows * g.first.cols, N * K);
      EXPECT_EQ(g.second.rows * g.second.cols, M * K);
      EXPECT_EQ(g.first.ld, g.first.rows);
      EXPECT_EQ(g.second.ld, g.second.rows);
      const std::vector<double> c = column_major_gemm(g, b.to_vector<double>(), a.to_vector<double>());
      expect_close(c, tg::matmul(a, b, ta, tb).to_vector<double>(), 1e-12,
                   fmt::format("matmul ta={} tb={}", ta, tb));  // column-major [N, M] is row-major [M, N]
    }
}

// The GPU's dropout computes each element alone with dropout_element (counter i of the call's key,
// or counter j of row r's key); the CPU's kernels run vectors and chunks. Bit for bit the same,
// NaNs included, across chunk boundaries and vector tails.
template <class T>
void expect_dropout_elements_match(uint32_t threshold, uint64_t key) {
  const int64_t n = 5000, len = 37;
  std::vector<T> x(static_cast<size_t>(n)), flat(x.size()), rows(x.size());
  std::mt19937 rng(7);
  std::normal_distribution<double> nd;
  for (T& v : x) v = static_cast<T>(nd(rng));
  x[3] = x[2100] = std::numeric_limits<T>::quiet_NaN();
  const T scale = static_cast<T>(1.0 / (1.0 - threshold / 4294967296.0));
  const int32_t thr31 = static_cast<int32_t>(threshold >> 1);
  tg::kernels::dropout_apply<T>(x.data(), flat.data(), n, key, threshold, scale);
  std::vector<uint64_t> row_keys(static_cast<size_t>((n + len - 1) / len));
  for (size_t r = 0; r < row_keys.size(); ++r) row_keys[r] = key * 31 + r;
  const int64_t whole = n / len * len;  // the row kernel runs whole rows
  tg::kernels::dropout_apply_rows<T>(x.data(), rows.data(), whole / len, len, row_keys.data(), threshold, scale);
  auto same = [](T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0 || (std::isnan(a) && std::isnan(b)); };
  int64_t dropped = 0;
  for (int64_t i = 0; i < n; ++i) {
    const T want = m::dropout_element<T>(x[i], static_cast<uint32_t>(i), static_cast<uint32_t>(key),
                                                   static_cast<uint32_t>(key >> 32), thr31, scale);
    ASSERT_TRUE(same(flat[i], want)) << "element " << i << ": " << flat[i] << " vs " << want;
    dropped += want == T(0);
    if (i >= whole) continue;
    const uint64_t rk = row_keys[static_cast<size_t>(i / len)];
    const T want_row = m::dropout_element<T>(x[i], static_cast<uint32_t>(i % len), static_cast<uint32_t>(rk),
                                                       static_cast<uint32_t>(rk >> 32), thr31, scale);
    ASSERT_TRUE(same(rows[i], want_row)) << "row element " << i;
  }
  const double p = threshold / 4294967296.0;
  EXPECT_NEAR(static_cast<double>(dropped) / n, p, 0.03) << "the mask drops about p of the elements";
}

TEST(CudaHost, DropoutsPerElementFormulaIsTheCpuMaskBitForBit) {
  for (uint32_t threshold : {429496729u, 2147483648u, 4000000000u})
    for (uint64_t key : {0x0123456789abcdefull, 42ull}) {
      expect_dropout_elements_match<float>(threshold, key);
      expect_dropout_elements_match<double>(threshold, key);
    }
}

// Attention's dropout on the GPU keeps weight (n, i, j) of [n, T, S] weights when
// math::dropout_keeps(key, (n T + i) S + j) says so: exactly the mask tg::dropout draws over the
// unfused weights from the same seed (the key is the generator's next draw).
TEST(CudaHost, AttentionDropoutsCounterIsDropoutsMask) {
  const int64_t N = 6, T = 5, S = 37;
  for (double p : {0.1, 0.5}) {
    tg::manual_seed(17);
    const std::vector<float> mask = tg::dropout(tg::ones({2, 3, T, S}), p, true).to_vector<float>();
    tg::manual_seed(17);
    const uint64_t key = tg::default_generator().next_u64();
    const int32_t thr31 = static_cast<int32_t>(static_cast<uint32_t>(std::min(p * 4294967296.0, 4294967295.0)) >> 1);
    int kept = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < S; ++j) {
          const bool want = mask[static_cast<size_t>((n * T + i) * S + j)] != 0.0f;
          ASSERT_EQ(m::dropout_keeps(key, (n * T + i) * S + j, thr31), want) << "p " << p << " at " << n << ", " << i << ", " << j;
          kept += want;
        }
    EXPECT_NEAR(kept / double(N * T * S), 1 - p, 0.06);
  }
}

// The GPU's optimizer kernel updates each element with math::adam_element / sgd_element; the CPU's
// kernels run SIMD bodies and those formulas' scalar twins in their tails. Over 1,003 elements
// (vector bodies and tails): the same values (the bodies fuse g + wd p into an FMA: 1 ulp apart).
template <class T>
void expect_optimizer_elements_match() {
  const int64_t n = 1003;
  std::mt19937 rng(3);
  std::normal_distribution<double> nd;
  std::vector<T> p(static_cast<size_t>(n)), g(p.size()), m(p.size()), v(p.size()), buf(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] = static_cast<T>(nd(rng));
    g[i] = static_cast<T>(nd(rng));
    m[i] = static_cast<T>(0.1 * nd(rng));
    v[i] = static_cast<T>(std::fabs(0.1 * nd(rng)));
    buf[i] = static_cast<T>(nd(rng));
  }
  const T tol = std::is_same_v<T, float> ? T(2e-6) : T(1e-14);
  auto near = [&](T a, T b) { return std::fabs(a - b) <= tol * (1 + std::fabs(b)); };
  std::vector<T> pa = p, ma = m, va = v;
  tg::kernels::adam_update<T>(pa.data(), g.data(), ma.data(), va.data(), n, T(0.9), T(0.999), T(1e-8), T(0.01), T(1.2),
                              T(0.01), T(0.999));
  std::vector<T> ps = p, bs = buf;
  tg::kernels::sgd_update<T>(ps.data(), g.data(), bs.data(), n, T(0.1), T(0.01), T(0.9), T(0.1), true, false);
  for (int64_t i = 0; i < n; ++i) {
    T pi = p[i], mi = m[i], vi = v[i];
    m::adam_element(pi, g[i], mi, vi, T(0.9), T(0.999), T(1e-8), T(0.01), T(1.2), T(0.01), T(0.999));
    ASSERT_TRUE(near(pi, pa[i]) && near(mi, ma[i]) && near(vi, va[i])) << "adam element " << i;
    T qi = p[i], bi = buf[i];
    m::sgd_element(qi, g[i], &bi, T(0.1), T(0.01), T(0.9), T(0.1), true, false);
    ASSERT_TRUE(near(qi, ps[i]) && near(bi, bs[i])) << "sgd element " << i;
  }
}

TEST(CudaHost, OptimizerElementFormulasAreTheCpuKernels) {
  expect_optimizer_elements_match<float>();
  expect_optimizer_elements_match<double>();
}

// ---- The tensor-core attention's fragment maps (ops/cuda/mma_layout.h) --------------------------
// ldmatrix and mma.m16n8k16 emulated from PTX's own description of their layouts (written out
// here, apart from the header), then the kernel's two products of one warp run through them.

struct Pair {
  double lo = 0, hi = 0;
};
using Fragment = std::array<std::array<Pair, 4>, 32>;      // [lane][register]
using Accumulator = std::array<std::array<double, 4>, 32>;  // [lane][element]
using Matrix = std::vector<std::vector<double>>;

// ldmatrix.x4 over m (rows r0.., columns c0..) with the addresses lane l gives by `address`.
template <class Address>
Fragment ldmatrix(const Matrix& m, int r0, int c0, Address address, bool trans) {
  Fragment f{};
  for (int l = 0; l < 32; ++l) {
    for (int i = 0; i < 4; ++i) {
      if (!trans) {  // matrix i's row l / 4 (from lane 8i + l / 4's address), elements 2 (l % 4), + 1
        const tg::cuda_ops::mma::Cell a = address(8 * i + l / 4);
        f[l][i] = {m[r0 + a.row][c0 + a.col + 2 * (l % 4)], m[r0 + a.row][c0 + a.col + 2 * (l % 4) + 1]};
      } else {  // rows 2 (l % 4) and + 1 of matrix i's column l / 4
        const tg::cuda_ops::mma::Cell a0 = address(8 * i + 2 * (l % 4)), a1 = address(8 * i + 2 * (l % 4) + 1);
        f[l][i] = {m[r0 + a0.row][c0 + a0.col + l / 4], m[r0 + a1.row][c0 + a1.col + l / 4]};
      }
    }
  }
  return f;
}

// c += a b: A's register i of lane 4g + t holds row g + 8 (i % 2), columns 2t + 8 (i / 2) + {0, 1};
// B's register i (b0: i = 0, b1: i = 1) rows 2t + 8 i + {0, 1} of column g; C's element r row
// g + 8 (r / 2), column 2t + r % 2.
void mma_16x8x16(Accumulator& c, const Fragment& a, const Fragment& b, int b0, int b1) {
  double A[16][16] = {}, B[16][8] = {};
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    for (int i = 0; i < 4; ++i) {
      A[g + 8 * (i % 2)][2 * t + 8 * (i / 2)] = a[l][i].lo;
      A[g + 8 * (i % 2)][2 * t + 8 * (i / 2) + 1] = a[l][i].hi;
    }
    const int breg[2] = {b0, b1};
    for (int i = 0; i < 2; ++i) {
      B[2 * t + 8 * i][g] = b[l][breg[i]].lo;
      B[2 * t + 8 * i + 1][g] = b[l][breg[i]].hi;
    }
  }
  for (int l = 0; l < 32; ++l) {
    for (int r = 0; r < 4; ++r) {
      const int row = l / 4 + 8 * (r / 2), col = 2 * (l % 4) + r % 2;
      for (int k = 0; k < 16; ++k) c[l][r] += A[row][k] * B[k][col];
    }
  }
}

TEST(CudaHost, TensorCoreAttentionFragmentsComputeQKAndPV) {
  constexpr int D = 32, kKeys = 64;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-4, 4);  // exact in bfloat16 and in every sum below
  auto random = [&](int rows) {
    Matrix m(static_cast<size_t>(rows), std::vector<double>(D));
    for (auto& row : m)
      for (double& x : row) x = small(rng);
    return m;
  };
  const Matrix q = random(16), k = random(kKeys), v = random(kKeys);
  namespace mm = tg::cuda_ops::mma;
  // S = q kᵀ as attention_tc_kernel computes it: 8 accumulator tiles of 8 keys.
  std::array<Accumulator, kKeys / 8> s{};
  for (int kk = 0; kk < D / 16; ++kk) {
    const Fragment a = ldmatrix(q, 0, kk * 16, mm::a_fragment_address, false);
    for (int nb = 0; nb < kKeys / 16; ++nb) {
      const Fragment b = ldmatrix(k, nb * 16, kk * 16, mm::bt_fragment_address, false);
      mma_16x8x16(s[2 * nb], a, b, 0, 1);
      mma_16x8x16(s[2 * nb + 1], a, b, 2, 3);
    }
  }
  Matrix p(16, std::vector<double>(kKeys));
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < kKeys; ++j)
      for (int e = 0; e < D; ++e) p[i][j] += q[i][e] * k[j][e];
  for (int nt = 0; nt < kKeys / 8; ++nt) {
    for (int l = 0; l < 32; ++l) {
      for (int r = 0; r < 4; ++r) {
        const mm::Cell c = mm::accumulator_cell(l, r);
        ASSERT_EQ(s[nt][l][r], p[c.row][nt * 8 + c.col]) << "S tile " << nt << " lane " << l << " element " << r;
      }
    }
  }
  // O = P v, P's A fragments taken from S's accumulators.
  std::array<Accumulator, D / 8> o{};
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    Fragment a{};
    for (int l = 0; l < 32; ++l) {
      for (int i = 0; i < 4; ++i) {
        const mm::Cell src = mm::p_fragment_source(kk, i);
        a[l][i] = {s[src.row][l][src.col], s[src.row][l][src.col + 1]};
      }
    }
    for (int db = 0; db < D / 16; ++db) {
      const Fragment b = ldmatrix(v, kk * 16, db * 16, mm::b_trans_fragment_address, true);
      mma_16x8x16(o[2 * db], a, b, 0, 1);
      mma_16x8x16(o[2 * db + 1], a, b, 2, 3);
    }
  }
  for (int dt = 0; dt < D / 8; ++dt) {
    for (int l = 0; l < 32; ++l) {
      for (int r = 0; r < 4; ++r) {
        const mm::Cell c = mm::accumulator_cell(l, r);
        double want = 0;
        for (int j = 0; j < kKeys; ++j) want += p[c.row][j] * v[j][dt * 8 + c.col];
        ASSERT_EQ(o[dt][l][r], want) << "O tile " << dt << " lane " << l << " element " << r;
      }
    }
  }
}

TEST(CudaHost, OnlyAlignedBFloat16HeadsOf32To128TakeTheTensorCores) {
  alignas(16) static char buf[64];
  const void* at = buf;
  const void* off = buf + 2;
  for (int64_t d : {32, 64, 128}) EXPECT_TRUE(tg::cuda_ops::attention_takes_tensor_cores(d, d, {at, at, at})) << d;
  EXPECT_FALSE(tg::cuda_ops::attention_takes_tensor_cores(64, 32, {at, at, at}));
  EXPECT_FALSE(tg::cuda_ops::attention_takes_tensor_cores(96, 96, {at, at, at}));
  EXPECT_FALSE(tg::cuda_ops::attention_takes_tensor_cores(256, 256, {at, at, at}));
  EXPECT_FALSE(tg::cuda_ops::attention_takes_tensor_cores(64, 64, {at, off, at}));
}

}  // namespace

namespace {

// The tensor-core attention's row addresses (cuda_ops::head_row_offset): heads = 1 is [n, len, w];
// heads = H walks a [B, len, H, w] tensor as its [B, H, len, w] view would be walked: element e of
// row r of head n = b H + h sits where permute({0, 2, 1, 3}) of the view puts it.
TEST(CudaHost, AttentionRowsOfEitherLayout) {
  const int64_t B = 3, H = 5, L = 7, W = 4;
  tg::Tensor view = tg::arange(0, static_cast<double>(B * H * L * W)).reshape({B, H, L, W});  // [B, H, L, W]: value = index
  const std::vector<double> tokens_first = tg::permute(view, {0, 2, 1, 3}).to_vector<double>();
  for (int64_t n = 0; n < B * H; ++n)
    for (int64_t r = 0; r < L; ++r)
      for (int64_t e = 0; e < W; ++e) {
        const double want = static_cast<double>((n * L + r) * W + e);
        EXPECT_EQ(static_cast<int64_t>(tg::cuda_ops::head_row_offset(n, r, L, 1, W) + e), (n * L + r) * W + e);
        EXPECT_EQ(tokens_first[static_cast<size_t>(tg::cuda_ops::head_row_offset(n, r, L, H, W) + e)], want)
            << "head " << n << " row " << r;
      }
}

}  // namespace

namespace {

// The GPU reductions' plan: one pass where the outputs alone keep the GPU busy; pieces of R
// otherwise (a linear layer's bias gradient: the column sums of [rows, out]; a whole-tensor sum),
// covering R exactly once, with the scratch the two passes need. It depends on the shape only.
TEST(CudaHost, ReductionsCutLongRsWithFewOutputsIntoPieces) {
  using tg::cuda_ops::reduce_plan;
  struct Case {
    int64_t outer, R, inner;
    bool cut;
  };
  for (const Case c : {Case{1, 16384, 512, true}, Case{1, 16384, 65536, false}, Case{1, 300, 512, false},
                       Case{1, 100000000, 1, true}, Case{4096, 100000, 1, false}, Case{8, 16384, 1, false}, Case{8, 16385, 1, true},
                       Case{2, 1000, 3, true}, Case{3, 1, 7, false}}) {
    const tg::cuda_ops::ReducePlan p = reduce_plan(c.outer, c.R, c.inner);
    const std::string what = std::to_string(c.outer) + " x " + std::to_string(c.R) + " x " + std::to_string(c.inner);
    EXPECT_EQ(p.chunks > 1, c.cut) << what;
    if (p.chunks == 1) {
      EXPECT_EQ(p.chunk, c.R) << what;
      EXPECT_EQ(p.scratch, 0) << what;
      continue;
    }
    EXPECT_GE(p.chunks * p.chunk, c.R) << what << ": every position in a piece";
    EXPECT_LT((p.chunks - 1) * p.chunk, c.R) << what << ": no empty piece";
    EXPECT_EQ(p.scratch, c.outer * p.chunks * c.inner) << what;
  }
}

}  // namespace
