// README's first taste: fit y = x·w + b with a linear layer, backward and an optimizer step.
#include <cstdio>

#include <tapegrad/tapegrad.h>

int main() {
  tg::manual_seed(0);
  tg::Tensor x = tg::randn({256, 3});                                   // 256 points in 3-D
  tg::Tensor w = tg::from_vector({1.0, -2.0, 0.5}, {3, 1});
  tg::Tensor y = tg::matmul(x, w) + 0.3;                                // their targets
  tg::Linear model(3, 1);                                               // weight [1, 3], bias [1]
  tg::SGD opt(model.named_parameters(), {.lr = 0.1});
  for (int step = 0; step <= 100; ++step) {
    tg::Tensor loss = tg::mean(tg::square(model.forward(x) - y));       // recorded as it runs
    opt.zero_grad();
    loss.backward();                                                    // d loss / d parameters
    opt.step();
    if (step % 25 == 0) std::printf("step %3d  loss %.6f\n", step, loss.item());
  }
  std::printf("weight %s\n", tg::to_string(model.weight).c_str());
  std::printf("bias %s\n", tg::to_string(model.bias).c_str());
}
