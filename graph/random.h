#pragma once
// The global random generator: tg::manual_seed(s) makes every random factory, dropout mask and
// initialiser reproducible. Numbers are drawn on the calling thread, in order, so they do not
// depend on the thread count.
#include <cstdint>

namespace tg {

// xoshiro256** (Blackman & Vigna): small state, fast, good statistical quality.
class Generator {
 public:
  explicit Generator(uint64_t seed = 5489) { seed_(seed); }
  void seed_(uint64_t seed);
  uint64_t next_u64();
  double uniform();        // [0, 1)
  double normal();         // standard normal (Box-Muller, caching the second value)
  struct State { uint64_t s[4]; bool has_spare; double spare; };
  State state() const { return {{s_[0], s_[1], s_[2], s_[3]}, has_spare_, spare_}; }
  void set_state(const State& st);

 private:
  uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0;
};

Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace tg
