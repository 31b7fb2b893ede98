// Forward results against plain scalar references, in float32 and float64, on sizes that
// exercise the vector body and the scalar tail, broadcasting, and the threaded paths.
#include <algorithm>
#include <numeric>
#include <tuple>

#include "ops/kernels/parallel.h"
#include "test_util.h"

namespace {
using namespace tgt;

double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  double lo, hi;
};

class Forward : public ::testing::TestWithParam<tg::DType> {
 protected:
  void SetUp() override { tg::manual_seed(5); }
  double tol() const { return GetParam() == tg::kFloat32 ? 2e-6 : 1e-13; }
};

TEST_P(Forward, Unary) {
  std::vector<UnaryCase> cases = {
      {"neg", [](auto& x) { return tg::neg(x); }, [](double x) { return -x; }, -3, 3},
      {"exp", [](auto& x) { return tg::exp(x); }, [](double x) { return std::exp(x); }, -5, 5},
      {"log", [](auto& x) { return tg::log(x); }, [](double x) { return std::log(x); }, 0.01, 10},
      {"sqrt", [](auto& x) { return tg::sqrt(x); }, [](double x) { return std::sqrt(x); }, 0, 10},
      {"rsqrt", [](auto& x) { return tg::rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, 0.01, 10},
      {"abs", [](auto& x) { return tg::abs(x); }, [](double x) { return std::fabs(x); }, -3, 3},
      {"sign", [](auto& x) { return tg::sign(x); }, [](double x) { return double((x > 0) - (x < 0)); }, -3, 3},
      {"square", [](auto& x) { return tg::square(x); }, [](double x) { return x * x; }, -3, 3},
      {"reciprocal", [](auto& x) { return tg::reciprocal(x); }, [](double x) { return 1 / x; }, 0.1, 3},
      {"tanh", [](auto& x) { return tg::tanh(x); }, [](double x) { return std::tanh(x); }, -6, 6},
      {"sigmoid", [](auto& x) { return tg::sigmoid(x); }, [](double x) { return 1 / (1 + std::exp(-x)); }, -8, 8},
      {"relu", [](auto& x) { return tg::relu(x); }, [](double x) { return std::max(x, 0.0); }, -3, 3},
      {"gelu", [](auto& x) { return tg::gelu(x); }, gelu_erf, -5, 5},
      {"gelu_tanh", [](auto& x) { return tg::gelu(x, tg::GeluApprox::kTanh); }, gelu_tanh, -5, 5},
      {"silu", [](auto& x) { return tg::silu(x); }, [](double x) { return x / (1 + std::exp(-x)); }, -6, 6},
      {"erf", [](auto& x) { return tg::erf(x); }, [](double x) { return std::erf(x); }, -3, 3},
      {"sin", [](auto& x) { return tg::sin(x); }, [](double x) { return std::sin(x); }, -6, 6},
      {"cos", [](auto& x) { return tg::cos(x); }, [](double x) { return std::cos(x); }, -6, 6},
      {"add_scalar", [](auto& x) { return x + 1.5; }, [](double x) { return x + 1.5; }, -3, 3},
      {"rsub_scalar", [](auto& x) { return 2.0 - x; }, [](double x) { return 2.0 - x; }, -3, 3},
      {"mul_scalar", [](auto& x) { return x * -0.5; }, [](double x) { return x * -0.5; }, -3, 3},
      {"div_scalar", [](auto& x) { return x / 4.0; }, [](double x) { return x / 4.0; }, -3, 3},
      {"rdiv_scalar", [](auto& x) { return 3.0 / x; }, [](double x) { return 3.0 / x; }, 0.5, 3},
      {"pow_scalar", [](auto& x) { return tg::pow(x, 1.7); }, [](double x) { return std::pow(x, 1.7); }, 0.1, 3},
      {"clamp", [](auto& x) { return tg::clamp(x, -0.5, 0.7); }, [](double x) { return std::clamp(x, -0.5, 0.7); }, -2, 2},
  };
  for (int64_t n : {1, 7, 37, 100003}) {
    for (const auto& c : cases) {
      Tensor x = tg::uniform({n}, c.lo, c.hi, GetParam());
      Tensor y = c.op(x);
      ASSERT_EQ(y.dtype(), GetParam()) << c.name;
      std::vector<double> xv = x.to_vector<double>(), want(xv.size());
      std::transform(xv.begin(), xv.end(), want.begin(), c.ref);
      EXPECT_TRUE(close(y, want, tol() * 4, tol())) << c.name << " n=" << n;
    }
  }
}

// Reference broadcasting binary op.
Tensor ref_binary(const Tensor& a, const Tensor& b, const std::function<double(double, double)>& f) {
  Shape s = (a + b).shape();
  std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>(), out(static_cast<size_t>(s.numel()));
  auto offset = [&](const Shape& in, int64_t flat) {
    int64_t off = 0, stride = 1;
    for (int64_t d = s.rank() - 1, e = in.rank() - 1; d >= 0; --d, --e) {
      int64_t i = flat % s[d];
      flat /= s[d];
      if (e >= 0) {
        if (in[e] != 1) off += i * stride;
        stride *= in[e];
      }
    }
    return off;
  };
  for (int64_t i = 0; i < s.numel(); ++i) out[i] = f(av[offset(a.shape(), i)], bv[offset(b.shape(), i)]);
  return tg::from_vector(out, s, tg::kFloat64);
}

TEST_P(Forward, BinaryBroadcast) {
  std::vector<std::pair<Shape, Shape>> shapes = {
      {{37}, {37}}, {{5, 1, 19}, {3, 19}}, {{4, 1}, {1, 33}}, {{}, {2, 3}}, {{2, 3}, {}}, {{300, 1}, {300, 400}},
      {{2, 3, 1, 5}, {3, 4, 1}}, {{1}, {17}}, {{0, 3}, {1, 3}}};
  std::vector<std::tuple<const char*, std::function<Tensor(const Tensor&, const Tensor&)>, std::function<double(double, double)>>> ops = {
      {"add", [](auto& a, auto& b) { return a + b; }, [](double x, double y) { return x + y; }},
      {"sub", [](auto& a, auto& b) { return a - b; }, [](double x, double y) { return x - y; }},
      {"mul", [](auto& a, auto& b) { return a * b; }, [](double x, double y) { return x * y; }},
      {"div", [](auto& a, auto& b) { return a / b; }, [](double x, double y) { return x / y; }},
      {"pow", [](auto& a, auto& b) { return tg::pow(tg::abs(a), b); }, [](double x, double y) { return std::pow(std::fabs(x), y); }},
      {"maximum", [](auto& a, auto& b) { return tg::maximum(a, b); }, [](double x, double y) { return std::max(x, y); }},
      {"minimum", [](auto& a, auto& b) { return tg::minimum(a, b); }, [](double x, double y) { return std::min(x, y); }},
  };
  for (const auto& [sa, sb] : shapes) {
    Tensor a = tg::uniform(sa, 0.5, 2.0, GetParam()), b = tg::uniform(sb, -2.0, 2.0, GetParam());
    for (const auto& [name, op, ref] : ops) {
      Tensor got = op(a, b);
      Tensor want = ref_binary(name == std::string("pow") ? tg::abs(a) : a, b, ref);
      EXPECT_TRUE(close(got, want, tol() * 8, tol())) << name << " " << sa.str() << " " << sb.str();
    }
  }
}

TEST_P(Forward, MixedDtypesPromoteToFloat64) {
  Tensor a = tg::ones({2}, GetParam()), b = tg::ones({2}, tg::kFloat64);
  EXPECT_EQ((a + b).dtype(), tg::kFloat64);
  EXPECT_EQ((a + tg::ones({2}, tg::kInt64)).dtype(), GetParam());
}

TEST_P(Forward, ComparisonsWhereAndMasks) {
  Tensor a = tg::tensor({1, 2, 3, 4}, GetParam()), b = tg::tensor({4, 2, 2, 5}, GetParam());
  EXPECT_EQ(tg::eq(a, b).to_vector<int>(), (std::vector<int>{0, 1, 0, 0}));
  EXPECT_EQ(tg::ne(a, b).to_vector<int>(), (std::vector<int>{1, 0, 1, 1}));
  EXPECT_EQ(tg::lt(a, b).to_vector<int>(), (std::vector<int>{1, 0, 0, 1}));
  EXPECT_EQ(tg::le(a, b).to_vector<int>(), (std::vector<int>{1, 1, 0, 1}));
  EXPECT_EQ(tg::gt(a, 2.0).to_vector<int>(), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(tg::ge(a, 2.0).to_vector<int>(), (std::vector<int>{0, 1, 1, 1}));
  EXPECT_EQ(tg::eq(a, b).dtype(), tg::kBool);
  Tensor m = tg::gt(a, 2.0);
  EXPECT_EQ(tg::logical_not(m).to_vector<int>(), (std::vector<int>{1, 1, 0, 0}));
  EXPECT_EQ(tg::logical_or(m, tg::eq(a, 1.0)).to_vector<int>(), (std::vector<int>{1, 0, 1, 1}));
  EXPECT_EQ(tg::logical_and(m, tg::lt(a, 4.0)).to_vector<int>(), (std::vector<int>{0, 0, 1, 0}));
  EXPECT_TRUE(close(tg::where(m, a, b), {4, 2, 3, 4}));
  EXPECT_TRUE(close(tg::where(m, a, -1.0), {-1, -1, 3, 4}));
  Tensor x = tg::ones({2, 3}, GetParam());
  Tensor row_mask = tg::tensor({0, 1, 0}).to(tg::kBool);
  EXPECT_TRUE(close(tg::masked_fill(x, row_mask, -9), {1, -9, 1, 1, -9, 1}));
  // Where with a broadcast condition column.
  Tensor col = tg::from_vector<int64_t>({1, 0}, {2, 1}).to(tg::kBool);
  EXPECT_TRUE(close(tg::where(col, x, tg::zeros({3}, GetParam())), {1, 1, 1, 0, 0, 0}));
}

// Reference reduction over one axis of a row-major array.
std::vector<double> ref_reduce(const Tensor& x, int64_t axis, const std::function<double(const std::vector<double>&)>& f) {
  std::vector<double> v = x.to_vector<double>();
  const Shape& s = x.shape();
  int64_t outer = 1, R = s[axis], inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= s[d];
  for (int64_t d = axis + 1; d < s.rank(); ++d) inner *= s[d];
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      std::vector<double> run;
      for (int64_t r = 0; r < R; ++r) run.push_back(v[(o * R + r) * inner + j]);
      out.push_back(f(run));
    }
  return out;
}
double rsum(const std::vector<double>& r) { return std::accumulate(r.begin(), r.end(), 0.0); }
double rmax(const std::vector<double>& r) { return *std::max_element(r.begin(), r.end()); }
double rmin(const std::vector<double>& r) { return *std::min_element(r.begin(), r.end()); }
double rmean(const std::vector<double>& r) { return rsum(r) / r.size(); }
double rvar(const std::vector<double>& r) {
  double m = rmean(r), s = 0;
  for (double x : r) s += (x - m) * (x - m);
  return s / (r.size() - 1);
}
double rlse(const std::vector<double>& r) {
  double m = rmax(r), s = 0;
  for (double x : r) s += std::exp(x - m);
  return m + std::log(s);
}

TEST_P(Forward, ReductionsOverOneAxis) {
  for (Shape s : {Shape{7, 33, 5}, Shape{3, 100000}, Shape{70000, 3}, Shape{1, 1, 9}}) {
    Tensor x = tg::uniform(s, -2, 2, GetParam());
    for (int64_t axis = 0; axis < s.rank(); ++axis) {
      const double t = GetParam() == tg::kFloat32 ? 1e-4 : 1e-11;
      std::string where = s.str() + " axis " + std::to_string(axis);
      EXPECT_TRUE(close(tg::sum(x, {axis}), ref_reduce(x, axis, rsum), t, t)) << "sum " << where;
      EXPECT_TRUE(close(tg::mean(x, {axis}), ref_reduce(x, axis, rmean), t, t)) << "mean " << where;
      EXPECT_TRUE(close(tg::amax(x, {axis}), ref_reduce(x, axis, rmax), 0, 0)) << "amax " << where;
      EXPECT_TRUE(close(tg::amin(x, {axis}), ref_reduce(x, axis, rmin), 0, 0)) << "amin " << where;
      EXPECT_TRUE(close(tg::max(x, axis).values, ref_reduce(x, axis, rmax), 0, 0)) << "max " << where;
      EXPECT_TRUE(close(tg::logsumexp(x, {axis}), ref_reduce(x, axis, rlse), t, t)) << "logsumexp " << where;
      if (s[axis] > 1) {
        EXPECT_TRUE(close(tg::var(x, {axis}), ref_reduce(x, axis, rvar), t * 10, t)) << "var " << where;
      }
    }
  }
}

TEST_P(Forward, ReductionsOverSeveralAxesAndAll) {
  Tensor x = tg::uniform({4, 5, 6}, -1, 1, GetParam());
  const double t = GetParam() == tg::kFloat32 ? 1e-5 : 1e-12;
  std::vector<double> v = x.to_vector<double>();
  std::vector<double> want(5, 0.0);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 6; ++k) want[j] += v[(i * 5 + j) * 6 + k];
  EXPECT_TRUE(close(tg::sum(x, {0, 2}), want, t, t));
  EXPECT_EQ(tg::sum(x, {0, 2}, true).shape(), (Shape{1, 5, 1}));
  EXPECT_EQ(tg::sum(x, {-1, 0}).shape(), (Shape{5}));
  EXPECT_NEAR(tg::sum(x).item(), rsum(v), 1e-4);
  EXPECT_EQ(tg::sum(x).shape(), Shape{});
  EXPECT_NEAR(tg::amax(x).item(), rmax(v), 0);
  EXPECT_NEAR(tg::mean(x, {0, 1, 2}, true).item(), rmean(v), 1e-6);
  Tensor big = tg::uniform({300001}, -1, 1, GetParam());
  EXPECT_NEAR(tg::sum(big).item(), rsum(big.to_vector<double>()), GetParam() == tg::kFloat32 ? 1e-1 : 1e-9);
}

