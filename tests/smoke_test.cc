#include <gtest/gtest.h>

#include "tapegrad.h"

TEST(Smoke, AddBackward) {
  tg::Tensor a = tg::tensor({1, 2, 3}).requires_grad_();
  tg::Tensor b = tg::tensor({4, 5, 6}).requires_grad_();
  tg::Tensor loss = tg::sum(a * b);
  loss.backward();
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{4, 5, 6}));
}
