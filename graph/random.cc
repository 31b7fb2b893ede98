#include "graph/random.h"

#include <cmath>
#include <utility>

namespace tg {
namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

void Generator::seed_(uint64_t seed) {
  uint64_t x = seed;
  for (auto& s : s_) s = splitmix64(x);
  has_spare_ = false;
}

uint64_t Generator::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Generator::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Generator::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1 = uniform(), u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  double r = std::sqrt(-2.0 * std::log(u1));
  double th = 2.0 * M_PI * u2;
  spare_ = r * std::sin(th);
  has_spare_ = true;
  return r * std::cos(th);
}

void Generator::set_state(const State& st) {
  for (int i = 0; i < 4; ++i) s_[i] = st.s[i];
  has_spare_ = st.has_spare;
  spare_ = st.spare;
}

Generator& default_generator() {
  static Generator g;
  return g;
}
void manual_seed(uint64_t seed) { default_generator().seed_(seed); }

namespace {
thread_local SampleKeyScope* t_sample_keys = nullptr;
}
SampleKeyScope::SampleKeyScope(uint64_t k, std::vector<int64_t> s) : key(k), samples(std::move(s)), outer_(t_sample_keys) {
  t_sample_keys = this;
}
SampleKeyScope::~SampleKeyScope() { t_sample_keys = outer_; }
SampleKeyScope* current_sample_keys() { return t_sample_keys; }

uint64_t mix_key(uint64_t a, uint64_t b) {
  uint64_t x = b;
  x = splitmix64(x) ^ a;
  return splitmix64(x);
}

}  // namespace tg