TEST_P(Forward, MaxMinIndicesAndArgmax) {
  Tensor x = tg::tensor({{1, 5, 5, 2}, {7, 0, -1, 7}}, GetParam());
  auto [v, i] = tg::max(x, 1);
  EXPECT_TRUE(close(v, {5, 7}));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));  // first occurrence
  auto [mv, mi] = tg::min(x, 0, true);
  EXPECT_EQ(mv.shape(), (Shape{1, 4}));
  EXPECT_EQ(mi.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(tg::argmax(x, -1).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(tg::argmin(x, -1).to_vector<int64_t>(), (std::vector<int64_t>{0, 2}));
}

TEST_P(Forward, MatmulAgainstTripleLoop) {
  // Odd and edge sizes around the GEMM's register tile (6 x 2 vectors) and its cache blocks
  // (K in slices of 256, rows in blocks of up to 96, columns in blocks of 2048).
  for (auto [M, N, K] : {std::tuple{1, 1, 1}, {7, 17, 5}, {33, 65, 31}, {64, 64, 64}, {130, 3, 257}, {255, 257, 17},
                         {257, 33, 300}, {1, 513, 7}, {97, 2100, 9}, {6, 32, 512}, {13, 1, 255}, {9, 200, 1024},
                         // 1 to 8 rows: the matrix-vector path (incremental decoding), 4-row groups and tails
                         {1, 300, 70}, {2, 67, 130}, {3, 1030, 33}, {4, 257, 64}, {8, 129, 100}}) {
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Tensor a = tg::uniform(ta ? Shape{K, M} : Shape{M, K}, -1, 1, GetParam());
        Tensor b = tg::uniform(tb ? Shape{N, K} : Shape{K, N}, -1, 1, GetParam());
        std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>(), want(M * N, 0.0);
        for (int i = 0; i < M; ++i)
          for (int j = 0; j < N; ++j)
            for (int k = 0; k < K; ++k)
              want[i * N + j] += (ta ? av[k * M + i] : av[i * K + k]) * (tb ? bv[j * K + k] : bv[k * N + j]);
        const double t = GetParam() == tg::kFloat32 ? 1e-4 : 1e-12;
        for (int threads : {1, 2}) {
          tg::set_num_threads(threads);
          EXPECT_TRUE(close(tg::matmul(a, b, ta, tb), want, t, t)) << M << "x" << N << "x" << K << " " << ta << tb
                                                                    << " threads " << threads;
        }
      }
  }
}

