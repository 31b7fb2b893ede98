// SmallVector: inline/heap storage, element lifetimes, aliasing, and the std::vector-like API.
// Element lifetimes are checked with Counted, which counts live instances and marks itself dead
// on destruction, so a double destroy or a use of a destroyed element fails a test.
#include "graph/small_vector.h"

#include <cstdint>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

using tg::SmallVector;

struct Counted {
  static constexpr uint32_t kAlive = 0xA11CEu, kDead = 0xDEADu;
  static inline int live = 0;
  static inline int errors = 0;  // destroys of dead objects, uses of dead or moved-from ones

  Counted(int v = 0) : value(v), payload(std::make_shared<int>(v)) { ++live; }
  Counted(const Counted& o) : value(o.value), payload(o.payload) {
    check(o);
    ++live;
  }
  Counted(Counted&& o) noexcept : value(o.value), payload(std::move(o.payload)) {
    check(o);
    ++live;
  }
  Counted& operator=(const Counted& o) {
    check(*this);
    check(o);
    value = o.value;
    payload = o.payload;
    return *this;
  }
  Counted& operator=(Counted&& o) noexcept {
    check(*this);
    check(o);
    value = o.value;
    payload = std::move(o.payload);
    return *this;
  }
  ~Counted() {
    if (magic != kAlive) ++errors;
    magic = kDead;
    value = -12345;
    if (--live < 0) ++errors;
  }
  static void check(const Counted& c) {
    if (c.magic != kAlive) ++errors;
  }
  // A moved-from Counted has no payload; reading its value is a bug in the container.
  int get() const {
    check(*this);
    if (!payload || *payload != value) ++errors;
    return value;
  }
  friend bool operator==(const Counted& a, const Counted& b) { return a.get() == b.get(); }
  friend bool operator<(const Counted& a, const Counted& b) { return a.get() < b.get(); }

  uint32_t magic = kAlive;
  int value;
  std::shared_ptr<int> payload;
};

int val(int64_t v) { return static_cast<int>(v); }
int val(const Counted& c) { return c.get(); }

template <class V>
std::vector<int> vals(const V& v) {
  std::vector<int> out;
  for (const auto& x : v) out.push_back(val(x));
  return out;
}

std::vector<int> iota(int n, int start = 0) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) out.push_back(start + i);
  return out;
}

template <class V>
bool is_inline(const V& v) {
  auto p = reinterpret_cast<const unsigned char*>(v.data());
  auto o = reinterpret_cast<const unsigned char*>(&v);
  return p >= o && p < o + sizeof(v);
}

template <class T>
class SmallVectorTyped : public ::testing::Test {
 protected:
  using Vec = SmallVector<T, 4>;
  void SetUp() override { Counted::live = Counted::errors = 0; }
  void TearDown() override {
    EXPECT_EQ(Counted::live, 0) << "leaked or double-destroyed elements";
    EXPECT_EQ(Counted::errors, 0) << "double destroy or use of a dead element";
  }
  static Vec seq(int n, int start = 0) {
    Vec v;
    for (int i = 0; i < n; ++i) v.push_back(T(start + i));
    return v;
  }
};
using ElementTypes = ::testing::Types<int64_t, Counted>;
TYPED_TEST_SUITE(SmallVectorTyped, ElementTypes);

TYPED_TEST(SmallVectorTyped, GrowsFromInlineToHeap) {
  using T = TypeParam;
  typename TestFixture::Vec v;
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(v.capacity(), 4u);
  for (int i = 0; i < 4; ++i) v.push_back(T(i));
  EXPECT_TRUE(is_inline(v));
  EXPECT_EQ(v.capacity(), 4u);
  v.push_back(T(4));
  EXPECT_FALSE(is_inline(v));
  EXPECT_GE(v.capacity(), 8u);  // geometric
  for (int i = 5; i < 100; ++i) EXPECT_EQ(val(v.emplace_back(i)), i);
  EXPECT_EQ(vals(v), iota(100));
  EXPECT_EQ(v.size(), 100u);
  EXPECT_LE(v.capacity(), 256u);
  EXPECT_EQ(val(v.front()), 0);
  EXPECT_EQ(val(v.back()), 99);
  v.pop_back();
  EXPECT_EQ(val(v.back()), 98);
  v.clear();
  EXPECT_TRUE(v.empty());
  v.shrink_to_fit();
  EXPECT_TRUE(is_inline(v));
  v.push_back(T(7));
  EXPECT_EQ(vals(v), std::vector<int>{7});
}

