// Optimizers against torch.optim trajectories (tests/golden/optim.safetensors), clipping,
// schedules, optimizer state round trips.
#include <cmath>
#include <string>

#include "test_util.h"

namespace tgt {
namespace {

tg::SafetensorsFile optim_golden() {
  auto f = tg::load_safetensors(std::string(TG_TEST_DATA_DIR) + "/golden/optim.safetensors");
  EXPECT_TRUE(f.ok()) << f.status().message();
  return *f;
}

double meta(const tg::SafetensorsFile& f, const std::string& key) {
  auto it = f.metadata.find(key);
  EXPECT_NE(it, f.metadata.end()) << key;
  return it == f.metadata.end() ? 0 : std::stod(it->second);
}

// 20 steps on loss(w) = sum(sin(w) c + w² d), compared with torch.optim after every step.
void run_trajectory(const std::string& cfg, const std::function<std::unique_ptr<tg::Optimizer>(tg::NamedTensors)>& make) {
  auto f = optim_golden();
  Tensor w = f.tensors.at("w0").clone().requires_grad_();
  const Tensor& c = f.tensors.at("c");
  const Tensor& d = f.tensors.at("d");
  auto opt = make({{"w", w}});
  for (int step = 1; step <= 20; ++step) {
    opt->zero_grad();
    (tg::sin(w) * c + w * w * d).sum().backward();
    opt->step();
    ASSERT_TRUE(close(w, f.tensors.at(cfg + ".step" + std::to_string(step)), 1e-6, 1e-9)) << cfg << " step " << step;
  }
}

TEST(Optim, SgdMatchesTorch) {
  auto f = optim_golden();
  run_trajectory("sgd", [&](tg::NamedTensors p) { return std::make_unique<tg::SGD>(p, tg::SGDOptions{.lr = meta(f, "sgd.lr")}); });
  for (std::string cfg : {"sgd_momentum", "sgd_nesterov"})
    run_trajectory(cfg, [&](tg::NamedTensors p) {
      return std::make_unique<tg::SGD>(p, tg::SGDOptions{.lr = meta(f, cfg + ".lr"),
                                                         .momentum = meta(f, cfg + ".momentum"),
                                                         .dampening = meta(f, cfg + ".dampening"),
                                                         .weight_decay = meta(f, cfg + ".weight_decay"),
                                                         .nesterov = cfg == "sgd_nesterov"});
    });
}

TEST(Optim, AdamAndAdamWMatchTorch) {
  auto f = optim_golden();
  auto opts = [&](const std::string& cfg) {
    return tg::AdamOptions{.lr = meta(f, cfg + ".lr"), .beta1 = meta(f, cfg + ".beta1"), .beta2 = meta(f, cfg + ".beta2"),
                           .eps = meta(f, cfg + ".eps"), .weight_decay = meta(f, cfg + ".weight_decay")};
  };
  for (std::string cfg : {"adam", "adam_wd"})
    run_trajectory(cfg, [&](tg::NamedTensors p) { return std::make_unique<tg::Adam>(p, opts(cfg)); });
  run_trajectory("adamw", [&](tg::NamedTensors p) { return std::make_unique<tg::AdamW>(p, opts("adamw")); });
}

TEST(Optim, Float32UsesTheSameKernel) {  // long enough for the vector body and the tail
  Tensor a = tg::randn({1000}).requires_grad_();
  Tensor b = a.detach().to(tg::kFloat64).requires_grad_();
  tg::AdamW oa({{"a", a}}, {.lr = 0.01}), ob({{"b", b}}, {.lr = 0.01});
  for (int i = 0; i < 5; ++i) {
    oa.zero_grad();
    ob.zero_grad();
    (a * a * a).sum().backward();
    (b * b * b).sum().backward();
    oa.step();
    ob.step();
  }
  EXPECT_TRUE(close(a, b, 1e-5, 1e-6));
}

TEST(Optim, SkipsParametersWithoutGradient) {
  Tensor w = tg::ones({3}).requires_grad_(), frozen = tg::ones({3}).requires_grad_();
  tg::Adam opt({{"w", w}, {"frozen", frozen}}, {.lr = 0.1});
  (w * 2.0).sum().backward();
  opt.step();
  EXPECT_TRUE(close(frozen, tg::ones({3}), 0, 0));
  EXPECT_FALSE(close(w, tg::ones({3}), 0, 0));
  EXPECT_EQ(opt.state().size(), 4u);  // step, w's own step count and its two moments
}

TEST(Optim, LateParameterStartsItsOwnBiasCorrection) {
  // A parameter first reached at step 6 gets the same first update as one reached at step 1
  // (PyTorch counts steps per parameter).
  Tensor a = tg::ones({3}).requires_grad_(), b = tg::ones({3}).requires_grad_();
  tg::Adam opt({{"a", a}, {"b", b}}, {.lr = 0.1});
  for (int i = 0; i < 5; ++i) {
    opt.zero_grad();
    (a * 2.0).sum().backward();
    opt.step();
  }
  opt.zero_grad();
  (b * 2.0).sum().backward();
  opt.step();
  EXPECT_TRUE(close(b, std::vector<double>{0.9, 0.9, 0.9}, 1e-6));  // lr * m̂ / sqrt(v̂) = 0.1 on the first step
}

TEST(Optim, LoadStateRejectsIncompleteOrDuplicated) {
  Tensor w = tg::ones({2}).requires_grad_();
  tg::Adam opt({{"w", w}});
  tg::StateDict half;
  half.insert("step", tg::full({}, 1, tg::kInt64));
  half.insert("w.step", tg::full({}, 1, tg::kInt64));
  half.insert("w.exp_avg", tg::zeros({2}));
  EXPECT_TRUE(throws_with([&] { opt.load_state(half); }, {"state of 'w' is incomplete (1 of 2 buffers)"}));
  tg::StateDict bad_step;
  bad_step.insert("step", tg::full({}, -3, tg::kInt64));
  EXPECT_TRUE(throws_with([&] { opt.load_state(bad_step); }, {"'step' must be a non-negative integer"}));
  EXPECT_TRUE(throws_with([&] { tg::Adam({{"w", w}, {"w2", w}}); }, {"'w2' is listed twice"}));
  // Loaded state is copied, not shared with the source optimizer.
  (w * w).sum().backward();
  opt.step();
  Tensor w2 = w.detach().clone().requires_grad_();
  tg::Adam other({{"w", w2}});
  other.load_state(opt.state());
  (w2 * w2).sum().backward();
  other.step();
  EXPECT_NE(other.state().at("w.exp_avg").to_vector<double>(), opt.state().at("w.exp_avg").to_vector<double>());
}

TEST(Optim, ClipGradNorm) {
  Tensor a = tg::zeros({2}).requires_grad_(), b = tg::zeros({1}).requires_grad_();
  a.set_grad(tg::tensor({3, 0}));
  b.set_grad(tg::tensor({4}));
  EXPECT_NEAR(tg::clip_grad_norm({a, b}, 1.0), 5.0, 1e-9);
  EXPECT_TRUE(close(a.grad(), std::vector<double>{0.6, 0}, 1e-5));
  EXPECT_TRUE(close(b.grad(), std::vector<double>{0.8}, 1e-5));
  EXPECT_NEAR(tg::clip_grad_norm({a, b}, 10.0), 1.0, 1e-5);  // below the limit: unchanged
  EXPECT_TRUE(close(b.grad(), std::vector<double>{0.8}, 1e-5));
  EXPECT_TRUE(throws_with([&] { tg::clip_grad_norm({a}, 0); }, {"max_norm must be > 0"}));
}

// clip_grad_norm_ returns the norm as a tensor (no host read on a GPU) and clips as clip_grad_norm;
// a non-finite norm raises the flag for its step, and an optimizer holding the flag then skips.
TEST(Optim, ClipGradNormTensorAndTheNonFiniteFlag) {
  Tensor a = tg::zeros({2}).requires_grad_(), b = tg::zeros({1}).requires_grad_();
  a.set_grad(tg::tensor({3, 0}));
  b.set_grad(tg::tensor({4}));
  tg::NonFiniteFlag flag;
  Tensor norm = tg::clip_grad_norm_({a, b}, 1.0, &flag, 7);
  EXPECT_EQ(norm.dim(), 0);
  EXPECT_NEAR(norm.item(), 5.0, 1e-9);
  EXPECT_TRUE(close(a.grad(), std::vector<double>{0.6, 0}, 1e-5));
  EXPECT_NEAR(tg::clip_grad_norm_({a, b}, 0).item(), 1.0, 1e-5);  // 0: the norm alone
  EXPECT_FALSE(flag.raised());
  EXPECT_EQ(flag.first_step(), 0);

  tg::SGD opt({{"a", a}, {"b", b}}, {.lr = 1.0});
  opt.set_skip_flag(&flag);
  opt.step();  // not raised: a moves
  EXPECT_TRUE(close(a, std::vector<double>{-0.6, 0}, 1e-5));
  b.set_grad(tg::tensor({std::nan("")}));
  tg::clip_grad_norm_({a, b}, 1.0, &flag, 8);
  flag.check(tg::tensor({1.0, INFINITY}), 9);  // a later raise keeps the first step
  EXPECT_TRUE(flag.raised());
  EXPECT_EQ(flag.first_step(), 8);
  opt.step();  // raised: nothing moves
  EXPECT_TRUE(close(a, std::vector<double>{-0.6, 0}, 1e-5));
  EXPECT_EQ(opt.steps(), 1);
  flag.reset();
  EXPECT_FALSE(flag.raised());
  EXPECT_TRUE(throws_with([&] { tg::clip_grad_norm_({a}, -1); }, {"clip_grad_norm_", "max_norm must be >= 0"}));
}

// The norm of a large gradient (partial sums taken in parallel) is the same number on any thread
// count, and the sum of squares it stands for.
TEST(Optim, GradNormDoesNotDependOnTheThreadCount) {
  tg::manual_seed(4);
  Tensor w = tg::zeros({1000, 333}).requires_grad_();  // 333,000 values: 326 partial sums, a tail
  w.set_grad(tg::randn({1000, 333}));
  std::vector<double> norms;
  const int saved = tg::num_threads();
  for (int threads : {1, 2, 3}) {
    tg::set_num_threads(threads);
    norms.push_back(tg::grad_norm({w}));
  }
  tg::set_num_threads(saved);
  EXPECT_EQ(norms[0], norms[1]);
  EXPECT_EQ(norms[0], norms[2]);
  double want = 0;
  for (float v : w.grad().to_vector<float>()) want += static_cast<double>(v) * v;
  EXPECT_NEAR(norms[0], std::sqrt(want), 1e-6 * std::sqrt(want));
}

TEST(Optim, Schedules) {
  tg::NoamSchedule noam{.d_model = 512, .warmup = 4000};
  EXPECT_NEAR(noam(1), std::pow(512, -0.5) * std::pow(4000, -1.5), 1e-15);
  EXPECT_NEAR(noam(4000), std::pow(512, -0.5) * std::pow(4000, -0.5), 1e-15);  // the peak
  EXPECT_NEAR(noam(16000), std::pow(512, -0.5) * std::pow(16000, -0.5), 1e-15);
  EXPECT_LT(noam(3999), noam(4000));
  EXPECT_LT(noam(4001), noam(4000));
  tg::WarmupCosineSchedule cos{.peak = 1.0, .warmup = 10, .total = 110, .min_lr = 0.1};
  EXPECT_NEAR(cos(5), 0.5, 1e-12);
  EXPECT_NEAR(cos(10), 1.0, 1e-12);
  EXPECT_NEAR(cos(60), 0.55, 1e-12);  // half way: the mean of peak and floor
  EXPECT_NEAR(cos(110), 0.1, 1e-12);
  EXPECT_NEAR(cos(500), 0.1, 1e-12);
  tg::StepSchedule st{.base = 1.0, .step_size = 10, .gamma = 0.5};
  EXPECT_EQ(st(1), 1.0);
  EXPECT_EQ(st(10), 1.0);
  EXPECT_EQ(st(11), 0.5);
  EXPECT_EQ(st(25), 0.25);
  EXPECT_TRUE(throws_with([&] { noam(0); }, {"NoamSchedule", "step (0)"}));
}

TEST(Optim, StateRoundTripContinuesIdentically) {
  auto make = [] { return tg::randn({5, 4}, tg::kFloat32); };
  tg::manual_seed(9);
  Tensor w1 = make().requires_grad_();
  Tensor w2 = w1.detach().clone().requires_grad_();
  tg::Adam a({{"w", w1}}, {.lr = 0.05}), b({{"w", w2}}, {.lr = 0.05});
  auto step = [](tg::Optimizer& o, const Tensor& w) {
    o.zero_grad();
    (tg::tanh(w) * w).sum().backward();
    o.step();
  };
  for (int i = 0; i < 3; ++i) step(a, w1), step(b, w2);
  tg::Adam c({{"w", w2}}, {.lr = 0.05});
  c.load_state(b.state());
  EXPECT_EQ(c.steps(), 3);
  for (int i = 0; i < 3; ++i) step(a, w1), step(c, w2);
  EXPECT_TRUE(close(w2, w1, 0, 0));
  tg::StateDict bad;
  bad.insert("step", tg::full({}, 1, tg::kInt64));
  bad.insert("w.exp_avg", tg::zeros({3}));
  EXPECT_TRUE(throws_with([&] { c.load_state(bad); }, {"'w.exp_avg' has shape [3]"}));
  tg::StateDict other;
  other.insert("step", tg::full({}, 1, tg::kInt64));
  other.insert("v.exp_avg", tg::zeros({5, 4}));
  EXPECT_TRUE(throws_with([&] { c.load_state(other); }, {"1 of 2 state entries match no parameter"}));
}

TEST(Optim, OptionErrors) {
  Tensor w = tg::ones({2}).requires_grad_();
  EXPECT_TRUE(throws_with([&] { tg::SGD({{"w", w}}, {.lr = 0.1, .nesterov = true}); }, {"Nesterov", "momentum > 0"}));
  EXPECT_TRUE(throws_with([&] { tg::Adam({{"w", w}}, {.beta1 = 1.0}); }, {"betas (1, 0.999)"}));
  EXPECT_TRUE(throws_with([&] { tg::SGD({{"w", w}}, {.lr = -1}); }, {"learning rate must be >= 0"}));
}

}  // namespace
}  // namespace tgt