TEST_P(Forward, BatchedMatmulBroadcastsBatchDims) {
  Tensor a = tg::uniform({2, 1, 3, 4}, -1, 1, GetParam()), b = tg::uniform({5, 4, 2}, -1, 1, GetParam());
  Tensor c = tg::matmul(a, b);
  ASSERT_EQ(c.shape(), (Shape{2, 5, 3, 2}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j) {
      Tensor want = tg::matmul(tg::squeeze(tg::narrow(a, 0, i, 1), 0).squeeze(0), tg::narrow(b, 0, j, 1).squeeze(0));
      Tensor got = tg::narrow(tg::narrow(c, 0, i, 1), 1, j, 1).reshape({3, 2});
      EXPECT_TRUE(close(got, want, 1e-6, 1e-6));
    }
  EXPECT_EQ(tg::matmul(tg::ones({4}, GetParam()), tg::ones({4, 3}, GetParam())).shape(), (Shape{3}));
  EXPECT_EQ(tg::matmul(tg::ones({4}, GetParam()), tg::ones({4}, GetParam())).item(), 4.0);
  EXPECT_EQ(tg::matmul(tg::ones({3, 0}, GetParam()), tg::ones({0, 2}, GetParam())).to_vector<double>(),
            std::vector<double>(6, 0.0));
}

TEST_P(Forward, SoftmaxAndLogSoftmax) {
  for (Shape s : {Shape{3, 5}, Shape{64, 1000}, Shape{4, 3, 6}}) {
    Tensor x = tg::uniform(s, -10, 10, GetParam());
    for (int64_t axis = 0; axis < s.rank(); ++axis) {
      std::vector<double> lse = ref_reduce(x, axis, rlse);
      // Reference: x - lse broadcast back along axis.
      std::vector<double> v = x.to_vector<double>(), want_log(v.size());
      int64_t outer = 1, R = s[axis], inner = 1;
      for (int64_t d = 0; d < axis; ++d) outer *= s[d];
      for (int64_t d = axis + 1; d < s.rank(); ++d) inner *= s[d];
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t r = 0; r < R; ++r)
          for (int64_t j = 0; j < inner; ++j) {
            int64_t i = (o * R + r) * inner + j;
            want_log[i] = v[i] - lse[o * inner + j];
          }
      std::vector<double> want(want_log.size());
      std::transform(want_log.begin(), want_log.end(), want.begin(), [](double z) { return std::exp(z); });
      const double t = GetParam() == tg::kFloat32 ? 1e-5 : 1e-12;
      EXPECT_TRUE(close(tg::log_softmax(x, axis), want_log, t, t)) << s.str() << " " << axis;
      EXPECT_TRUE(close(tg::softmax(x, axis), want, t, t)) << s.str() << " " << axis;
    }
  }
  // Large logits do not overflow.
  Tensor big = tg::tensor({1000.0, 1000.0}, GetParam());
  EXPECT_TRUE(close(tg::softmax(big, 0), {0.5, 0.5}));
}

