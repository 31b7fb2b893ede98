// Every public op through the same bad inputs, from a table (in the spirit of PyTorch's OpInfo)
// rather than hand-picked cases: wrong ranks, mismatched shapes, other dtypes, zero-size
// dimensions, NaN and Inf, out-of-range dimensions and indices. Each call either returns a
// defined result (a tensor of the expected shape) or throws tg::Error whose message names the op;
// anything else (another exception, a crash, a sanitizer report) fails. Softmax, log-sum-exp and
// the losses stay finite for logits of +-1e4.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "op_table.h"
#include "test_util.h"

namespace {
using tg::Tensor;
using tgt::throws_with;

using tg::testing::all_ops;
using tg::testing::f;
using tg::testing::OpInfo;

// Runs fn; returns "" when it returned a tensor or threw tg::Error naming `name`, else what went wrong.
std::string outcome(const OpInfo& op, const std::vector<Tensor>& in, bool must_succeed, Tensor* out = nullptr) {
  try {
    Tensor r = op.fn(in);
    if (out) *out = r;
    return r.defined() ? "" : "returned an undefined tensor";
  } catch (const tg::Error& e) {
    if (must_succeed) return std::string("refused good inputs: ") + e.what();
    const std::string msg = e.what();
    if (msg.find(op.name) == std::string::npos) return "error does not name the op: " + msg;
    if (msg.find('\n') != std::string::npos) return "error is not one line: " + msg;
    return "";
  } catch (const std::exception& e) {
    return std::string("threw something other than tg::Error: ") + e.what();
  }
}

// The bad variants of an op's good inputs: each input in turn replaced.
std::vector<std::pair<std::string, std::vector<Tensor>>> variants(const std::vector<Tensor>& good) {
  std::vector<std::pair<std::string, std::vector<Tensor>>> out;
  for (size_t i = 0; i < good.size(); ++i) {
    const Tensor& g = good[i];
    auto with = [&](const std::string& what, Tensor t) {
      std::vector<Tensor> v = good;
      v[i] = std::move(t);
      out.emplace_back(fmt::format("input {} {}", i, what), std::move(v));
    };
    tg::Shape s = g.shape();
    // Ranks: one more and one fewer dimension, and a scalar.
    tg::Shape more = s;
    more.insert(more.begin(), 2);
    with("with an extra leading dimension", tg::zeros(more, g.dtype()));
    if (s.size() > 0) {
      tg::Shape fewer(s.begin() + 1, s.end());
      with("with one dimension fewer", tg::zeros(fewer, g.dtype()));
    }
    with("as a 0-d scalar", tg::zeros({}, g.dtype()));
    // Sizes: the last dimension one larger (mismatched), and zero-size dimensions.
    if (s.size() > 0) {
      tg::Shape bigger = s;
      bigger.back() += 1;
      with("with the last dimension one larger", g.dtype() == tg::kInt64 ? tg::zeros(bigger, tg::kInt64) : tg::ones(bigger, g.dtype()));
      tg::Shape empty = s;
      empty[0] = 0;
      with("with a zero-size first dimension", tg::zeros(empty, g.dtype()));
    }
    // Dtypes: every other one.
    for (tg::DType d : {tg::kFloat32, tg::kFloat64, tg::kInt64, tg::kBool, tg::kBFloat16})
      if (d != g.dtype()) with(fmt::format("as {}", tg::dtype_name(d)), g.to(d));
    // Values: NaN and Inf in floats; out-of-range indices (negative and too large) in int64.
    if (tg::is_floating(g.dtype()) && g.numel() > 0) {
      with("holding NaN and Inf", tg::where(tg::gt(g, 0.0), tg::full(s, std::numeric_limits<double>::quiet_NaN(), g.dtype()),
                                           tg::full(s, std::numeric_limits<double>::infinity(), g.dtype())));
    }
    if (g.dtype() == tg::kInt64 && g.numel() > 0) {
      with("holding -7", tg::full(s, -7.0, tg::kInt64));
      with("holding 1000", tg::full(s, 1000.0, tg::kInt64));
    }
  }
  // An undefined tensor in each place.
  for (size_t i = 0; i < good.size(); ++i) {
    std::vector<Tensor> v = good;
    v[i] = Tensor();
    out.emplace_back(fmt::format("input {} undefined", i), std::move(v));
  }
  return out;
}

TEST(OpSweep, GoodInputsWorkAndBadOnesNameTheOp) {
  tg::manual_seed(11);
  int calls = 0, refused = 0;
  std::vector<std::string> problems;
  for (const OpInfo& op : all_ops()) {
    if (std::string p = outcome(op, op.good, true); !p.empty()) problems.push_back(op.name + " on good inputs: " + p);
    for (const auto& [what, in] : variants(op.good)) {
      ++calls;
      Tensor out;
      std::string p = outcome(op, in, false, &out);
      if (!p.empty()) problems.push_back(fmt::format("{} with {}: {}", op.name, what, p));
      if (!out.defined()) ++refused;
    }
  }
  for (const std::string& p : problems) ADD_FAILURE() << p;
  EXPECT_GT(calls, 500);
  EXPECT_GT(refused, 100) << "most bad inputs are refused";
}

// Out-of-range indices never give a result: they are refused (PyTorch's IndexError), even where a
// defined-result rule would otherwise apply.
TEST(OpSweep, OutOfRangeIndicesAreRefused) {
  Tensor x = f({4, 3});
  for (int64_t bad : {-1, 4, 1000}) {
    Tensor idx = tg::full({2}, static_cast<double>(bad), tg::kInt64);
    EXPECT_TRUE(throws_with([&] { tg::index_select(x, 0, idx); }, {"index_select"}));
    EXPECT_TRUE(throws_with([&] { tg::embedding(x, idx); }, {"embedding"}));
    EXPECT_TRUE(throws_with([&] { tg::gather(x, 0, tg::full({1, 3}, static_cast<double>(bad), tg::kInt64)); }, {"gather"}));
  }
  EXPECT_TRUE(throws_with([&] { tg::cross_entropy(x, tg::full({4}, 3.0, tg::kInt64)); }, {"cross_entropy"}));
}

TEST(OpSweep, LargeLogitsStayFinite) {
  Tensor logits = tg::from_vector(std::vector<float>{1e4f, -1e4f, 0.0f, 1e4f, 1e4f, -1e4f}, {2, 3});
  Tensor target = tg::from_vector(std::vector<int64_t>{1, 2}, {2});
  auto finite = [](const Tensor& t) {
    for (float v : t.to_vector<float>())
      if (!std::isfinite(v)) return false;
    return true;
  };
  EXPECT_TRUE(finite(tg::softmax(logits)));
  EXPECT_TRUE(finite(tg::log_softmax(logits)));
  EXPECT_TRUE(finite(tg::logsumexp(logits, {1})));
  Tensor x = logits.clone().requires_grad_();
  Tensor loss = tg::cross_entropy(x, target, {.label_smoothing = 0.1});
  loss.backward();
  EXPECT_TRUE(finite(loss));
  // Row 0: nll 2e4, smoothing term 1e4; row 1: nll 2e4 + ln 2, smoothing (2e4 + 3 ln 2) / 3.
  const double ln2 = std::log(2.0);
  EXPECT_NEAR(loss.item(), (0.9 * 2e4 + 0.1 * 1e4 + 0.9 * (2e4 + ln2) + 0.1 * (2e4 + 3 * ln2) / 3) / 2, 0.05);
  EXPECT_TRUE(finite(x.grad()));
  EXPECT_TRUE(finite(tg::binary_cross_entropy_with_logits(logits, tg::gt(logits, 0.0).to(tg::kFloat32))));
}

}  // namespace
