#pragma once
// DType and Shape: the two small value types every tensor carries.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <fmt/core.h>

#include "bfloat16.h"
#include "small_vector.h"

namespace tg {

// BFloat16 is a storage and matrix-product type (tg/graph/bfloat16.h): to, copies, printing,
// comparisons, add/sub/mul/div, embedding and matmul/linear take it; every other op refuses it
// naming itself. Under tg::AutocastGuard float32 models compute their products in it.
enum class DType : uint8_t {
  kFloat32,
  kFloat64,
  kInt64,
  kBool,
  kBFloat16,
  Float32 [[deprecated("use kFloat32")]] = kFloat32,  // the names before 0.2, kept for one release
  Float64 [[deprecated("use kFloat64")]] = kFloat64,
  Int64 [[deprecated("use kInt64")]] = kInt64,
  Bool [[deprecated("use kBool")]] = kBool,
  BFloat16 [[deprecated("use kBFloat16")]] = kBFloat16,
};
inline constexpr DType kFloat32 = DType::kFloat32;
inline constexpr DType kFloat64 = DType::kFloat64;
inline constexpr DType kInt64 = DType::kInt64;
inline constexpr DType kBool = DType::kBool;
inline constexpr DType kBFloat16 = DType::kBFloat16;

size_t dtype_size(DType d);
const char* dtype_name(DType d);
inline bool is_floating(DType d) { return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kBFloat16; }

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::kFloat32; }
template <> constexpr DType dtype_of<double>() { return DType::kFloat64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::kInt64; }
template <> constexpr DType dtype_of<bool>() { return DType::kBool; }
template <> constexpr DType dtype_of<bfloat16>() { return DType::kBFloat16; }

// Dimensions of a tensor, outermost first. Rank 0 (empty) is a scalar.
class Shape : public SmallVector<int64_t, 6> {
 public:
  using Base = SmallVector<int64_t, 6>;
  using Base::Base;
  Shape(std::initializer_list<int64_t> dims) : Base(dims) {}
  int64_t numel() const;
  int64_t rank() const { return static_cast<int64_t>(size()); }
  std::string str() const;  // "[2, 3]"
};

// Row-major (C-order) strides in elements.
Shape contiguous_strides(const Shape& s);
// Turns a possibly negative axis into [0, rank); throws naming `op` when out of range.
int64_t normalize_axis(int64_t axis, int64_t rank, const char* op);

}  // namespace tg

namespace tg::detail {
// fmt support for our types through their string form, with the usual string specs ("{:>12}"),
// that needs only <fmt/core.h> (<fmt/format.h> would double a user's compile time).
struct StringFormatter {
  char spec[32] = "{:";  // "{:" + the spec + "}", for fmt::runtime
  constexpr auto parse(fmt::format_parse_context& ctx) {
    auto it = ctx.begin();
    size_t n = 2;
    for (; it != ctx.end() && *it != '}'; ++it) {
      if (n + 2 >= sizeof spec) ctx.on_error("format spec too long");
      spec[n++] = *it;
    }
    spec[n++] = '}';
    spec[n] = '\0';
    return it;
  }
  template <class Ctx>
  auto write(std::string_view s, Ctx& ctx) const {
    return fmt::format_to(ctx.out(), fmt::runtime(spec), s);
  }
};
}  // namespace tg::detail

template <>
struct fmt::formatter<tg::Shape> : tg::detail::StringFormatter {
  template <class Ctx>
  auto format(const tg::Shape& s, Ctx& ctx) const { return write(s.str(), ctx); }
};
template <>
struct fmt::formatter<tg::DType> : tg::detail::StringFormatter {
  template <class Ctx>
  auto format(tg::DType d, Ctx& ctx) const { return write(tg::dtype_name(d), ctx); }
};
