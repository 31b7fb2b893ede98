// Every differentiable op against float64 central differences, with broadcasting, and
// second derivatives (grad of grad) for the elementwise, reduction, shape, matmul and softmax ops.
#include "test_util.h"

#include "ops/dropout_internal.h"

namespace {
using namespace tgt;
using tg::Axes;
using V = std::vector<Tensor>;

class Gradcheck : public ::testing::Test {
 protected:
  void SetUp() override { tg::manual_seed(42); }
};

#define GC(fn, ...) EXPECT_TRUE(gradcheck_ok([&](const V& in) { return fn; }, {__VA_ARGS__}))
#define GGC(fn, ...) EXPECT_TRUE(gradgradcheck_ok([&](const V& in) { return fn; }, {__VA_ARGS__}))

TEST_F(Gradcheck, BinaryBroadcast) {
  Tensor a = leaf({3, 1, 4}), b = leaf({2, 4}), c = leaf({4}), s = leaf({});
  GC(tg::add(in[0], in[1]), a, b);
  GC(tg::sub(in[0], in[1]), a, b);
  GC(tg::mul(in[0], in[1]), a, b);
  GC(tg::mul(in[0], in[1]), a, s);
  Tensor pos = leaf({2, 4}, 0.5, 2.0);
  GC(tg::div(in[0], in[1]), a, pos);
  GC(tg::div(in[0], in[1]), c, pos);
  Tensor base = leaf({3, 1, 4}, 0.5, 2.0);
  GC(tg::pow(in[0], in[1]), base, b);
  GC(tg::maximum(in[0], in[1]), a, b);
  GC(tg::minimum(in[0], in[1]), a, c);
  GC(in[0] + in[1] * in[0] - in[1] / 3.0, c, leaf({4}));
}

TEST_F(Gradcheck, Scalar) {
  Tensor x = leaf({2, 3}, 0.5, 2.0);
  GC(tg::add(in[0], 2.5), x);
  GC(tg::sub(in[0], 1.5), x);
  GC(tg::sub(1.5, in[0]), x);
  GC(tg::mul(in[0], -3.0), x);
  GC(tg::div(in[0], 4.0), x);
  GC(tg::div(2.0, in[0]), x);
  GC(tg::pow(in[0], 3.0), x);
  GC(tg::pow(in[0], -1.5), x);
  GC(tg::pow(in[0], 2.0), x);
  GC(tg::maximum(in[0], 1.0), leaf({2, 3}, 0.0, 2.0));
  GC(tg::minimum(in[0], 1.0), leaf({2, 3}, 0.0, 2.0));
  GC(tg::clamp(in[0], 0.7, 1.4), x);
}

TEST_F(Gradcheck, Unary) {
  Tensor x = leaf({3, 4}, -2.0, 2.0), pos = leaf({3, 4}, 0.2, 3.0);
  GC(tg::neg(in[0]), x);
  GC(tg::exp(in[0]), x);
  GC(tg::log(in[0]), pos);
  GC(tg::sqrt(in[0]), pos);
  GC(tg::rsqrt(in[0]), pos);
  GC(tg::abs(in[0]), x);
  GC(tg::square(in[0]), x);
  GC(tg::reciprocal(in[0]), pos);
  GC(tg::tanh(in[0]), x);
  GC(tg::sigmoid(in[0]), x);
  GC(tg::relu(in[0]), x);
  GC(tg::gelu(in[0]), x);
  GC(tg::gelu(in[0], tg::GeluApprox::kTanh), x);
  GC(tg::silu(in[0]), x);
  GC(tg::erf(in[0]), x);
  GC(tg::sin(in[0]), x);
  GC(tg::cos(in[0]), x);
  GC(tg::clone(in[0]), x);
  GC(tg::to(tg::to(in[0], tg::kFloat32), tg::kFloat64) * 0 + in[0], x);
}

TEST_F(Gradcheck, WhereAndMasks) {
  Tensor a = leaf({2, 3}), b = leaf({3});
  Tensor cond = tg::from_vector<int64_t>({1, 0}, {2, 1}).to(tg::kBool);
  GC(tg::where(cond, in[0], in[1]), a, b);
  Tensor mask = tg::tensor({1, 0, 1}).to(tg::kBool);
  GC(tg::masked_fill(in[0], mask, -5.0), a);
}

TEST_F(Gradcheck, Reductions) {
  Tensor x = leaf({2, 3, 4});
  GC(tg::sum(in[0]), x);
  GC(tg::sum(in[0], {0, 2}), x);
  GC(tg::sum(in[0], {1}, true), x);
  GC(tg::mean(in[0], {-1}), x);
  GC(tg::mean(in[0]), x);
  GC(tg::var(in[0], {1}), x);
  GC(tg::var(in[0], {0, 2}, 0, true), x);
  GC(tg::logsumexp(in[0], {2}), x);
  GC(tg::logsumexp(in[0], {0, 1}, true), x);
  GC(tg::amax(in[0], {1}), x);
  GC(tg::amin(in[0], {0, 2}, true), x);
  GC(tg::max(in[0], 1).values, x);
  GC(tg::min(in[0], -1, true).values, x);
  GC(tg::sum_to(in[0], {3, 1}), x);
}

TEST_F(Gradcheck, AmaxTiesShareTheGradient) {
  Tensor x = tg::tensor({1.0, 3.0, 3.0}, tg::kFloat64).requires_grad_();
  tg::amax(x).backward();
  EXPECT_TRUE(close(x.grad(), {0.0, 0.5, 0.5}));
}

TEST_F(Gradcheck, Shape) {
  Tensor x = leaf({2, 3, 4});
  GC(tg::reshape(in[0], {4, -1}), x);
  GC(tg::flatten(in[0], 1), x);
  GC(tg::squeeze(tg::unsqueeze(in[0], 1), 1), x);
  GC(tg::permute(in[0], {2, 0, 1}), x);
  GC(tg::permute(in[0], {0, 2, 1, 3}), leaf({2, 1, 3, 2}));  // (only a length-1 dimension moves: a view)
  GC(tg::transpose(in[0], 0, 2), x);
  GC(tg::expand(in[0], {2, 2, 3, 4}), x);
  GC(tg::expand(in[0], {5, -1, -1, -1}) * 1.0, leaf({1, 3, 1}));
  GC(tg::slice(in[0], 2, 1, 4, 2), x);
  GC(tg::slice(in[0], 1, -2, 3), x);
  GC(tg::narrow(in[0], 0, 1, 1), x);
  GC(tg::concat({in[0], in[1]}, 1), x, leaf({2, 2, 4}));
  GC(tg::stack({in[0], in[1]}, 0), leaf({3}), leaf({3}));
  GC(tg::split(in[0], 2, 2)[1], x);
  GC(tg::chunk(in[0], 3, 1)[2], x);
  Tensor idx = tg::from_vector<int64_t>({2, 0, 2}, {3});
  GC(tg::index_select(in[0], 2, idx), x);
  Tensor gidx = tg::from_vector<int64_t>({0, 2, 1, 1, 0, 0}, {2, 3});
  GC(tg::gather(in[0], 1, gidx), leaf({2, 4}));
  GC(tg::index_add({4, 3}, 0, idx, in[0]), leaf({3, 3}));
  GC(tg::scatter_add({2, 4}, 1, gidx, in[0]), leaf({2, 3}));
  GC(tg::slice_backward(in[0], {2, 7}, 1, 1, 2), leaf({2, 3}));
}

TEST_F(Gradcheck, EmbeddingScatterAddsIntoUsedRows) {
  Tensor w = leaf({6, 3});
  Tensor ids = tg::from_vector<int64_t>({1, 4, 1, 0}, {2, 2});
  GC(tg::embedding(in[0], ids), w);
  tg::sum(tg::embedding(w, ids)).backward();
  std::vector<double> g = w.grad().to_vector<double>();
  std::vector<double> rows = {1, 2, 0, 0, 1, 0};  // how often each row was used
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(g[r * 3 + c], rows[r]) << "row " << r;
}

TEST_F(Gradcheck, Matmul) {
  GC(tg::matmul(in[0], in[1]), leaf({3, 4}), leaf({4, 5}));
  GC(tg::matmul(in[0], in[1], true, false), leaf({4, 3}), leaf({4, 5}));
  GC(tg::matmul(in[0], in[1], false, true), leaf({3, 4}), leaf({5, 4}));
  GC(tg::matmul(in[0], in[1], true, true), leaf({4, 3}), leaf({5, 4}));
  GC(tg::matmul(in[0], in[1]), leaf({2, 1, 3, 4}), leaf({3, 4, 2}));
  GC(tg::matmul(in[0], in[1]), leaf({4}), leaf({2, 4, 3}));
  GC(tg::matmul(in[0], in[1]), leaf({2, 3, 4}), leaf({4}));
  GC(tg::matmul(in[0], in[1]), leaf({4}), leaf({4}));
}

TEST_F(Gradcheck, NN) {
  Tensor x = leaf({3, 5}, -2, 2);
  GC(tg::softmax(in[0], -1), x);
  GC(tg::softmax(in[0], 0), x);
  GC(tg::log_softmax(in[0], 1), x);
  GC(tg::log_softmax(in[0], 0), leaf({4, 2, 3}));
  Tensor target = tg::from_vector<int64_t>({1, 4, -100}, {3});
  GC(tg::cross_entropy(in[0], target), x);
  GC(tg::cross_entropy(in[0], target, {.label_smoothing = 0.2}), x);
  GC(tg::cross_entropy(in[0], target, {.reduction = tg::Reduction::kSum}), x);
  GC(tg::cross_entropy(in[0], target, {.reduction = tg::Reduction::kNone}), x);
  Tensor t3 = tg::from_vector<int64_t>({0, 1, 2, 3, 4, 0}, {2, 3});
  GC(tg::cross_entropy(in[0], t3, {.ignore_index = 3}), leaf({2, 3, 5}));
  GC(tg::nll_loss(tg::log_softmax(in[0]), target), x);
  Tensor cw = tg::tensor({0.5, 2.0, 1.5, 0.25, 1.0}, tg::kFloat64);
  GC(tg::cross_entropy(in[0], target, {.weight = cw}), x);
  GC(tg::cross_entropy(in[0], target, {.label_smoothing = 0.2, .weight = cw}), x);
  GC(tg::cross_entropy(in[0], t3, {.ignore_index = 3, .label_smoothing = 0.1, .reduction = tg::Reduction::kNone, .weight = cw}),
     leaf({2, 3, 5}));
  GC(tg::nll_loss(tg::log_softmax(in[0]), target, -100, tg::Reduction::kSum, cw), x);
  Tensor y = tg::rand({3, 5}, tg::kFloat64);
  GC(tg::binary_cross_entropy_with_logits(in[0], in[1]), x, y.requires_grad_());
  GC(tg::layer_norm(in[0], 1, in[1], in[2]), leaf({4, 6}), leaf({6}), leaf({6}));
  GC(tg::layer_norm(in[0], 2), leaf({2, 3, 4}));
  GC(tg::layer_norm(in[0], 1, in[1]), leaf({2, 3, 4}), leaf({4}));
  GC(tg::rms_norm(in[0], in[1]), leaf({2, 3, 6}), leaf({6}));
  GC(tg::rms_norm(in[0], Tensor(), 1e-3), leaf({5, 7}));
  // Rotary embedding: the angles are constants, the input gets the gradient.
  Tensor ang = tg::uniform({5, 3}, -3, 3, tg::kFloat64);
  GC(tg::rotary_embedding(in[0], tg::cos(ang), tg::sin(ang)), leaf({2, 3, 5, 6}));
  GC(tg::repeat_kv(in[0], 3), leaf({2, 2, 3, 4}));
  tg::manual_seed(7);
  Tensor d = leaf({4, 5});
  GC((tg::manual_seed(3), tg::dropout(in[0], 0.3)), d);
  // The layers' residual connection (one kernel on a GPU): residual + dropout(x), as those two ops.
  GC((tg::manual_seed(3), tg::detail::dropout_add(in[0], in[1], 0.3, true)), leaf({4, 5}), leaf({4, 5}));
  tg::manual_seed(3);
  const Tensor want = tg::add(d, tg::dropout(d * 2.0, 0.3, true));
  tg::manual_seed(3);
  EXPECT_TRUE(close(tg::detail::dropout_add(d * 2.0, d, 0.3, true), want, 0, 0));
}

// linear: one fused op with a bias and Identity or ReLU, matmul + bias_act otherwise; a 3-D input's
// leading dims become rows; without a bias.
TEST_F(Gradcheck, Linear) {
  using tg::Activation;
  for (Activation act : {Activation::kIdentity, Activation::kRelu, Activation::kGelu}) {
    Tensor x = leaf({2, 3, 4}, -2, 2), w = leaf({5, 4}), b = leaf({5});
    EXPECT_TRUE(gradcheck_ok([&](const V& in) { return tg::linear(in[0], in[1], in[2], act); }, {x, w, b}))
        << static_cast<int>(act);
    EXPECT_TRUE(gradcheck_ok([&](const V& in) { return tg::linear(in[0], in[1], Tensor(), act); }, {x, w}))
        << static_cast<int>(act);
    if (act != Activation::kRelu) {  // ReLU's second derivative is zero almost everywhere
      EXPECT_TRUE(gradgradcheck_ok([&](const V& in) { return tg::linear(in[0], in[1], in[2], act); }, {x, w, b}))
          << static_cast<int>(act);
    }
  }
}

// An input read by several products (the Q, K and V projections, a batched product): the later
// ones add their gradient into the sum the engine gathered (Node::grad_sink).
TEST_F(Gradcheck, ProductsSharingAnInput) {
  using tg::Activation;
  Tensor x = leaf({2, 3, 4}, -2, 2), wq = leaf({5, 4}), bq = leaf({5}), wk = leaf({3, 4}), m = leaf({4, 2});
  EXPECT_TRUE(gradcheck_ok([&](const V& in) {
    const Tensor h = in[0] * 1.5;
    return tg::sum(tg::linear(h, in[1], in[2]), {-1}) + tg::sum(tg::linear(h, in[3]), {-1}) +
           tg::sum(tg::linear(h, in[1], in[2], Activation::kRelu), {-1}) + tg::sum(tg::matmul(h, in[4]), {-1}) +
           tg::sum(tg::matmul(h, in[3], false, true), {-1});
  }, {x, wq, bq, wk, m}));
}

TEST_F(Gradcheck, LinearWithNoInputFeatures) {
  // An empty product: the output is the bias on every row, of any rank.
  Tensor x = leaf({2, 3, 0}), w = leaf({4, 0}), b = leaf({4});
  const Tensor y = tg::linear(x, w, b);
  EXPECT_EQ(y.shape(), (tg::Shape{2, 3, 4}));
  EXPECT_TRUE(close(y, tg::expand(b, {2, 3, 4}), 0, 0));
  EXPECT_TRUE(gradcheck_ok([&](const V& in) { return tg::linear(in[0], in[1], in[2]); }, {x, w, b}));
}

TEST_F(Gradcheck, BiasActivation) {
  using tg::Activation;
  for (Activation act : {Activation::kIdentity, Activation::kRelu, Activation::kGelu, Activation::kGeluTanh}) {
    Tensor x = leaf({3, 2, 5}, -2, 2), b = leaf({5});
    EXPECT_TRUE(gradcheck_ok([&](const V& in) { return tg::bias_act(in[0], in[1], act); }, {x, b}))
        << static_cast<int>(act);
    if (act != Activation::kRelu) {  // ReLU's second derivative is zero almost everywhere
      EXPECT_TRUE(gradgradcheck_ok([&](const V& in) { return tg::bias_act(in[0], in[1], act); }, {x, b}))
          << static_cast<int>(act);
    }
  }
}

TEST_F(Gradcheck, GradOfGrad) {
  Tensor a = leaf({2, 3}, 0.5, 1.5), b = leaf({3}, 0.5, 1.5);
  GGC(tg::mul(in[0], in[1]), a, b);
  GGC(tg::div(in[0], in[1]), a, b);
  GGC(tg::pow(in[0], in[1]), a, b);
  GGC(tg::add(in[0], in[1]) - in[1], a, b);
  GGC(tg::pow(in[0], 3.0), a);
  GGC(tg::exp(in[0]), a);
  GGC(tg::log(in[0]), a);
  GGC(tg::sqrt(in[0]), a);
  GGC(tg::rsqrt(in[0]), a);
  GGC(tg::tanh(in[0]), a);
  GGC(tg::sigmoid(in[0]), a);
  GGC(tg::gelu(in[0]), a);
  GGC(tg::gelu(in[0], tg::GeluApprox::kTanh), a);
  GGC(tg::silu(in[0]), a);
  GGC(tg::reciprocal(in[0]), a);
  GGC(tg::square(in[0]), a);
  GGC(tg::sum(in[0] * in[0], {1}), a);
  GGC(tg::mean(tg::exp(in[0]), {0}, true), a);
  GGC(tg::var(in[0], {1}), a);
  GGC(tg::logsumexp(in[0], {1}), a);
  GGC(tg::amax(in[0] * in[0], {1}), a);
  GGC(tg::square(tg::permute(in[0], {1, 0})), a);
  GGC(tg::square(tg::slice(in[0], 1, 0, 3, 2)), a);
  GGC(tg::square(tg::expand(in[0], {2, 2, 3})), a);
  GGC(tg::square(tg::concat({in[0], in[0]}, 0)), a);
  GGC(tg::square(tg::gather(in[0], 1, tg::from_vector<int64_t>({0, 2, 1, 1}, {2, 2}))), a);
  GGC(tg::matmul(in[0], tg::transpose(in[0], 0, 1)), a);
  GGC(tg::matmul(in[0], in[1]), a, b);
  GGC(tg::softmax(in[0], -1), a);
  GGC(tg::log_softmax(in[0], 0), a);
  GGC(tg::cross_entropy(in[0], tg::from_vector<int64_t>({0, 2}, {2})), a);
  GGC(tg::layer_norm(in[0], 1, in[1]), a, b);
  GGC(tg::rms_norm(in[0], in[1]), a, b);
  Tensor ang = tg::uniform({2, 2}, -3, 3, tg::kFloat64);
  GGC(tg::square(tg::rotary_embedding(in[0], tg::cos(ang), tg::sin(ang))), leaf({3, 2, 4}));
}

TEST_F(Gradcheck, FiniteDifferencesCatchAWrongGradient) {
  // A custom op with a deliberately wrong backward must fail the check: the check can fail.
  auto bad = [](const V& in) {
    Tensor y = tg::square(in[0].detach());
    return tg::record("bad_square", y, {in[0]}, [x = in[0]](const Tensor& g, const tg::Node&) {
      return tg::Grads{g * x * 3.0};  // should be 2x
    });
  };
  tg::GradcheckResult r = tg::gradcheck(bad, {leaf({3})});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.report.find("analytical"), std::string::npos);
}

}  // namespace
