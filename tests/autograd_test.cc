// The recorded graph and the backward engine.
#include "test_util.h"

#include <algorithm>
#include <optional>

namespace {
using namespace tgt;

TEST(Autograd, RecordsOnlyWhenNeeded) {
  Tensor a = tg::ones({2}), b = tg::ones({2}).requires_grad_();
  EXPECT_FALSE((a + a).requires_grad());
  Tensor c = a * b;
  EXPECT_TRUE(c.requires_grad());
  EXPECT_EQ(c.grad_fn_name(), "mul");
  {
    tg::NoGradGuard ng;
    EXPECT_FALSE((b * b).requires_grad());
  }
  EXPECT_TRUE((b * b).requires_grad());
  EXPECT_FALSE(b.detach().requires_grad());
  EXPECT_TRUE(b.detach().is_leaf());
}

TEST(Autograd, GradientsAccumulateAcrossCalls) {
  Tensor x = tg::tensor({1.0, 2.0}, tg::kFloat64).requires_grad_();
  tg::sum(x * x).backward();
  EXPECT_TRUE(close(x.grad(), {2.0, 4.0}));
  tg::sum(x * 3.0).backward();
  EXPECT_TRUE(close(x.grad(), {5.0, 7.0}));
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autograd, SharedGradientsStayPrivate) {
  // add's backward hands the same gradient to both inputs; updating one must not change the other.
  Tensor a = tg::zeros({3}).requires_grad_(), b = tg::zeros({3}).requires_grad_();
  tg::sum(a + b).backward();
  {
    tg::NoGradGuard ng;
    a.grad().impl().requires_grad = false;
    Tensor ga = a.grad();
    ga.mul_(10.0);
  }
  EXPECT_TRUE(close(b.grad(), {1.0, 1.0, 1.0}));
}

TEST(Autograd, CreateGraphGradientsAreDistinctTensors) {
  Tensor a = tg::tensor({1.0, 2.0}, tg::kFloat64).requires_grad_(), b = tg::tensor({3.0, 4.0}, tg::kFloat64).requires_grad_();
  tg::sum(a + b).backward({}, {.create_graph = true});
  EXPECT_FALSE(a.grad().same(b.grad()));
  EXPECT_NE(a.grad().raw_data(), b.grad().raw_data());
  a.zero_grad();
  b.zero_grad();
}

TEST(Autograd, DiamondGraphSumsBothPaths) {
  Tensor x = tg::tensor({3.0}, tg::kFloat64).requires_grad_();
  Tensor y = x * x;           // 9
  Tensor z = y * 2.0 + y * y; // dz/dx = (2 + 2y) * 2x = 20 * 6 = 120
  z.backward();
  EXPECT_DOUBLE_EQ(x.grad().item(), 120.0);
}

TEST(Autograd, GradientsSummedInPlaceOnlyWhereNothingElseHoldsThem) {
  // y feeds four consumers; add's backward hands one tensor to two of them (y + y), so that sum
  // must not be made in place, while the later ones may: dy = 1 + 1 + 3 + 2 (y * y, y = 1) = 7.
  Tensor x = tg::ones({40000}).requires_grad_();  // large enough for the threads to split the sums
  Tensor y = x * 1.0;
  Tensor seen;
  y.register_hook([&](const Tensor& g) {
    seen = g;
    return Tensor();
  });
  tg::sum((y + y) + y * 3.0 + y * y).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>(40000, 7.0f));
  EXPECT_EQ(seen.to_vector<float>(), std::vector<float>(40000, 7.0f));
}

// An op whose backward, where the engine offers the sum gathered for its input (Node::grad_sink),
// adds its gradient 2g into it and returns it, counting the offers.
Tensor twice(const Tensor& x, int& offers) {
  Tensor y = x.detach() * 2.0;
  Tensor out = tg::record("twice", y, {x}, [&offers](const Tensor& g, const tg::Node& n) {
    Tensor sink = n.grad_sink(0);
    if (!sink.defined()) return tg::Grads{g * 2.0};
    ++offers;
    sink.add_(g * 2.0);
    return tg::Grads{sink};
  });
  out.grad_fn()->take_grad_sinks();  // (only ops that ask are offered a sink)
  return out;
}

