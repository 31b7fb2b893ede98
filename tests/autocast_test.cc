// Autocast (ops/autocast.h): float32 products in bfloat16 with float32 sums, forward and both
// backward products, against PyTorch running the same policy; float64 untouched; a weight's cached
// pack follows in-place changes and optimizer steps; the results do not depend on the thread count.
#include "test_util.h"

#include "ops/autocast_internal.h"

namespace tgt {
namespace {

Tensor rounded(const Tensor& t) { return t.to(tg::kBFloat16).to(tg::kFloat64); }

TEST(Autocast, ProductsTakeBFloat16InputsAndSumInFloat32) {
  tg::manual_seed(1);
  Tensor a = tg::randn({33, 70}), b = tg::randn({70, 45});
  Tensor plain = tg::matmul(a, b);
  Tensor c;
  {
    tg::AutocastGuard autocast(tg::kBFloat16);
    EXPECT_TRUE(tg::autocast_enabled());
    c = tg::matmul(a, b);
  }
  EXPECT_FALSE(tg::autocast_enabled());
  EXPECT_EQ(c.dtype(), tg::kFloat32);
  EXPECT_TRUE(close(c, tg::matmul(rounded(a), rounded(b)), 1e-5, 1e-5));
  EXPECT_FALSE(close(c, plain, 1e-5, 1e-5)) << "the inputs were not rounded";
  // Nested guards and an inner kFloat32 scope.
  tg::AutocastGuard outer;
  {
    tg::AutocastGuard off(tg::kFloat32);
    EXPECT_FALSE(tg::autocast_enabled());
    EXPECT_TRUE(close(tg::matmul(a, b), plain, 0, 0));
  }
  EXPECT_TRUE(tg::autocast_enabled());
  EXPECT_THROW({ tg::AutocastGuard bad(tg::kFloat64); }, tg::Error);
}

TEST(Autocast, MatchesPyTorchRunningTheSamePolicy) {
  tg::SafetensorsFile g = tg::load_safetensors(std::string(TG_TEST_DATA_DIR) + "/golden/autocast_mlp.safetensors").value();
  auto t = [&](const char* n) { return g.tensors.at(n); };
  tg::Linear l1(40, 96), l2(96, 24);
  l1.weight = t("w1").detach().requires_grad_();
  l1.bias = t("b1").detach().requires_grad_();
  l2.weight = t("w2").detach().requires_grad_();
  l2.bias = t("b2").detach().requires_grad_();
  Tensor x = t("x").detach().requires_grad_();
  Tensor y;
  {
    tg::AutocastGuard autocast;
    y = l2.forward(tg::gelu(l1.forward(x)));
    tg::sum(tg::mul(y, t("loss_weight"))).backward();  // inside the guard
  }
  EXPECT_TRUE(close(y, t("y"), 1e-5, 1e-5));
  for (auto [got, name] : std::vector<std::pair<Tensor, const char*>>{
           {x.grad(), "grad_x"}, {l1.weight.grad(), "grad_w1"}, {l1.bias.grad(), "grad_b1"}, {l2.weight.grad(), "grad_w2"},
           {l2.bias.grad(), "grad_b2"}}) {
    EXPECT_EQ(got.dtype(), tg::kFloat32) << name;
    EXPECT_TRUE(close(got, t(name), 1e-5, 1e-5)) << name;
  }
  // Backward outside the guard: the products keep the forward's precision.
  Tensor x2 = t("x").detach().requires_grad_();
  Tensor y2;
  {
    tg::AutocastGuard autocast;
    y2 = l2.forward(tg::gelu(l1.forward(x2)));
  }
  tg::sum(tg::mul(y2, t("loss_weight"))).backward();
  EXPECT_TRUE(close(x2.grad(), t("grad_x"), 1e-5, 1e-5));
}

TEST(Autocast, Float64IsNeverAutocastSoGradcheckHolds) {
  tg::AutocastGuard autocast;
  Tensor a = leaf({3, 4}), b = leaf({4, 5});
  EXPECT_TRUE(gradcheck_ok([](const std::vector<Tensor>& in) { return tg::matmul(in[0], in[1]); }, {a, b}));
  EXPECT_TRUE(close(tg::matmul(a, b), tg::matmul(a.detach(), b.detach()), 0, 0));
}

TEST(Autocast, ACachedWeightFollowsInPlaceChangesAndOptimizerSteps) {
  tg::manual_seed(2);
  tg::Linear lin(64, 48);
  Tensor x = tg::randn({10, 64});
  tg::AutocastGuard autocast;
  auto expected = [&] { return tg::add(tg::matmul(rounded(x), rounded(lin.weight), false, true), lin.bias.to(tg::kFloat64)); };
  EXPECT_TRUE(close(lin.forward(x), expected(), 1e-5, 1e-5));
  EXPECT_TRUE(close(lin.forward(x), expected(), 1e-5, 1e-5));  // from the cached pack
  {
    tg::NoGradGuard ng;
    lin.weight.mul_(-3.0);  // in place, between two forwards
  }
  EXPECT_TRUE(close(lin.forward(x), expected(), 1e-5, 1e-5));
  tg::SGD opt(lin.named_parameters(), {.lr = 0.5});
  tg::sum(tg::square(lin.forward(x))).backward();
  opt.step();
  EXPECT_TRUE(close(lin.forward(x), expected(), 1e-5, 1e-5)) << "after an optimizer step";
  tg::StateDict sd;
  sd.insert("weight", tg::randn({48, 64}));
  sd.insert("bias", tg::randn({48}));
  lin.load_state_dict(sd, true);
  EXPECT_TRUE(close(lin.forward(x), expected(), 1e-5, 1e-5)) << "after loading a state dict";
}

// linear with a bias and Identity or ReLU is one op whose product applies them (under autocast, in the
// bfloat16 kernel's epilogue): the same bits as matmul then bias_act, forward and every gradient, on
// every path this CPU has, with and without autocast, for a weight with a cached pack and one without.
TEST(Autocast, FusedLinearEqualsMatmulThenBiasAct) {
  using tg::Activation;
  const tg::CpuCapability saved = tg::cpu_capability();
  for (int c = 0; c <= static_cast<int>(tg::best_cpu_capability()); ++c) {
    const auto cap = static_cast<tg::CpuCapability>(c);
    tg::set_cpu_capability(cap);
    for (Activation act : {Activation::kIdentity, Activation::kRelu})
      for (int autocast = 0; autocast < 2; ++autocast)
        for (int leaf_weight = 0; leaf_weight < 2; ++leaf_weight) {
          tg::manual_seed(4);
          std::vector<std::vector<float>> runs;
          for (int fused = 0; fused < 2; ++fused) {
            Tensor x = tg::randn({3, 37, 70}).requires_grad_();
            Tensor w0 = tg::randn({45, 70}).requires_grad_(), b = tg::randn({45}).requires_grad_();
            Tensor w = leaf_weight ? w0 : tg::mul(w0, 1.0);  // a non-leaf weight is packed at every call
            Tensor y;
            {
              tg::AutocastGuard guard(autocast ? tg::kBFloat16 : tg::kFloat32);
              y = fused ? tg::linear(x, w, b, act)
                        : tg::bias_act(tg::matmul(x.reshape({111, 70}), w, false, true), b, act).reshape({3, 37, 45});
              tg::sum(tg::mul(y, tg::randn({3, 37, 45}))).backward();
            }
            std::vector<float> v = y.to_vector<float>();
            for (const Tensor& g : {x.grad(), w0.grad(), b.grad()}) {
              const std::vector<float> gv = g.to_vector<float>();
              v.insert(v.end(), gv.begin(), gv.end());
            }
            runs.push_back(v);
            tg::manual_seed(4);
          }
          EXPECT_EQ(runs[0], runs[1]) << tg::cpu_capability_name(cap) << " act " << static_cast<int>(act) << " autocast "
                                      << autocast << " leaf weight " << leaf_weight;
        }
  }
  tg::set_cpu_capability(saved);
}

// An optimizer step remakes, at once, the packs of each weight it updates that served a product
// (refresh_autocast_packs): the next forward and backward equal those of a copy of the model whose
// packs are made afresh, bit for bit, with SGD and AdamW, over several steps.
// GPU autocast's bfloat16 chain around attention (ops/autocast_internal.h), on the CPU: a bfloat16
// input meets a float32 weight as its float32 copy would (its gradient in bfloat16), and a linear
// with a bfloat16 output is the float32 one with the bias rounded, rounded once — forward and
// gradients bit for bit against those explicit casts.
TEST(Autocast, BFloat16InputsAndOutputsOfALinearAreItsExplicitCasts) {
  tg::manual_seed(5);
  const Tensor x32 = tg::randn({3, 7, 24}), w0 = tg::randn({10, 24}), b0 = tg::randn({10}), r = tg::randn({3, 7, 10});
  const Tensor x16 = x32.to(tg::kBFloat16);
  auto leaves = [&](const Tensor& b) {
    return std::vector<Tensor>{w0.clone().requires_grad_(), b.clone().requires_grad_()};
  };
  for (tg::Activation act : {tg::Activation::kIdentity, tg::Activation::kRelu}) {
    tg::AutocastGuard autocast(tg::kBFloat16);
    std::vector<Tensor> p = leaves(b0), q = leaves(b0);
    Tensor x = x16.clone().requires_grad_(), xr = x16.to(tg::kFloat32).requires_grad_();
    const Tensor y = tg::linear(x, p[0], p[1], act), want = tg::linear(xr, q[0], q[1], act);
    EXPECT_EQ(y.dtype(), tg::kFloat32);
    EXPECT_TRUE(close(y, want, 0, 0));
    tg::sum(y * r).backward();
    tg::sum(want * r).backward();
    EXPECT_EQ(x.grad().dtype(), tg::kBFloat16);
    EXPECT_TRUE(close(x.grad(), xr.grad().to(tg::kBFloat16), 0, 0));
    EXPECT_TRUE(close(p[0].grad(), q[0].grad(), 0, 0));
    EXPECT_TRUE(close(p[1].grad(), q[1].grad(), 0, 0));
  }
  for (int variant = 0; variant < 4; ++variant) {  // bias, no bias, bias and ReLU, ReLU alone
    const bool bias = variant == 0 || variant == 2, relu = variant >= 2;
    tg::AutocastGuard autocast(tg::kBFloat16);
    const Tensor b_rounded = b0.to(tg::kBFloat16).to(tg::kFloat32);
    std::vector<Tensor> p = leaves(b0), q = leaves(b_rounded);
    Tensor x = x32.clone().requires_grad_(), xr = x32.clone().requires_grad_();
    const Tensor y = tg::detail::linear_bf16_output(x, p[0], bias ? p[1] : Tensor(), relu);
    const Tensor want =
        tg::linear(xr, q[0], bias ? q[1] : Tensor(), relu ? tg::Activation::kRelu : tg::Activation::kIdentity).to(tg::kBFloat16);
    EXPECT_EQ(y.dtype(), tg::kBFloat16);
    EXPECT_TRUE(close(y, want, 0, 0));
    const Tensor r16 = r.to(tg::kBFloat16);
    tg::sum(tg::mul(y, r16).to(tg::kFloat32)).backward();
    tg::sum(tg::mul(want, r16).to(tg::kFloat32)).backward();
    EXPECT_TRUE(close(x.grad(), xr.grad(), 0, 0));
    EXPECT_TRUE(close(p[0].grad(), q[0].grad(), 0, 0));
    if (bias) {
      EXPECT_TRUE(close(p[1].grad(), q[1].grad(), 0, 0));
    }
  }
  // Outside autocast both are one line.
  EXPECT_TRUE(throws_with([&] { (void)tg::linear(x16, w0); }, {"linear", "different dtypes"}));
  EXPECT_TRUE(throws_with([&] { (void)tg::detail::linear_bf16_output(x32, w0, b0); }, {"linear", "needs autocast"}));
}

// Dropout of a bfloat16 tensor is computed in float32 and rounded once: the float32 mask from the
// same seed, its gradient the same.
TEST(Autocast, DropoutOfBFloat16IsItsFloat32DropoutRounded) {
  tg::manual_seed(3);
  const Tensor x = tg::randn({5, 64}).to(tg::kBFloat16), r = tg::randn({5, 64}).to(tg::kBFloat16).to(tg::kFloat32);
  Tensor a = x.clone().requires_grad_(), b = x.to(tg::kFloat32).requires_grad_();
  tg::manual_seed(11);
  const Tensor got = tg::dropout(a, 0.3, true);
  tg::manual_seed(11);
  const Tensor want = tg::dropout(b, 0.3, true);
  EXPECT_EQ(got.dtype(), tg::kBFloat16);
  EXPECT_TRUE(close(got, want.to(tg::kBFloat16), 0, 0));
  tg::sum(tg::mul(got.to(tg::kFloat32), r)).backward();
  tg::sum(tg::mul(want, r)).backward();
  EXPECT_TRUE(close(a.grad(), b.grad().to(tg::kBFloat16), 0, 0));
}

TEST(Autocast, AnOptimizerStepRemakesTheWeightPacks) {
  for (int adamw = 0; adamw < 2; ++adamw) {
    tg::manual_seed(5);
    tg::Linear lin(70, 40);
    Tensor x = tg::randn({33, 70}).requires_grad_(), r = tg::randn({33, 40});
    std::unique_ptr<tg::Optimizer> opt;
    if (adamw) opt = std::make_unique<tg::AdamW>(lin.named_parameters(), tg::AdamOptions{.lr = 0.05});
    else opt = std::make_unique<tg::SGD>(lin.named_parameters(), tg::SGDOptions{.lr = 0.05});
    auto run = [&](tg::Linear& l) {
      x.zero_grad();
      l.zero_grad();
      tg::AutocastGuard autocast;
      Tensor y = l.forward(x, tg::Activation::kRelu);
      tg::sum(tg::mul(y, r)).backward();
      std::vector<float> v = y.to_vector<float>();
      for (const Tensor& g : {x.grad(), l.weight.grad(), l.bias.grad()}) {
        const std::vector<float> gv = g.to_vector<float>();
        v.insert(v.end(), gv.begin(), gv.end());
      }
      return v;
    };
    for (int step = 0; step < 3; ++step) {
      const std::vector<float> got = run(lin);
      tg::Linear fresh(70, 40);  // the same values, packs made afresh
      fresh.weight = lin.weight.detach().clone().requires_grad_();
      fresh.bias = lin.bias.detach().clone().requires_grad_();
      EXPECT_EQ(got, run(fresh)) << (adamw ? "AdamW" : "SGD") << " step " << step;
      opt->step();
    }
  }
}

TEST(Autocast, ResultsDoNotDependOnTheThreadCount) {
  tg::manual_seed(3);
  tg::Linear lin(300, 200);
  Tensor x = tg::randn({130, 300}).requires_grad_();
  const int saved = tg::num_threads();
  std::vector<std::vector<float>> outs;
  for (int threads : {1, 2}) {
    tg::set_num_threads(threads);
    tg::AutocastGuard autocast;
    x.zero_grad();
    lin.weight.zero_grad();
    Tensor y = lin.forward(x);
    tg::sum(tg::square(y)).backward();
    std::vector<float> v = y.to_vector<float>(), gx = x.grad().to_vector<float>(), gw = lin.weight.grad().to_vector<float>();
    v.insert(v.end(), gx.begin(), gx.end());
    v.insert(v.end(), gw.begin(), gw.end());
    outs.push_back(v);
  }
  tg::set_num_threads(saved);
  EXPECT_EQ(outs[0], outs[1]);
}

}  // namespace
}  // namespace tgt
