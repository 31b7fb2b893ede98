// A program of your own on tapegrad: a custom op with its backward, checked against finite
// differences, inside your own model, trained by the library's loop.
#include <cstdio>
#include <vector>

#include <tapegrad/tapegrad.h>

using tg::Tensor;

// softsign(x) = x / (1 + |x|): forward by hand, backward with tg ops (so it is differentiable too).
Tensor softsign(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  tg::dispatch_float(x.dtype(), "softsign", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] / (T(1) + (in[i] < 0 ? -in[i] : in[i]));
  });
  return tg::record("softsign", y, {x}, [x](const Tensor& g, const tg::Node&) {
    return tg::Grads{g / tg::square(tg::abs(x) + 1.0)};
  });
}

struct Net : tg::Module {
  std::shared_ptr<tg::Linear> hidden = register_module("hidden", std::make_shared<tg::Linear>(2, 32));
  std::shared_ptr<tg::Linear> out = register_module("out", std::make_shared<tg::Linear>(32, 1));
  Tensor forward(const Tensor& x) const { return out->forward(softsign(hidden->forward(x))).reshape({-1}); }
};

int main() {
  Tensor probe = tg::randn({3, 4}, tg::kFloat64).requires_grad_();
  tg::GradcheckResult check = tg::gradcheck([](const std::vector<Tensor>& in) { return softsign(in[0]); }, {probe});
  std::printf("gradcheck softsign: %s (max error %.1e)\n", check.ok ? "ok" : "FAILED", check.max_abs_error);

  tg::manual_seed(0);  // 512 points, target sin(3 x0) * x1
  Tensor x = tg::uniform({512, 2}, -1.0, 1.0);
  Tensor y = (tg::sin(x.narrow(1, 0, 1) * 3.0) * x.narrow(1, 1, 1)).reshape({-1});
  auto rows = [](const Tensor& t, const std::vector<int64_t>& ids) {
    return tg::index_select(t, 0, tg::from_vector(ids, {static_cast<int64_t>(ids.size())}));
  };

  Net net;
  tg::Adam opt(net.named_parameters(), {.lr = 1e-2});
  tg::train::Trainer trainer(net, opt, {.max_steps = 300, .show_progress = false});
  std::vector<double> losses;
  trainer.callbacks.on_step = [&](const tg::train::StepInfo& s) { losses.push_back(s.loss); };
  trainer.fit(tg::train::ShuffledSampler(512, 64), [&](const std::vector<int64_t>& ids) {
    Tensor err = net.forward(rows(x, ids)) - rows(y, ids);
    return tg::train::StepOutput{tg::sum(err * err), static_cast<double>(ids.size())};
  });
  std::printf("tapegrad %s build: loss %.4f at step 1, %.4f at step %zu\n", tg::build_arch(), losses.front(),
              losses.back(), losses.size());
  return check.ok && losses.back() < 0.5 * losses.front() ? 0 : 1;
}