TEST(Autograd, AnOpMayAddItsGradientIntoTheGatheredSum) {
  Tensor x = tg::tensor({1.0, 2.0}, tg::kFloat64).requires_grad_();
  int offers = 0;
  Tensor y = x * 3.0;
  (tg::sum(twice(y, offers)) + tg::sum(twice(y, offers))).backward();  // the second sees the first's
  EXPECT_EQ(offers, 1);
  EXPECT_TRUE(close(x.grad(), {12.0, 12.0}));

  // The sum stays in the first gradient's memory whether the later ops add into it themselves
  // (twice) or leave it to the engine (mul): `tap` runs first and hands over a fresh gradient.
  const void* first = nullptr;
  const void* summed = nullptr;
  auto tap = [&first](const Tensor& t) {
    return tg::record("tap", t.detach() * 1.0, {t}, [&first](const Tensor& g, const tg::Node&) {
      Tensor fresh = g * 1.0;
      first = fresh.raw_data();
      return tg::Grads{fresh};
    });
  };
  Tensor y2 = x * 3.0;
  y2.register_hook([&summed](const Tensor& g) {
    summed = g.raw_data();
    return Tensor();
  });
  offers = 0;
  const Tensor l1 = tg::sum(y2 * 2.0), l2 = tg::sum(twice(y2, offers)), l3 = tg::sum(tap(y2));  // (in this order)
  (l1 + l2 + l3).backward();
  EXPECT_EQ(offers, 1);
  EXPECT_NE(first, nullptr);
  EXPECT_EQ(summed, first);

  // Into a leaf's .grad() on the next backward, the same storage updated in place ...
  offers = 0;
  x.zero_grad();
  tg::sum(twice(x, offers)).backward();
  EXPECT_EQ(offers, 0);
  const double* before = x.grad().data<double>();
  tg::sum(twice(x, offers)).backward();
  EXPECT_EQ(offers, 1);
  EXPECT_EQ(x.grad().data<double>(), before);
  EXPECT_TRUE(close(x.grad(), {4.0, 4.0}));

  // ... but never where someone else holds it, a hook must see the parts, tg::grad captures, or
  // the gradient must stay differentiable.
  Tensor held = x.grad();
  tg::sum(twice(x, offers)).backward();
  EXPECT_EQ(offers, 1);
  EXPECT_TRUE(close(held, {4.0, 4.0}));
  EXPECT_TRUE(close(x.grad(), {6.0, 6.0}));
  held = Tensor();
  Tensor z = tg::tensor({1.0}, tg::kFloat64).requires_grad_();
  tg::sum(twice(z, offers)).backward();
  z.register_hook([](const Tensor& g) { return g; });
  tg::sum(twice(z, offers)).backward();
  EXPECT_EQ(offers, 1);
  EXPECT_TRUE(close(z.grad(), {4.0}));
  tg::grad({tg::sum(twice(x, offers))}, {x});
  tg::sum(twice(x, offers)).backward(Tensor(), {.create_graph = true});
  EXPECT_EQ(offers, 1);
  EXPECT_TRUE(close(x.grad(), {8.0, 8.0}));
}

