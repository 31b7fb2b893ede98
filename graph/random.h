#pragma once
// The global random generator: tg::manual_seed(s) makes every random factory, dropout mask and
// initialiser reproducible. Numbers are drawn on the calling thread, in order, so they do not
// depend on the thread count.
#include <cstdint>
#include <vector>

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

// Dropout keyed by sample, which is what makes data-parallel training independent of the number
// of processes. While a SampleKeyScope is alive on this thread, dropout on a tensor whose first
// dimension has one entry per sample takes each element's mask from (key, the call's number in
// the scope, the sample's id, the element's position within the sample) and not from the global
// generator: a sample gets the same mask whichever batch, batch row or process it lands in, and
// however its batch is padded. tg::train::Trainer opens one per micro-batch (key from the seed and
// the step); the rows of the batch must be those samples, in that order.
class SampleKeyScope {
 public:
  SampleKeyScope(uint64_t key, std::vector<int64_t> samples);
  ~SampleKeyScope();
  SampleKeyScope(const SampleKeyScope&) = delete;
  SampleKeyScope& operator=(const SampleKeyScope&) = delete;

  uint64_t key;
  std::vector<int64_t> samples;
  uint64_t calls = 0;  // dropout calls so far in this scope

 private:
  SampleKeyScope* outer_;
};
// The innermost scope of this thread, or nullptr.
SampleKeyScope* current_sample_keys();
// A 64-bit mix of two numbers (splitmix64's finaliser): keys derived from keys.
uint64_t mix_key(uint64_t a, uint64_t b);

}  // namespace tg
