#include "graph/shape.h"

#include "graph/error.h"

namespace tg {

size_t dtype_size(DType d) {
  switch (d) {
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kInt64: return 8;
    case DType::kBool: return 1;
    case DType::kBFloat16: return 2;
  }
  return 0;
}

const char* dtype_name(DType d) {
  switch (d) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt64: return "int64";
    case DType::kBool: return "bool";
    case DType::kBFloat16: return "bfloat16";
  }
  return "?";
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : *this) n *= d;
  return n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (size_t i = 0; i < size(); ++i) {
    if (i) s += ", ";
    s += std::to_string((*this)[i]);
  }
  return s + "]";
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (int64_t i = s.rank() - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

int64_t normalize_axis(int64_t axis, int64_t rank, const char* op) {
  int64_t r = rank == 0 ? 1 : rank;
  TG_CHECK(axis >= -r && axis < r, op, "dimension {} is out of range for a tensor of rank {} (expected {} to {})",
           axis, rank, -r, r - 1);
  return axis < 0 ? axis + r : axis;
}

}  // namespace tg