TEST(Autograd, ProductsAddTheirGradientsIntoTheGatheredSum) {
  // One input feeding three linear layers (the Q, K and V projections) and a batched product: the
  // later products add dX into the sum in the product itself. Against each path's gradient alone.
  tg::manual_seed(7);
  for (bool autocast : {false, true}) {
    const tg::DType dt = autocast ? tg::kFloat32 : tg::kFloat64;
    Tensor x = tg::randn({2, 3, 8}, dt).requires_grad_();
    Tensor wq = tg::randn({5, 8}, dt).requires_grad_(), bq = tg::randn({5}, dt).requires_grad_();
    Tensor wk = tg::randn({5, 8}, dt).requires_grad_(), wv = tg::randn({6, 8}, dt).requires_grad_();
    Tensor bv = tg::randn({6}, dt).requires_grad_(), m = tg::randn({8, 4}, dt);
    std::optional<tg::AutocastGuard> guard;
    if (autocast) guard.emplace(tg::kBFloat16);
    auto terms = [&](const Tensor& h) {
      return std::vector<Tensor>{tg::sum(tg::linear(h, wq, bq) * 0.5), tg::sum(tg::linear(h, wk) * tg::linear(h, wk)),
                                 tg::sum(tg::linear(h, wv, bv, tg::Activation::kRelu)), tg::sum(tg::matmul(h, m))};
    };
    Tensor want_x = tg::zeros_like(x), want_wk = tg::zeros_like(wk);
    for (const Tensor& t : terms(x * 1.0)) {
      std::vector<Tensor> g = tg::grad({t}, {x, wk}, {}, {.retain_graph = true, .allow_unused = true});
      want_x = want_x + g[0];
      if (g[1].defined()) want_wk = want_wk + g[1];
    }
    std::vector<Tensor> ts = terms(x * 1.0);
    (ts[0] + ts[1] + ts[2] + ts[3]).backward();
    const double rtol = autocast ? 1e-5 : 1e-12;
    EXPECT_TRUE(close(x.grad(), want_x, rtol, rtol)) << autocast;
    EXPECT_TRUE(close(wk.grad(), want_wk, rtol, rtol)) << autocast;
    // A second backward adds into each weight's .grad() in place.
    const void* before = wq.grad().raw_data();
    const Tensor first = wq.grad().clone();
    std::vector<Tensor> again = terms(x * 1.0);
    (again[0] + again[1] + again[2] + again[3]).backward();
    EXPECT_EQ(wq.grad().raw_data(), before) << autocast;
    EXPECT_TRUE(close(wq.grad(), first * 2.0, rtol, rtol)) << autocast;
  }
}

TEST(Autograd, SecondBackwardThroughFreedGraphIsAnError) {
  Tensor x = tg::tensor({1.0, 2.0}).requires_grad_();
  Tensor loss = tg::sum(tg::exp(x));
  loss.backward();
  EXPECT_TRUE(throws_with([&] { loss.backward(); }, {"second time", "retain_graph"}));
}

TEST(Autograd, RetainGraphAllowsASecondBackward) {
  Tensor x = tg::tensor({1.0, 2.0}, tg::kFloat64).requires_grad_();
  Tensor loss = tg::sum(tg::exp(x));
  loss.backward({}, {.retain_graph = true});
  loss.backward();
  EXPECT_TRUE(close(x.grad(), {2 * std::exp(1.0), 2 * std::exp(2.0)}));
}

TEST(Autograd, NonScalarBackwardNeedsAGradient) {
  Tensor x = tg::ones({2, 2}).requires_grad_();
  Tensor y = x * 2.0;
  EXPECT_TRUE(throws_with([&] { y.backward(); }, {"backward", "one-element", "[2, 2]"}));
  y.backward(tg::full({2, 2}, 0.5));
  EXPECT_TRUE(close(x.grad(), {1, 1, 1, 1}));
  EXPECT_TRUE(throws_with([&] { (x * 2.0).backward(tg::ones({3})); }, {"backward", "[3]", "[2, 2]"}));
}

TEST(Autograd, BackwardOfSomethingWithoutGraphIsAnError) {
  Tensor x = tg::ones({1});
  EXPECT_TRUE(throws_with([&] { (x * 2.0).backward(); }, {"backward", "does not require grad"}));
}

TEST(Autograd, MillionOpChainDoesNotOverflowTheStack) {
  Tensor x = tg::tensor({1.0}).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 1000000; ++i) y = y * 1.0;
  y.backward();
  EXPECT_FLOAT_EQ(x.grad().item(), 1.0f);
  // And a chain that is dropped without backward is torn down without recursion too.
  Tensor z = x;
  for (int i = 0; i < 1000000; ++i) z = z + 0.0;
  z = Tensor();
}