TEST_P(Forward, LossesAgainstFormulas) {
  Tensor logits = tg::tensor({{2.0, 1.0, 0.1}, {0.5, 2.5, 0.3}, {1.0, 1.0, 1.0}}, GetParam());
  Tensor target = tg::from_vector<int64_t>({0, 1, -100}, {3});
  std::vector<double> l = logits.to_vector<double>();
  auto nll_row = [&](int r, int c) {
    double m = std::max({l[r * 3], l[r * 3 + 1], l[r * 3 + 2]}), s = 0;
    for (int j = 0; j < 3; ++j) s += std::exp(l[r * 3 + j] - m);
    return -(l[r * 3 + c] - m - std::log(s));
  };
  double want = (nll_row(0, 0) + nll_row(1, 1)) / 2;  // the ignored row does not count
  const double t = GetParam() == tg::kFloat32 ? 1e-6 : 1e-12;
  EXPECT_NEAR(tg::cross_entropy(logits, target).item(), want, t);
  EXPECT_NEAR(tg::cross_entropy(logits, target, {.reduction = tg::Reduction::kSum}).item(), 2 * want, t);
  EXPECT_NEAR(tg::nll_loss(tg::log_softmax(logits), target).item(), want, t);
  Tensor none = tg::cross_entropy(logits, target, {.reduction = tg::Reduction::kNone});
  EXPECT_TRUE(close(none, {nll_row(0, 0), nll_row(1, 1), 0.0}, t, t));
  // Label smoothing: (1 - e) nll + e * mean_c(-log p_c).
  double e = 0.1, smooth0 = 0, smooth1 = 0;
  for (int c = 0; c < 3; ++c) {
    smooth0 += nll_row(0, c) / 3;
    smooth1 += nll_row(1, c) / 3;
  }
  double want_s = ((1 - e) * nll_row(0, 0) + e * smooth0 + (1 - e) * nll_row(1, 1) + e * smooth1) / 2;
  EXPECT_NEAR(tg::cross_entropy(logits, target, {.label_smoothing = e}).item(), want_s, t);
  // Class weights: PyTorch 2.15's F.cross_entropy / F.nll_loss on the same numbers (float64).
  {
    Tensor x4 = tg::tensor({{2.0, 1.0, 0.1}, {0.5, 2.5, 0.3}, {1.0, 1.0, 1.0}, {0.2, -1.0, 3.0}}, GetParam());
    Tensor t4 = tg::from_vector<int64_t>({0, 1, -100, 2}, {4});
    Tensor w = tg::tensor({0.5, 2.0, 1.5}, GetParam());
    const double tw = GetParam() == tg::kFloat32 ? 1e-6 : 1e-12;
    EXPECT_NEAR(tg::cross_entropy(x4, t4, {.weight = w}).item(), 0.19071020516373935, tw);
    EXPECT_NEAR(tg::nll_loss(tg::log_softmax(x4), t4, -100, tg::Reduction::kMean, w).item(), 0.19071020516373935, tw);
    EXPECT_NEAR(tg::cross_entropy(x4, t4, {.label_smoothing = 0.1, .weight = w}).item(), 0.3499968752123104, tw);
    EXPECT_NEAR(tg::cross_entropy(x4, t4, {.label_smoothing = 0.1, .reduction = tg::Reduction::kSum, .weight = w}).item(),
                1.3999875008492415, tw);
    EXPECT_TRUE(close(tg::cross_entropy(x4, t4, {.label_smoothing = 0.1, .reduction = tg::Reduction::kNone, .weight = w}),
                      {0.40493417616206956, 0.5687624111730399, 0.0, 0.42629091351413195}, tw, tw));
    // All weights 1 is the unweighted loss.
    EXPECT_NEAR(tg::cross_entropy(x4, t4, {.label_smoothing = 0.1, .weight = tg::ones({3}, GetParam())}).item(),
                tg::cross_entropy(x4, t4, {.label_smoothing = 0.1}).item(), tw);
  }
  // All targets ignored: mean is NaN (0/0), as in PyTorch.
  EXPECT_TRUE(std::isnan(tg::cross_entropy(logits, tg::full({3}, -100, tg::kInt64)).item()));
  // BCE with logits, including large magnitudes (no overflow).
  Tensor x = tg::tensor({-100.0, -1.0, 0.0, 2.0, 100.0}, GetParam());
  Tensor y = tg::tensor({0.0, 1.0, 0.5, 0.0, 1.0}, GetParam());
  std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>(), want_b;
  for (size_t i = 0; i < xv.size(); ++i)
    want_b.push_back(std::max(xv[i], 0.0) - xv[i] * yv[i] + std::log1p(std::exp(-std::fabs(xv[i]))));
  EXPECT_TRUE(close(tg::binary_cross_entropy_with_logits(x, y, tg::Reduction::kNone), want_b, t, t));
}

