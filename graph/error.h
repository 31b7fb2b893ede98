#pragma once
// tg::Error and the one checking macro used everywhere.
//
//   TG_CHECK(a.dim() == 2, "matmul", "expected a 2-D tensor, got shape {}", a.shape());
// throws tg::Error("matmul: expected a 2-D tensor, got shape [3]").
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/core.h>

namespace tg {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <class... Args>
[[noreturn]] void fail(std::string_view op, fmt::format_string<Args...> f, Args&&... args) {
  std::string msg(op);
  msg += ": ";
  msg += fmt::format(f, std::forward<Args>(args)...);
  throw Error(msg);
}
}  // namespace detail

}  // namespace tg

#define TG_CHECK(cond, op, ...)                                 \
  do {                                                          \
    if (!(cond)) [[unlikely]] ::tg::detail::fail(op, __VA_ARGS__); \
  } while (0)