TEST(Autograd, BackwardFreesTheGraphsMemory) {
  tg::empty_storage_cache();
  tg::set_storage_cache_limit(0);  // measure live bytes without the cache holding any
  size_t before = tg::storage_live_bytes();
  {
    Tensor w = tg::randn({256, 256}).requires_grad_();
    size_t with_w = tg::storage_live_bytes();
    Tensor h = w;
    for (int i = 0; i < 20; ++i) h = tg::tanh(h * 1.01);  // each tanh saves a 256 KB output
    Tensor loss = tg::sum(h);
    EXPECT_GT(tg::storage_live_bytes(), with_w + 20 * 256 * 256 * 4);
    loss.backward();
    h = Tensor();
    // What remains: w, its gradient, the loss value.
    EXPECT_LE(tg::storage_live_bytes(), with_w + 256 * 256 * 4 + 4096);
  }
  EXPECT_LE(tg::storage_live_bytes(), before + 4096);
  tg::set_storage_cache_limit(tg::kStorageCacheAuto);
}

TEST(Autograd, CreateGraphGivesDifferentiableGradients) {
  Tensor x = tg::tensor({2.0}, tg::kFloat64).requires_grad_();
  Tensor y = x * x * x;  // y' = 3x^2 = 12, y'' = 6x = 12
  std::vector<Tensor> g = tg::grad({y}, {x}, {}, {.create_graph = true});
  EXPECT_DOUBLE_EQ(g[0].item(), 12.0);
  EXPECT_TRUE(g[0].requires_grad());
  std::vector<Tensor> gg = tg::grad({g[0]}, {x});
  EXPECT_DOUBLE_EQ(gg[0].item(), 12.0);
  // backward(create_graph) leaves a differentiable .grad()
  Tensor x2 = tg::tensor({1.5}, tg::kFloat64).requires_grad_();
  tg::sum(tg::exp(x2 * 2.0)).backward({}, {.create_graph = true});
  Tensor g1 = x2.grad();
  EXPECT_TRUE(g1.requires_grad());
  EXPECT_NEAR(tg::grad({g1}, {x2})[0].item(), 4 * std::exp(3.0), 1e-9);
}

TEST(Autograd, FunctionalGradDoesNotTouchDotGrad) {
  Tensor a = tg::tensor({1.0, 2.0}, tg::kFloat64).requires_grad_();
  Tensor b = tg::tensor({3.0, 4.0}, tg::kFloat64).requires_grad_();
  Tensor mid = a * b;
  Tensor out = tg::sum(mid * mid);
  std::vector<Tensor> g = tg::grad({out}, {a, mid}, {}, {.retain_graph = true});
  EXPECT_TRUE(close(g[0], {2 * 3 * 3 * 1.0, 2 * 8 * 4.0}));  // 2 (ab) b
  EXPECT_TRUE(close(g[1], {6.0, 16.0}));                     // 2 mid
  EXPECT_FALSE(a.grad().defined());
  Tensor unused = tg::ones({1}).requires_grad_();
  EXPECT_TRUE(throws_with([&] { tg::grad({out}, {unused}, {}, {.retain_graph = true}); }, {"grad", "not used"}));
  EXPECT_FALSE(tg::grad({out}, {unused}, {}, {.allow_unused = true})[0].defined());
}

TEST(Autograd, HooksSeeAndReplaceGradients) {
  Tensor x = tg::tensor({1.0, 2.0}, tg::kFloat64).requires_grad_();
  Tensor seen;
  x.register_hook([&](const Tensor& g) {
    seen = g;
    return g * 10.0;
  });
  Tensor y = x * 3.0;
  Tensor seen_mid;
  y.register_hook([&](const Tensor& g) {
    seen_mid = g;
    return Tensor();  // keep
  });
  tg::sum(y * y).backward();
  EXPECT_TRUE(close(seen_mid, {6.0, 12.0}));
  EXPECT_TRUE(close(seen, {18.0, 36.0}));
  EXPECT_TRUE(close(x.grad(), {180.0, 360.0}));
}

TEST(Autograd, RetainGradOnIntermediate) {
  Tensor x = tg::tensor({1.0, 2.0}, tg::kFloat64).requires_grad_();
  Tensor y = x * 2.0;
  y.retain_grad();
  tg::sum(y * y).backward();
  EXPECT_TRUE(close(y.grad(), {4.0, 8.0}));
}

TEST(Autograd, AnomalyModeNamesTheForwardOp) {
  tg::AnomalyGuard on;
  Tensor x = tg::tensor({1.0, -1.0}).requires_grad_();
  EXPECT_TRUE(throws_with([&] { tg::log(x); }, {"anomaly", "forward", "'log'", "NaN"}));
  EXPECT_TRUE(throws_with([&] { tg::div(x, tg::zeros({2})); }, {"anomaly", "'div'", "Inf"}));
}