TEST_P(Forward, LayerNormAgainstFormula) {
  Tensor x = tg::uniform({37, 48}, -3, 3, GetParam());
  Tensor w = tg::uniform({48}, 0.5, 1.5, GetParam()), b = tg::uniform({48}, -1, 1, GetParam());
  Tensor y = tg::layer_norm(x, 1, w, b, 1e-5);
  std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>(), bv = b.to_vector<double>(), want;
  for (int r = 0; r < 37; ++r) {
    double m = 0, v = 0;
    for (int i = 0; i < 48; ++i) m += xv[r * 48 + i] / 48;
    for (int i = 0; i < 48; ++i) v += (xv[r * 48 + i] - m) * (xv[r * 48 + i] - m) / 48;
    for (int i = 0; i < 48; ++i) want.push_back((xv[r * 48 + i] - m) / std::sqrt(v + 1e-5) * wv[i] + bv[i]);
  }
  const double t = GetParam() == tg::kFloat32 ? 1e-5 : 1e-12;
  EXPECT_TRUE(close(y, want, t, t));
}

TEST_P(Forward, RmsNormAgainstFormula) {
  Tensor x = tg::uniform({37, 48}, -3, 3, GetParam()), w = tg::uniform({48}, 0.5, 1.5, GetParam());
  Tensor y = tg::rms_norm(x, w, 1e-6);
  std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>(), want;
  for (int r = 0; r < 37; ++r) {
    double ms = 0;
    for (int i = 0; i < 48; ++i) ms += xv[r * 48 + i] * xv[r * 48 + i] / 48;
    for (int i = 0; i < 48; ++i) want.push_back(xv[r * 48 + i] / std::sqrt(ms + 1e-6) * wv[i]);
  }
  const double t = GetParam() == tg::kFloat32 ? 1e-5 : 1e-12;
  EXPECT_TRUE(close(y, want, t, t));
}

