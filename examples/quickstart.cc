// Fits a two-layer MLP to y = sin(x) on [-pi, pi] with hand-written SGD on .grad().
#include <cmath>
#include <string>

#include <fmt/core.h>

#include <tapegrad/tapegrad.h>

int main(int argc, char** argv) {
  using tg::Tensor;
  int64_t steps = 3000, hidden_units = 32;
  double lr = 0.05;
  uint64_t seed = 0;
  std::string device_flag = "cpu";
  tg::cli::Flags flags("quickstart", "fit a two-layer MLP to sin(x) with hand-written SGD on .grad()");
  flags.add("steps", &steps, "gradient steps").range(0, 10000000);
  flags.add("hidden", &hidden_units, "hidden units").range(1, 100000);
  flags.add("lr", &lr, "learning rate").above(0);
  flags.add("seed", &seed, "random seed");
  tg::cli::add_device(flags, &device_flag);
  if (tg::Status s = flags.parse(argc, argv); !s.ok()) tg::cli::fail(s.message());
  const tg::Device device = tg::cli::device(device_flag);  // --device cuda: every tensor below on the GPU
  tg::manual_seed(seed);

  // 256 points on a grid, as a column: x [256, 1], y = sin(x).
  Tensor x = tg::arange(-M_PI, M_PI, 2 * M_PI / 256).reshape({-1, 1}).to(device);
  Tensor y = tg::sin(x);

  // Parameters: leaves that require grad.
  const int64_t hidden = hidden_units;
  Tensor w1 = (tg::randn({1, hidden}) * 1.0).to(device).requires_grad_();
  Tensor b1 = tg::zeros({hidden}, tg::kFloat32, device).requires_grad_();
  Tensor w2 = (tg::randn({hidden, 1}) * (1.0 / std::sqrt(hidden))).to(device).requires_grad_();
  Tensor b2 = tg::zeros({1}, tg::kFloat32, device).requires_grad_();

  for (int64_t step = 0; step <= steps; ++step) {
    Tensor h = tg::tanh(tg::matmul(x, w1) + b1);   // [256, 32]
    Tensor pred = tg::matmul(h, w2) + b2;         // [256, 1]
    Tensor loss = tg::mean(tg::square(pred - y));

    loss.backward();                              // fills .grad() of w1, b1, w2, b2
    {
      tg::NoGradGuard no_grad;                    // the update itself is not recorded
      for (Tensor* p : {&w1, &b1, &w2, &b2}) {
        p->add_(p->grad(), -lr);                  // p -= lr * dloss/dp, in place
        p->zero_grad();                           // gradients accumulate otherwise
      }
    }
    if (step % 500 == 0) fmt::print("step {:5d}  loss {:.6f}\n", step, loss.item());
  }
  return 0;
}
