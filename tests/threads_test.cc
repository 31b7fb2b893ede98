// Threads: two independent models trained at once, on two threads of the program's own, give
// exactly what they give trained one after the other (the pool, the storage cache, the node pools
// and the grad mode are shared or thread-local as they must be). Run under ThreadSanitizer too
// (./tg.sh test --tsan).
#include <thread>
#include <vector>

#include "test_util.h"

namespace {
using tg::Tensor;
using tgt::throws_with;

struct Job {
  std::unique_ptr<tg::Linear> l1, l2;
  std::unique_ptr<tg::AdamW> opt;
  Tensor x, y;
  std::vector<float> losses;
  explicit Job(uint64_t seed) {
    tg::manual_seed(seed);  // everything random is drawn here, before any thread starts
    l1 = std::make_unique<tg::Linear>(64, 256);
    l2 = std::make_unique<tg::Linear>(256, 8);
    tg::NamedTensors params;
    for (auto& [n, p] : l1->named_parameters()) params.emplace_back("l1." + n, p);
    for (auto& [n, p] : l2->named_parameters()) params.emplace_back("l2." + n, p);
    opt = std::make_unique<tg::AdamW>(params, tg::AdamOptions{.lr = 1e-3});
    x = tg::randn({512, 64});
    y = tg::randint(0, 8, {512});
  }
  void train(int steps) {
    for (int s = 0; s < steps; ++s) {
      Tensor loss = tg::cross_entropy(l2->forward(tg::relu(l1->forward(x))), y);
      loss.backward();
      opt->step();
      opt->zero_grad();
      losses.push_back(loss.item<float>());
    }
  }
};

TEST(Threads, TwoModelsTrainedAtOnceMatchOneAfterTheOther) {
  Job a1(1), b1(2), a2(1), b2(2);
  a1.train(30);
  b1.train(30);
  std::thread ta([&] { a2.train(30); }), tb([&] { b2.train(30); });
  ta.join();
  tb.join();
  EXPECT_EQ(a1.losses, a2.losses);
  EXPECT_EQ(b1.losses, b2.losses);
  EXPECT_EQ(a1.l1->weight.to_vector<float>(), a2.l1->weight.to_vector<float>());
  EXPECT_EQ(b1.l2->weight.to_vector<float>(), b2.l2->weight.to_vector<float>());
  EXPECT_NE(a1.losses, b1.losses);
}

}  // namespace