TYPED_TEST(SmallVectorTyped, ShrinkToFitAndReserve) {
  auto v = TestFixture::seq(3);
  v.reserve(2);
  EXPECT_TRUE(is_inline(v));
  v.reserve(20);
  EXPECT_FALSE(is_inline(v));
  EXPECT_EQ(v.capacity(), 20u);
  EXPECT_EQ(vals(v), iota(3));
  v.shrink_to_fit();
  EXPECT_TRUE(is_inline(v));
  EXPECT_EQ(vals(v), iota(3));
  auto w = TestFixture::seq(10);
  w.reserve(40);
  w.shrink_to_fit();
  EXPECT_EQ(w.capacity(), 10u);
  EXPECT_EQ(vals(w), iota(10));
}

TYPED_TEST(SmallVectorTyped, CopyAndMoveInline) {
  using V = typename TestFixture::Vec;
  V v = TestFixture::seq(3, 1);
  V c(v);
  EXPECT_EQ(vals(c), vals(v));
  EXPECT_TRUE(is_inline(c));
  V m(std::move(v));
  EXPECT_EQ(vals(m), (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(v.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty and usable
  v.push_back(TypeParam(9));
  EXPECT_EQ(vals(v), std::vector<int>{9});

  V heap = TestFixture::seq(10);
  heap = c;  // copy assign into a heap vector
  EXPECT_EQ(vals(heap), vals(c));
  V big = TestFixture::seq(4, 10);
  big = m;  // shrinking copy assign
  EXPECT_EQ(vals(big), (std::vector<int>{1, 2, 3}));
  V small = TestFixture::seq(1, 10);
  small = c;  // growing copy assign within inline capacity
  EXPECT_EQ(vals(small), (std::vector<int>{1, 2, 3}));
  V heap2 = TestFixture::seq(10);
  heap2 = std::move(m);  // inline source into a heap target keeps the target's buffer
  EXPECT_EQ(vals(heap2), (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(m.empty());  // NOLINT(bugprone-use-after-move)
  V& self = c;
  c = self;
  c = std::move(self);
  EXPECT_EQ(vals(c), (std::vector<int>{1, 2, 3}));
}

TYPED_TEST(SmallVectorTyped, CopyAndMoveHeap) {
  using V = typename TestFixture::Vec;
  V v = TestFixture::seq(10);
  const auto* p = v.data();
  V c(v);
  EXPECT_EQ(vals(c), iota(10));
  EXPECT_NE(c.data(), p);
  V m(std::move(v));
  EXPECT_EQ(m.data(), p);  // stolen, not copied
  EXPECT_EQ(vals(m), iota(10));
  EXPECT_TRUE(v.empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(is_inline(v));
  EXPECT_EQ(v.capacity(), 4u);
  for (int i = 0; i < 6; ++i) v.push_back(TypeParam(i));
  EXPECT_EQ(vals(v), iota(6));

  V t = TestFixture::seq(2);
  t = std::move(m);  // heap source into an inline target
  EXPECT_EQ(t.data(), p);
  EXPECT_EQ(vals(t), iota(10));
  V h = TestFixture::seq(7, 100);
  h = std::move(t);  // heap into heap: the target's buffer is freed
  EXPECT_EQ(h.data(), p);
  EXPECT_EQ(vals(h), iota(10));
  h = {TypeParam(5), TypeParam(6)};
  EXPECT_EQ(vals(h), (std::vector<int>{5, 6}));
}

TYPED_TEST(SmallVectorTyped, InsertAndErase) {
  using T = TypeParam;
  auto v = TestFixture::seq(2, 1);  // 1 2
  auto it = v.insert(v.begin(), T(0));
  EXPECT_EQ(val(*it), 0);
  EXPECT_EQ(it, v.begin());
  v.insert(v.end(), T(3));
  EXPECT_EQ(vals(v), iota(4));
  EXPECT_TRUE(is_inline(v));
  it = v.insert(v.begin() + 2, T(42));  // full: grows during a middle insert
  EXPECT_FALSE(is_inline(v));
  EXPECT_EQ(it, v.begin() + 2);
  EXPECT_EQ(vals(v), (std::vector<int>{0, 1, 42, 2, 3}));
  it = v.emplace(v.begin() + 1, 41);
  EXPECT_EQ(val(*it), 41);
  EXPECT_EQ(vals(v), (std::vector<int>{0, 41, 1, 42, 2, 3}));
  const T seven(7);
  it = v.insert(v.begin() + 3, 3, seven);
  EXPECT_EQ(it, v.begin() + 3);
  EXPECT_EQ(vals(v), (std::vector<int>{0, 41, 1, 7, 7, 7, 42, 2, 3}));
  it = v.insert(v.end(), 0, seven);
  EXPECT_EQ(it, v.end());

  it = v.erase(v.begin());
  EXPECT_EQ(it, v.begin());
  EXPECT_EQ(vals(v), (std::vector<int>{41, 1, 7, 7, 7, 42, 2, 3}));
  it = v.erase(v.end() - 1);
  EXPECT_EQ(it, v.end());
  it = v.erase(v.begin() + 2, v.begin() + 5);
  EXPECT_EQ(val(*it), 42);
  EXPECT_EQ(vals(v), (std::vector<int>{41, 1, 42, 2}));
  it = v.erase(v.begin() + 1, v.begin() + 1);
  EXPECT_EQ(it, v.begin() + 1);
  EXPECT_EQ(vals(v), (std::vector<int>{41, 1, 42, 2}));
  v.erase(v.cbegin(), v.cend());
  EXPECT_TRUE(v.empty());

  // Range and list inserts, with growth from inline.
  auto w = TestFixture::seq(3);  // 0 1 2
  std::vector<T> src = {T(10), T(11), T(12)};
  it = w.insert(w.begin() + 1, src.begin(), src.end());
  EXPECT_EQ(it, w.begin() + 1);
  EXPECT_EQ(vals(w), (std::vector<int>{0, 10, 11, 12, 1, 2}));
  w.insert(w.end(), {T(20), T(21)});
  EXPECT_EQ(vals(w), (std::vector<int>{0, 10, 11, 12, 1, 2, 20, 21}));
  std::istringstream in("5 6");
  it = w.insert(w.begin(), std::istream_iterator<int>(in), std::istream_iterator<int>());
  EXPECT_EQ(vals(w), (std::vector<int>{5, 6, 0, 10, 11, 12, 1, 2, 20, 21}));
  auto x = TestFixture::seq(2);
  x.insert(x.begin() + 1, 3, T(9));  // grows inside insert(n, v)
  EXPECT_EQ(vals(x), (std::vector<int>{0, 9, 9, 9, 1}));
}

TYPED_TEST(SmallVectorTyped, SelfAliasingWhileGrowing) {
  auto v = TestFixture::seq(4, 10);  // full inline
  v.push_back(v[0]);
  EXPECT_EQ(vals(v), (std::vector<int>{10, 11, 12, 13, 10}));
  while (v.size() < v.capacity()) v.push_back(v.back());
  size_t n = v.size();
  v.emplace_back(v[1]);  // full heap buffer
  EXPECT_EQ(v.size(), n + 1);
  EXPECT_EQ(val(v.back()), 11);

  auto w = TestFixture::seq(4, 10);
  w.insert(w.begin(), w.back());
  EXPECT_EQ(vals(w), (std::vector<int>{13, 10, 11, 12, 13}));
  auto x = TestFixture::seq(4, 10);
  x.insert(x.begin() + 1, 3, x[3]);
  EXPECT_EQ(vals(x), (std::vector<int>{10, 13, 13, 13, 11, 12, 13}));
  auto y = TestFixture::seq(3, 10);
  y.insert(y.begin(), y[2]);  // no growth: the value itself shifts
  EXPECT_EQ(vals(y), (std::vector<int>{12, 10, 11, 12}));
  auto z = TestFixture::seq(4, 10);
  z.resize(6, z[2]);
  EXPECT_EQ(vals(z), (std::vector<int>{10, 11, 12, 13, 12, 12}));
  auto a = TestFixture::seq(4, 10);
  a.assign(9, a[1]);
  EXPECT_EQ(vals(a), std::vector<int>(9, 11));
  a.assign(2, a[5]);
  EXPECT_EQ(vals(a), std::vector<int>(2, 11));
}

TYPED_TEST(SmallVectorTyped, ResizeAndAssign) {
  using T = TypeParam;
  auto v = TestFixture::seq(3, 1);
  v.resize(6);
  EXPECT_EQ(vals(v), (std::vector<int>{1, 2, 3, 0, 0, 0}));  // value-initialized
  v.resize(2);
  EXPECT_EQ(vals(v), (std::vector<int>{1, 2}));
  v.resize(5, T(8));
  EXPECT_EQ(vals(v), (std::vector<int>{1, 2, 8, 8, 8}));
  v.resize(0);
  EXPECT_TRUE(v.empty());
  int reallocations = 0;
  for (size_t n = 1; n < 200; ++n) {
    const auto* p = v.data();
    v.resize(n);
    reallocations += v.data() != p;
  }
  EXPECT_LE(reallocations, 6);  // geometric growth, not one per resize

  v.assign(3, T(4));
  EXPECT_EQ(vals(v), (std::vector<int>{4, 4, 4}));
  v.assign(7, T(5));
  EXPECT_EQ(vals(v), std::vector<int>(7, 5));
  v.assign({T(1), T(2)});
  EXPECT_EQ(vals(v), (std::vector<int>{1, 2}));
  std::vector<T> src = {T(3), T(4), T(5), T(6), T(7), T(8), T(9), T(10), T(11)};
  v.assign(src.begin(), src.end());
  EXPECT_EQ(vals(v), iota(9, 3));
  v.assign(src.begin(), src.begin() + 3);
  EXPECT_EQ(vals(v), iota(3, 3));
  typename TestFixture::Vec w;
  w.assign(src.begin(), src.begin() + 2);
  w.assign(src.begin(), src.begin() + 4);  // partly assigned, partly constructed
  EXPECT_EQ(vals(w), iota(4, 3));
  std::istringstream in("1 2 3 4 5 6");
  w.assign(std::istream_iterator<int>(in), std::istream_iterator<int>());
  EXPECT_EQ(vals(w), iota(6, 1));
}

TYPED_TEST(SmallVectorTyped, Constructors) {
  using T = TypeParam;
  using V = typename TestFixture::Vec;
  V a(3);
  EXPECT_EQ(vals(a), std::vector<int>(3, 0));
  V b(6, T(2));
  EXPECT_EQ(vals(b), std::vector<int>(6, 2));
  V c = {T(1), T(2), T(3), T(4), T(5)};
  EXPECT_EQ(vals(c), iota(5, 1));
  std::vector<T> src = {T(1), T(2), T(3)};
  V d(src.begin(), src.end());
  EXPECT_EQ(vals(d), iota(3, 1));
  std::istringstream in("7 8 9 10 11");
  V e{std::istream_iterator<int>(in), std::istream_iterator<int>()};
  EXPECT_EQ(vals(e), iota(5, 7));
  V f(c.rbegin(), c.rend());
  EXPECT_EQ(vals(f), (std::vector<int>{5, 4, 3, 2, 1}));
  EXPECT_EQ(val(*c.crbegin()), 5);
  EXPECT_EQ(c.rend() - c.rbegin(), 5);
}

TYPED_TEST(SmallVectorTyped, Swap) {
  using V = typename TestFixture::Vec;
  V a = TestFixture::seq(1, 0), b = TestFixture::seq(3, 10);
  a.swap(b);  // inline <-> inline, different sizes
  EXPECT_EQ(vals(a), iota(3, 10));
  EXPECT_EQ(vals(b), iota(1, 0));
  V h = TestFixture::seq(9, 100);
  const auto* hp = h.data();
  swap(a, h);  // inline <-> heap
  EXPECT_EQ(a.data(), hp);
  EXPECT_EQ(vals(a), iota(9, 100));
  EXPECT_EQ(vals(h), iota(3, 10));
  EXPECT_TRUE(is_inline(h));
  using std::swap;
  swap(h, a);  // heap <-> inline, the other way round
  EXPECT_EQ(h.data(), hp);
  EXPECT_EQ(vals(a), iota(3, 10));
  V g = TestFixture::seq(12, 50);
  const auto* gp = g.data();
  h.swap(g);  // heap <-> heap
  EXPECT_EQ(h.data(), gp);
  EXPECT_EQ(g.data(), hp);
  EXPECT_EQ(vals(h), iota(12, 50));
  EXPECT_EQ(vals(g), iota(9, 100));
  V e;
  e.swap(b);
  EXPECT_EQ(vals(e), iota(1, 0));
  EXPECT_TRUE(b.empty());
  a.swap(a);
  EXPECT_EQ(vals(a), iota(3, 10));
}

TYPED_TEST(SmallVectorTyped, Comparisons) {
  using T = TypeParam;
  using V = typename TestFixture::Vec;
  V a = {T(1), T(2), T(3)}, b = {T(1), T(2), T(3)}, c = {T(1), T(2)}, d = {T(1), T(3)};
  V big = TestFixture::seq(9);
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a != b);
  EXPECT_TRUE(a != c);
  EXPECT_TRUE(c < a);
  EXPECT_FALSE(a < c);
  EXPECT_TRUE(a < d);
  EXPECT_TRUE(d > a);
  EXPECT_TRUE(a <= b);
  EXPECT_TRUE(a >= b);
  EXPECT_FALSE(a < b);
  EXPECT_TRUE(big < a);
  EXPECT_TRUE(V() < c);
  EXPECT_TRUE(V() == V());
  EXPECT_FALSE(big == TestFixture::seq(8));
  EXPECT_TRUE(big == TestFixture::seq(9));
}

TYPED_TEST(SmallVectorTyped, ElementAccess) {
  auto v = TestFixture::seq(3, 5);
  const auto& cv = v;
  EXPECT_EQ(val(v.at(2)), 7);
  EXPECT_EQ(val(cv.at(0)), 5);
  EXPECT_EQ(val(cv[1]), 6);
  EXPECT_THROW(v.at(3), std::out_of_range);
  EXPECT_THROW(cv.at(100), std::out_of_range);
  v[1] = TypeParam(60);
  EXPECT_EQ(vals(v), (std::vector<int>{5, 60, 7}));
  EXPECT_EQ(cv.data(), &cv.front());
  EXPECT_EQ(cv.end() - cv.begin(), 3);
  EXPECT_EQ(v.cend() - v.cbegin(), 3);
}

TEST(SmallVector, IntPairPicksCountAndValue) {
  SmallVector<int64_t, 4> v(3, 7);  // (n, value), not the iterator-range constructor
  EXPECT_EQ(v.size(), 3u);
  EXPECT_EQ(v[2], 7);
  v.insert(v.begin(), 2, 1);
  EXPECT_EQ((std::vector<int64_t>(v.begin(), v.end())), (std::vector<int64_t>{1, 1, 7, 7, 7}));
  v.assign(2, 5);
  EXPECT_EQ(v, (SmallVector<int64_t, 4>{5, 5}));
  static_assert(!std::is_convertible_v<size_t, SmallVector<int64_t, 4>>, "(n) is explicit");
  static_assert(std::is_nothrow_move_constructible_v<SmallVector<Counted, 3>>);
  static_assert(std::is_nothrow_move_assignable_v<SmallVector<Counted, 3>>);
  static_assert(std::is_same_v<SmallVector<int64_t, 4>::iterator, int64_t*>);
}

TEST(SmallVector, MoveOnlyElements) {
  SmallVector<std::unique_ptr<int>, 2> v;
  for (int i = 0; i < 5; ++i) v.push_back(std::make_unique<int>(i));
  v.emplace(v.begin(), std::make_unique<int>(-1));
  v.erase(v.begin() + 2);
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(*v[0], -1);
  EXPECT_EQ(*v[1], 0);
  EXPECT_EQ(*v[2], 2);
  auto w = std::move(v);
  EXPECT_EQ(*w[4], 4);
  SmallVector<std::unique_ptr<int>, 2> s;
  s.push_back(std::make_unique<int>(9));
  s.swap(w);
  EXPECT_EQ(*w[0], 9);
  EXPECT_EQ(s.size(), 5u);
  w.resize(3);
  EXPECT_EQ(w[2], nullptr);
}

TEST(SmallVector, OverAlignedElements) {
  struct alignas(64) Wide {
    int x = 0;
  };
  SmallVector<Wide, 2> v(1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 64, 0u);
  v.resize(9);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 64, 0u);
}

// Copies throw on request; moving may throw too (not noexcept), so growing must copy, and a
// throw must leave the vector as it was.
struct Fragile {
  static inline int live = 0, copies_left = 1 << 30;
  int v;
  explicit Fragile(int x) : v(x) { ++live; }
  Fragile(const Fragile& o) : v(o.v) {
    if (--copies_left < 0) throw std::runtime_error("copy");
    ++live;
  }
  Fragile(Fragile&& o) : Fragile(static_cast<const Fragile&>(o)) {}
  Fragile& operator=(const Fragile&) = default;
  ~Fragile() { --live; }
};

TEST(SmallVector, ThrowingCopyLeavesVectorIntact) {
  Fragile::live = 0;
  {
    SmallVector<Fragile, 3> v;
    for (int i = 0; i < 3; ++i) v.emplace_back(i);
    Fragile extra(99);
    for (int budget = 0; budget < 4; ++budget) {  // throws building the new one or relocating
      Fragile::copies_left = budget;
      EXPECT_THROW(v.push_back(extra), std::runtime_error);
      Fragile::copies_left = 1 << 30;
      ASSERT_EQ(v.size(), 3u);
      EXPECT_TRUE(is_inline(v));
      for (int i = 0; i < 3; ++i) EXPECT_EQ(v[i].v, i);
      EXPECT_EQ(Fragile::live, 4);
    }
    Fragile::copies_left = 2;
    EXPECT_THROW(v.insert(v.begin(), 5, extra), std::runtime_error);
    Fragile::copies_left = 2;
    EXPECT_THROW(v.assign(5, extra), std::runtime_error);
    Fragile::copies_left = 1;
    EXPECT_THROW((SmallVector<Fragile, 3>(v)), std::runtime_error);
    Fragile::copies_left = 1 << 30;
    EXPECT_EQ(v.size(), 3u);
    EXPECT_EQ(Fragile::live, 4);
    v.push_back(extra);
    EXPECT_EQ(v.size(), 4u);
    EXPECT_EQ(v[3].v, 99);
  }
  EXPECT_EQ(Fragile::live, 0);
}

// A Shape-like derived class: inherited constructors, its own list constructor, == from the base.
// (N = 4 as in the typed tests: GCC 12 folds the identical members of SmallVector<int64_t, 4> and
// <int64_t, 6> into one and then misreports -Warray-bounds on the smaller object.)
class Dims : public SmallVector<int64_t, 4> {
 public:
  using Base = SmallVector<int64_t, 4>;
  using Base::Base;
  Dims(std::initializer_list<int64_t> d) : Base(d) {}
  int64_t rank() const { return static_cast<int64_t>(size()); }
};

TEST(SmallVector, DerivedClass) {
  Dims a{2, 3};
  Dims b(2, 7);  // inherited (n, value)
  Dims c(3);
  std::vector<int64_t> src = {2, 3};
  Dims d(src.begin(), src.end());
  EXPECT_EQ(a.rank(), 2);
  EXPECT_EQ(b, (Dims{7, 7}));
  EXPECT_EQ(c, (Dims{0, 0, 0}));
  EXPECT_EQ(a, d);
  EXPECT_TRUE(a != b);
  EXPECT_TRUE(a < b);
  EXPECT_EQ(Dims{}, Dims());
  Dims e = a;
  e.push_back(4);
  Dims f = std::move(e);
  EXPECT_EQ(f, (Dims{2, 3, 4}));
  Dims g{1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_FALSE(is_inline(g));
  swap(f, g);
  EXPECT_EQ(f.rank(), 8);
  EXPECT_EQ(g, (Dims{2, 3, 4}));
  EXPECT_TRUE(f == (Dims{1, 2, 3, 4, 5, 6, 7, 8}));
}

}  // namespace