TEST(Autograd, AnomalyModeNamesTheBackwardOp) {
  Tensor x = tg::tensor({0.0, 1.0}).requires_grad_();
  Tensor y = tg::sqrt(x);  // fine forward; backward divides by sqrt(0)
  tg::AnomalyGuard on;
  EXPECT_TRUE(throws_with([&] { tg::sum(y).backward(); }, {"anomaly", "backward", "'sqrt'", "Inf"}));
}

TEST(Autograd, AnomalyModeIsOffByDefault) {
  EXPECT_FALSE(tg::anomaly_enabled());
  Tensor x = tg::tensor({-1.0});
  EXPECT_TRUE(std::isnan(tg::log(x).item()));
}

// A user-defined op, as the custom_op example program shows: softplus with its own backward.
Tensor softplus(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  const double* in = x.data<double>();
  double* out = y.data<double>();
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = std::max(in[i], 0.0) + std::log1p(std::exp(-std::fabs(in[i])));
  return tg::record("softplus", y, {x}, [x](const Tensor& g, const tg::Node&) { return tg::Grads{g * tg::sigmoid(x)}; });
}

TEST(Autograd, CustomOpPassesGradcheckAndGradgradcheck) {
  Tensor x = leaf({3, 2}, -3, 3);
  auto fn = [](const std::vector<Tensor>& in) { return softplus(in[0]); };
  EXPECT_TRUE(gradcheck_ok(fn, {x}));
  EXPECT_TRUE(gradgradcheck_ok(fn, {x}));
  EXPECT_EQ(softplus(x).grad_fn_name(), "softplus");
}

TEST(Autograd, CustomOpSavedOutputAndNeeds) {
  // exp with the output saved by the node (no reference cycle), computing only needed grads.
  auto my_exp = [](const Tensor& x) {
    Tensor y = Tensor::empty(x.shape(), x.dtype());
    for (int64_t i = 0; i < x.numel(); ++i) y.data<double>()[i] = std::exp(x.data<double>()[i]);
    return tg::record("my_exp", y, {x}, [](const Tensor& g, const tg::Node& n) {
      return tg::Grads{n.needs(0) ? g * n.output() : Tensor()};
    }, /*save_output=*/true);
  };
  Tensor x = leaf({4});
  EXPECT_TRUE(gradcheck_ok([&](const std::vector<Tensor>& in) { return my_exp(in[0]); }, {x}));
  EXPECT_TRUE(gradgradcheck_ok([&](const std::vector<Tensor>& in) { return my_exp(in[0]); }, {x}));
}

TEST(Autograd, SameSeedSameGradientsAnyThreadCount) {
  auto run = [](int threads) {
    tg::set_num_threads(threads);
    tg::manual_seed(11);
    Tensor w = tg::randn({300, 200}).requires_grad_();
    Tensor x = tg::randn({256, 300});
    Tensor loss = tg::mean(tg::log_softmax(tg::matmul(x, w), -1)) + tg::sum(tg::layer_norm(tg::matmul(x, w), 1)) * 1e-3;
    loss.backward();
    return std::make_pair(loss.item(), w.grad().to_vector<float>());
  };
  auto one = run(1), two = run(2), three = run(3);
  tg::set_num_threads(2);
  EXPECT_EQ(one.first, two.first);
  EXPECT_EQ(one.second, two.second);
  EXPECT_EQ(one.second, three.second);
}

}  // namespace