TEST_P(Forward, RotaryEmbeddingAgainstFormula) {
  // [2, 3, T 5, d 10]: vector body and scalar tail of the half (5) on every path.
  Tensor x = tg::uniform({2, 3, 5, 10}, -2, 2, GetParam()), ang = tg::uniform({5, 5}, -4, 4, tg::kFloat64);
  Tensor y = tg::rotary_embedding(x, tg::cos(ang).to(GetParam()), tg::sin(ang).to(GetParam()));
  std::vector<double> xv = x.to_vector<double>(), av = ang.to_vector<double>(), want(xv.size());
  for (size_t r = 0; r < xv.size() / 10; ++r)
    for (int i = 0; i < 5; ++i) {
      const double a = av[(r % 5) * 5 + i], x1 = xv[r * 10 + i], x2 = xv[r * 10 + i + 5];
      want[r * 10 + i] = x1 * std::cos(a) - x2 * std::sin(a);
      want[r * 10 + i + 5] = x2 * std::cos(a) + x1 * std::sin(a);
    }
  const double t = GetParam() == tg::kFloat32 ? 1e-5 : 1e-12;
  EXPECT_TRUE(close(y, want, t, t));
}

TEST_P(Forward, BiasActivationMatchesComposition) {
  Tensor x = tg::uniform({70, 33}, -3, 3, GetParam()), b = tg::uniform({33}, -1, 1, GetParam());
  const double t = tol() * 10;
  EXPECT_TRUE(close(tg::bias_act(x, b, tg::Activation::kIdentity), x + b, t, t));
  EXPECT_TRUE(close(tg::bias_act(x, b, tg::Activation::kRelu), tg::relu(x + b), t, t));
  EXPECT_TRUE(close(tg::bias_act(x, b, tg::Activation::kGelu), tg::gelu(x + b), t, t));
  EXPECT_TRUE(close(tg::bias_act(x, b, tg::Activation::kGeluTanh), tg::gelu(x + b, tg::GeluApprox::kTanh), t, t));
  // Gradients equal the composed ops' gradients, whatever the thread count.
  Tensor xl = x.detach().requires_grad_(), bl = b.detach().requires_grad_();
  Tensor g = tg::uniform({70, 33}, -1, 1, GetParam());
  std::vector<Tensor> ref = tg::grad({tg::gelu(xl + bl)}, {xl, bl}, {g});
  for (int threads : {1, 2}) {
    tg::set_num_threads(threads);
    std::vector<Tensor> got = tg::grad({tg::bias_act(xl, bl, tg::Activation::kGelu)}, {xl, bl}, {g});
    EXPECT_TRUE(close(got[0], ref[0], t * 10, t));
    EXPECT_TRUE(close(got[1], ref[1], t * 100, t * 10));
  }
}

