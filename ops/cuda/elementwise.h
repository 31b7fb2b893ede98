#pragma once
// The elementwise GPU kernels' entry points (elementwise.cu; elementwise_none.cc in a build
// without CUDA). Plain arguments: device pointers, sizes, a StridedPlan, element types as codes.
// ops/elementwise.cc calls them where its output is on a GPU; they know nothing of tensors.
#include <cstdint>

#include "math.h"
#include "strided.h"

namespace tg::cuda_ops {

// Element types, numbered as tg::DType (graph/shape.h; ops/elementwise.cc checks the numbering).
enum class Scalar : uint8_t { kF32 = 0, kF64 = 1, kI64 = 2, kBool = 3, kBF16 = 4 };

// out[i] = f(x[i]) over n contiguous float32 or float64 elements; a, b: the op's parameters.
struct UnaryArgs {
  int device = 0;
  const char* op = "";
  math::Unary f = math::Unary::kAffine;
  Scalar type = Scalar::kF32;
  const void* x = nullptr;
  void* out = nullptr;
  int64_t n = 0;
  double a = 0, b = 0;
};
void unary(const UnaryArgs& args);

// out = f(in[0], in[1]) with broadcasting (plan.n_in == 2), float32 or float64.
struct BinaryArgs {
  int device = 0;
  const char* op = "";
  math::Binary f = math::Binary::kAdd;
  Scalar type = Scalar::kF32;
  StridedPlan plan;
  const void* in[2] = {nullptr, nullptr};
  void* out = nullptr;
};
void binary(const BinaryArgs& args);

// Bool out = f(in[0], in[1]) with broadcasting; inputs of one type: float32, float64, int64 or bool.
struct CompareArgs {
  int device = 0;
  const char* op = "";
  math::Compare f = math::Compare::kEq;
  Scalar type = Scalar::kF32;
  StridedPlan plan;
  const void* in[2] = {nullptr, nullptr};
  bool* out = nullptr;
};
void compare(const CompareArgs& args);

// out[i] = !x[i] over n bools.
void logical_not(int device, const char* op, const bool* x, bool* out, int64_t n);

// out = converted x, any types (n contiguous elements): to float via float32 for bfloat16, to bool
// as x != 0, to int64 truncating (as static_cast).
struct CastArgs {
  int device = 0;
  const char* op = "";
  Scalar from = Scalar::kF32, to = Scalar::kF32;
  const void* x = nullptr;
  void* out = nullptr;
  int64_t n = 0;
};
void cast(const CastArgs& args);

// out = cond ? a : b with broadcasting (plan.n_in == 3: cond, a, b); where b_scalar is set, the
// plan has two inputs (cond, a) and b is that value — masked_fill(x, m, v) is where(m, v, x) with
// `swap` set: out = cond ? value : a.
struct WhereArgs {
  int device = 0;
  const char* op = "";
  Scalar type = Scalar::kF32;
  StridedPlan plan;
  const bool* cond = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;
  bool scalar = false;  // masked_fill: out = cond ? value : a
  double value = 0;
  void* out = nullptr;
};
void where(const WhereArgs& args);

}  // namespace tg::cuda_ops
