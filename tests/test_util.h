#pragma once
// Helpers shared by the tests.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tapegrad.h"

namespace tgt {
using tg::Shape;
using tg::Tensor;

// Uniform float64 leaf in [lo, hi) that requires grad.
inline Tensor leaf(const Shape& s, double lo = -1.0, double hi = 1.0) {
  return tg::uniform(s, lo, hi, tg::kFloat64).requires_grad_();
}

// Element-wise closeness of two tensors (any float dtypes, same shape).
inline ::testing::AssertionResult close(const Tensor& got, const Tensor& want, double rtol = 1e-6, double atol = 1e-7) {
  if (got.shape() != want.shape())
    return ::testing::AssertionFailure() << "shape " << got.shape().str() << " vs expected " << want.shape().str();
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    bool both_nan = std::isnan(g[i]) && std::isnan(w[i]);
    bool same_inf = std::isinf(g[i]) && g[i] == w[i];
    if (!both_nan && !same_inf && !(std::fabs(g[i] - w[i]) <= atol + rtol * std::fabs(w[i])))
      return ::testing::AssertionFailure() << "element " << i << ": got " << g[i] << ", expected " << w[i];
  }
  return ::testing::AssertionSuccess();
}
inline ::testing::AssertionResult close(const Tensor& got, const std::vector<double>& want, double rtol = 1e-6,
                                        double atol = 1e-7) {
  return close(got, tg::from_vector(want, got.shape(), tg::kFloat64), rtol, atol);
}

inline ::testing::AssertionResult gradcheck_ok(const tg::GradcheckFn& fn, const std::vector<Tensor>& in,
                                               tg::GradcheckOptions o = {}) {
  tg::GradcheckResult r = tg::gradcheck(fn, in, o);
  if (r.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.report;
}
inline ::testing::AssertionResult gradgradcheck_ok(const tg::GradcheckFn& fn, const std::vector<Tensor>& in,
                                                   tg::GradcheckOptions o = {}) {
  tg::GradcheckResult r = tg::gradgradcheck(fn, in, o);
  if (r.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.report;
}

// Runs stmt and expects a tg::Error whose message contains every given fragment.
inline ::testing::AssertionResult throws_with(const std::function<void()>& stmt, std::vector<std::string> fragments) {
  try {
    stmt();
  } catch (const tg::Error& e) {
    std::string msg = e.what();
    for (const auto& f : fragments)
      if (msg.find(f) == std::string::npos)
        return ::testing::AssertionFailure() << "message \"" << msg << "\" lacks \"" << f << "\"";
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-tg::Error: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

}  // namespace tgt