TEST_P(Forward, DropoutIsSeededScaledAndIdentityInEval) {
  Tensor x = tg::ones({10000}, GetParam());
  tg::manual_seed(9);
  Tensor a = tg::dropout(x, 0.25);
  tg::manual_seed(9);
  Tensor b = tg::dropout(x, 0.25);
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
  std::vector<double> v = a.to_vector<double>();
  int64_t zeros = std::count(v.begin(), v.end(), 0.0);
  EXPECT_NEAR(zeros / 10000.0, 0.25, 0.03);
  for (double e : v) EXPECT_TRUE(e == 0.0 || std::fabs(e - 1 / 0.75) < 1e-6);
  EXPECT_TRUE(tg::dropout(x, 0.25, /*training=*/false).same(x));
  EXPECT_EQ(tg::sum(tg::dropout(x, 1.0)).item(), 0.0);
}

TEST_P(Forward, DropoutMaskIsThreadIndependentAndStoredNowhere) {
  Tensor x = tg::randn({300001}, GetParam()).requires_grad_();
  std::vector<std::vector<double>> outs, grads;
  for (int threads : {1, 2, 3}) {
    tg::set_num_threads(threads);
    tg::manual_seed(4);
    Tensor y = tg::dropout(x, 0.3);
    y.backward(tg::ones_like(y));
    outs.push_back(y.to_vector<double>());
    grads.push_back(x.grad().to_vector<double>());
    x.zero_grad();
  }
  tg::set_num_threads(2);
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
  EXPECT_EQ(grads[0], grads[2]);
  // The backward regenerates the same mask: the gradient is zero exactly where the output is.
  std::vector<double> xv = x.to_vector<double>();
  int64_t dropped = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    EXPECT_EQ(outs[0][i] == 0.0, grads[0][i] == 0.0) << i;
    dropped += grads[0][i] == 0.0;
  }
  EXPECT_NEAR(static_cast<double>(dropped) / 300001.0, 0.3, 0.005);
  // Consecutive calls draw different masks.
  tg::manual_seed(4);
  Tensor a = tg::dropout(x.detach(), 0.5), b = tg::dropout(x.detach(), 0.5);
  EXPECT_NE(a.to_vector<double>(), b.to_vector<double>());
}

TEST_P(Forward, StreamingStoresForOutputsPastTheCache) {
  // Force the streaming path (normally for ops moving more bytes than the last-level cache),
  // on odd sizes and offsets, broadcast and unary, one and two threads.
  tg::kernels::set_stream_threshold_bytes(1024);
  for (int threads : {1, 2}) {
    tg::set_num_threads(threads);
    Tensor a = tg::uniform({3, 100003}, -1, 1, GetParam()), b = tg::uniform({100003}, -1, 1, GetParam());
    Tensor c = tg::uniform({3, 100003}, -1, 1, GetParam());
    EXPECT_TRUE(close(a + c, ref_binary(a, c, [](double x, double y) { return x + y; }), tol(), tol()));
    EXPECT_TRUE(close(a * b, ref_binary(a, b, [](double x, double y) { return x * y; }), tol(), tol()));
    Tensor col = tg::uniform({3, 1}, -1, 1, GetParam());
    EXPECT_TRUE(close(col - a, ref_binary(col, a, [](double x, double y) { return x - y; }), tol(), tol()));
    std::vector<double> xv = a.to_vector<double>(), want;
    for (double x : xv) want.push_back(std::tanh(x));
    EXPECT_TRUE(close(tg::tanh(a).reshape({-1}), want, tol() * 4, tol()));
  }
  tg::kernels::set_stream_threshold_bytes(0);
  tg::set_num_threads(2);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Forward, ::testing::Values(tg::kFloat32, tg::kFloat64),
                         [](const auto& info) { return std::string(tg::dtype_name(info.param)); });