namespace {
using namespace tgt;
// An op whose backward closure held its own output would form a cycle (output -> node -> output)
// and never free its memory. Build every op on inputs that require grad, drop everything, and
// check that all storage is released, with and without a backward.
TEST(Autograd, NoOpKeepsItsGraphAlive) {
  std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> ops = {
      {"exp", [](auto& x) { return tg::exp(x); }}, {"tanh", [](auto& x) { return tg::tanh(x); }},
      {"sigmoid", [](auto& x) { return tg::sigmoid(x); }}, {"sqrt", [](auto& x) { return tg::sqrt(tg::abs(x)); }},
      {"pow", [](auto& x) { return tg::pow(tg::abs(x) + 1.0, x); }},
      {"reciprocal", [](auto& x) { return tg::reciprocal(x + 3.0); }},
      {"amax_keep", [](auto& x) { return tg::amax(x, {1}, true); }}, {"amin", [](auto& x) { return tg::amin(x, {0}); }},
      {"max_keep", [](auto& x) { return tg::max(x, 1, true).values; }},
      {"sum_keep", [](auto& x) { return tg::sum(x, {1}, true); }}, {"var", [](auto& x) { return tg::var(x, {1}); }},
      {"logsumexp", [](auto& x) { return tg::logsumexp(x, {1}, true); }},
      {"softmax", [](auto& x) { return tg::softmax(x, 1); }}, {"log_softmax", [](auto& x) { return tg::log_softmax(x, 0); }},
      {"layer_norm", [](auto& x) { return tg::layer_norm(x, 1); }},
      {"matmul", [](auto& x) { return tg::matmul(x, x, false, true); }},
      {"gather", [](auto& x) { return tg::gather(x, 1, tg::zeros({4, 2}, tg::kInt64)); }},
      {"concat", [](auto& x) { return tg::concat({x, x}, 0); }}, {"slice", [](auto& x) { return tg::slice(x, 1, 0, 3, 2); }},
      {"expand", [](auto& x) { return tg::expand(x, {2, 4, 5}); }}, {"permute", [](auto& x) { return tg::permute(x, {1, 0}); }},
      {"where", [](auto& x) { return tg::where(tg::gt(x, 0.0), x, -x); }},
      {"cross_entropy", [](auto& x) { return tg::cross_entropy(x, tg::zeros({4}, tg::kInt64), {.label_smoothing = 0.1}); }},
      {"bce", [](auto& x) { return tg::binary_cross_entropy_with_logits(x, tg::ones({4, 5})); }},
      {"dropout", [](auto& x) { return tg::dropout(x, 0.5); }}, {"gelu", [](auto& x) { return tg::gelu(x); }},
      {"bias_act", [](auto& x) { return tg::bias_act(x, tg::ones({5}), tg::Activation::kGelu); }},
      {"flash_attention", [](auto& x) { return tg::flash_attention(x, x, x, {.causal = true}); }},
  };
  tg::set_storage_cache_limit(0);
  for (bool do_backward : {false, true}) {
    for (const auto& [name, op] : ops) {
      size_t before = tg::storage_live_bytes();
      {
        Tensor x = tg::randn({4, 5}).requires_grad_();
        Tensor y = op(x);
        if (do_backward) tg::sum(y).backward();
      }
      EXPECT_EQ(tg::storage_live_bytes(), before) << name << (do_backward ? " after backward" : "");
    }
  }
  tg::set_storage_cache_limit(tg::kStorageCacheAuto);
}
}  // namespace

namespace tgt {
namespace {

// The post-accumulate hook runs once per backward, after the last contribution: a weight used
// twice (tied) is reported once, with the sum of both gradients.
TEST(Hooks, PostAccumulateGradHookRunsOnceWithTheFullGradient) {
  Tensor w = tg::from_vector(std::vector<double>{1, 2, 3}, {3}).requires_grad_();
  Tensor x = tg::from_vector(std::vector<double>{4, 5, 6}, {3});
  int calls = 0;
  std::vector<double> seen;
  w.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    ++calls;
    seen = leaf.grad().to_vector<double>();
  });
  Tensor y = tg::sum(w * x) + tg::sum(w * w);  // d/dw = x + 2w
  y.backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<double>{6, 9, 12}));
  // A second backward accumulates into .grad(); the hook sees the running total.
  (tg::sum(w * x)).backward();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(seen, (std::vector<double>{10, 14, 18}));
  // tg::grad does not accumulate into .grad(), so the hook does not run.
  tg::grad({tg::sum(w * x)}, {w});
  EXPECT_EQ(calls, 2);
  Tensor nonleaf = w * 2.0;
  EXPECT_THROW(nonleaf.register_post_accumulate_grad_hook([](const Tensor&) {}), tg::Error);
}

}  // namespace
}  // namespace tgt