TEST(ForwardShape, MovementOpsAgainstIndexMath) {
  Tensor x = tg::arange(0, 24, 1, tg::kFloat64).reshape({2, 3, 4});
  EXPECT_EQ(tg::permute(x, {2, 0, 1}).shape(), (Shape{4, 2, 3}));
  std::vector<double> p = tg::permute(x, {2, 0, 1}).to_vector<double>();
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) EXPECT_EQ(p[(k * 2 + i) * 3 + j], (i * 3 + j) * 4 + k);
  // Moving only dimensions of length 1 moves no byte: a view of x's data, not a copy.
  const Tensor one = tg::arange(0, 6, 1, tg::kFloat64).reshape({2, 1, 3, 1});
  const Tensor view = tg::permute(one, {0, 2, 1, 3});
  EXPECT_EQ(view.shape(), (Shape{2, 3, 1, 1}));
  EXPECT_EQ(view.raw_data(), one.raw_data());
  EXPECT_TRUE(close(view.reshape({-1}), {0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(close(tg::permute(one, {3, 2, 0, 1}).reshape({-1}), {0, 3, 1, 4, 2, 5}));  // (2 and 3 swap: a copy)
  EXPECT_NE(tg::permute(one, {3, 2, 0, 1}).raw_data(), one.raw_data());
  EXPECT_TRUE(close(tg::slice(x, 2, 1, 4, 2).reshape({-1}), {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}));
  EXPECT_TRUE(close(tg::slice(x, 1, -1, 100).reshape({-1}), {8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_EQ(tg::slice(x, 1, 2, 1).shape(), (Shape{2, 0, 4}));
  EXPECT_TRUE(close(tg::expand(tg::tensor({1, 2}, tg::kFloat64).reshape({2, 1}), {2, 3}), {1, 1, 1, 2, 2, 2}));
  Tensor c = tg::concat({tg::ones({2, 1}), tg::zeros({2, 2})}, 1);
  EXPECT_TRUE(close(c, {1, 0, 0, 1, 0, 0}));
  EXPECT_EQ(tg::stack({tg::ones({3}), tg::zeros({3})}, 1).shape(), (Shape{3, 2}));
  auto parts = tg::split(tg::arange(7, tg::kFloat32), 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_TRUE(close(parts[2], {6}));
  EXPECT_TRUE(close(tg::index_select(x, 1, tg::from_vector<int64_t>({2, 0}, {2})).reshape({-1}),
                    {8, 9, 10, 11, 0, 1, 2, 3, 20, 21, 22, 23, 12, 13, 14, 15}));
  Tensor g = tg::gather(tg::tensor({{1, 2}, {3, 4}}, tg::kFloat64), 1, tg::from_vector<int64_t>({0, 0, 1, 0}, {2, 2}));
  EXPECT_TRUE(close(g, {1, 1, 4, 3}));
  Tensor s = tg::scatter_add({2, 2}, 1, tg::from_vector<int64_t>({0, 0, 1, 0}, {2, 2}), tg::ones({2, 2}, tg::kFloat64));
  EXPECT_TRUE(close(s, {2, 0, 1, 1}));
  EXPECT_EQ(tg::squeeze(tg::ones({1, 3, 1})).shape(), (Shape{3}));
  EXPECT_EQ(tg::flatten(tg::ones({2, 3, 4}), 1).shape(), (Shape{2, 12}));
  Tensor e = tg::embedding(tg::arange(0, 12, 1, tg::kFloat32).reshape({4, 3}), tg::from_vector<int64_t>({3, 0}, {1, 2}));
  EXPECT_EQ(e.shape(), (Shape{1, 2, 3}));
  EXPECT_TRUE(close(e, {9, 10, 11, 0, 1, 2}));
}

TEST(ForwardShape, ReshapeSharesStorageOtherMovementsCopy) {
  Tensor x = tg::zeros({2, 3});
  Tensor r = x.reshape({3, 2});
  EXPECT_EQ(r.raw_data(), x.raw_data());
  EXPECT_EQ(x.unsqueeze(0).raw_data(), x.raw_data());
  EXPECT_NE(x.t().raw_data(), x.raw_data());
}

TEST(ForwardShape, Masks) {
  EXPECT_EQ(tg::causal_mask(3).to_vector<int>(), (std::vector<int>{0, 1, 1, 0, 0, 1, 0, 0, 0}));
  Tensor ids = tg::from_vector<int64_t>({5, 6, 0, 0}, {2, 2});
  EXPECT_EQ(tg::padding_mask(ids, 0).to_vector<int>(), (std::vector<int>{0, 0, 1, 1}));
  // Used the way attention uses them: masked scores become -inf, softmax gives them 0.
  Tensor scores = tg::zeros({3, 3});
  Tensor p = tg::softmax(tg::masked_fill(scores, tg::causal_mask(3), -INFINITY), -1);
  EXPECT_TRUE(close(p, {1, 0, 0, 0.5, 0.5, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3}));
}

}  // namespace
