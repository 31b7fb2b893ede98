// The elementwise GPU kernels: one grid-stride loop per family, the op chosen by a code that is
// the same for every thread (math.h's formulas, shared with the CPU tests). Broadcasting reads
// inputs through a StridedPlan; same-shape inputs take the flat path.
#include <cstdint>

#include <type_traits>

#include "ops/cuda/elementwise.h"
#include "ops/cuda/launch.cuh"

namespace tg::cuda_ops {
namespace {

// ---- Element access: bfloat16 is stored as its 16 bits, read and written through float32 --------
template <class T> struct Storage { using type = T; };
struct BF16 {};
template <> struct Storage<BF16> { using type = uint16_t; };

template <class T> __device__ __forceinline__ double load_as_double(const typename Storage<T>::type* p, int64_t i) {
  return static_cast<double>(p[i]);
}
template <> __device__ __forceinline__ double load_as_double<BF16>(const uint16_t* p, int64_t i) {
  return math::bf16_to_float(p[i]);
}
template <> __device__ __forceinline__ double load_as_double<bool>(const bool* p, int64_t i) { return p[i] ? 1.0 : 0.0; }

// ---- Kernels -------------------------------------------------------------------------------------
template <class T>
__global__ void unary_kernel(math::Unary f, const T* x, T* y, int64_t n, T a, T b) {
  TG_GRID_LOOP(i, n) y[i] = math::unary<T>(f, x[i], a, b);
}

template <class T>
__global__ void binary_kernel(math::Binary f, StridedPlan p, const T* a, const T* b, T* out) {
  TG_GRID_LOOP(i, p.numel) {
    int64_t off[StridedPlan::kMaxInputs];
    plan_offsets(p, i, off);
    out[i] = math::binary<T>(f, a[off[0]], b[off[1]]);
  }
}

template <class T>
__global__ void compare_kernel(math::Compare f, StridedPlan p, const T* a, const T* b, bool* out) {
  TG_GRID_LOOP(i, p.numel) {
    int64_t off[StridedPlan::kMaxInputs];
    plan_offsets(p, i, off);
    out[i] = math::compare<T>(f, a[off[0]], b[off[1]]);
  }
}

__global__ void not_kernel(const bool* x, bool* y, int64_t n) {
  TG_GRID_LOOP(i, n) y[i] = !x[i];
}

// Casts: to bool as x != 0; to bfloat16 through float32 (rounded once, as the CPU does); float to
// int64 truncates as static_cast does.
template <class From, class To>
__global__ void cast_kernel(const typename Storage<From>::type* x, typename Storage<To>::type* y, int64_t n) {
  TG_GRID_LOOP(i, n) {
    if constexpr (std::is_same_v<To, BF16>) {
      if constexpr (std::is_same_v<From, double>) y[i] = math::float_to_bf16(static_cast<float>(x[i]));
      else y[i] = math::float_to_bf16(static_cast<float>(load_as_double<From>(x, i)));
    } else if constexpr (std::is_same_v<To, bool>) {
      if constexpr (std::is_same_v<From, BF16>) y[i] = math::bf16_to_float(x[i]) != 0.0f;
      else y[i] = x[i] != typename Storage<From>::type(0);
    } else if constexpr (std::is_same_v<From, BF16>) {
      y[i] = static_cast<To>(math::bf16_to_float(x[i]));
    } else {
      y[i] = static_cast<To>(x[i]);
    }
  }
}

template <class T>
__global__ void where_kernel(StridedPlan p, const bool* cond, const T* a, const T* b, T* out) {
  TG_GRID_LOOP(i, p.numel) {
    int64_t off[StridedPlan::kMaxInputs];
    plan_offsets(p, i, off);
    out[i] = cond[off[0]] ? a[off[1]] : b[off[2]];
  }
}

template <class T>
__global__ void masked_fill_kernel(StridedPlan p, const bool* mask, const T* x, T value, T* out) {
  TG_GRID_LOOP(i, p.numel) {
    int64_t off[StridedPlan::kMaxInputs];
    plan_offsets(p, i, off);
    out[i] = mask[off[0]] ? value : x[off[1]];
  }
}

// ---- Dispatch on the element type ------------------------------------------------------------------
template <class F>
void float_types(Scalar t, F&& f) {
  if (t == Scalar::kF64) f(double{});
  else f(float{});
}
template <class F>
void all_types(Scalar t, F&& f) {
  switch (t) {
    case Scalar::kF32: f(float{}); break;
    case Scalar::kF64: f(double{}); break;
    case Scalar::kI64: f(int64_t{}); break;
    case Scalar::kBool: f(bool{}); break;
    case Scalar::kBF16: f(BF16{}); break;
  }
}

}  // namespace

void unary(const UnaryArgs& a) {
  if (a.n == 0) return;
  cudaStream_t s = stream_of(a.device);
  float_types(a.type, [&](auto tag) {
    using T = decltype(tag);
    unary_kernel<T><<<blocks_for(a.n), kThreads, 0, s>>>(a.f, static_cast<const T*>(a.x), static_cast<T*>(a.out), a.n,
                                                         static_cast<T>(a.a), static_cast<T>(a.b)), cuda_rt::count_launch();
  });
  cuda_rt::after_launch(a.device, a.op);
}

void binary(const BinaryArgs& a) {
  if (a.plan.numel == 0) return;
  cudaStream_t s = stream_of(a.device);
  float_types(a.type, [&](auto tag) {
    using T = decltype(tag);
    binary_kernel<T><<<blocks_for(a.plan.numel), kThreads, 0, s>>>(a.f, a.plan, static_cast<const T*>(a.in[0]),
                                                                   static_cast<const T*>(a.in[1]), static_cast<T*>(a.out)), cuda_rt::count_launch();
  });
  cuda_rt::after_launch(a.device, a.op);
}

void compare(const CompareArgs& a) {
  if (a.plan.numel == 0) return;
  cudaStream_t s = stream_of(a.device);
  all_types(a.type, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, BF16>) {
      return;  // compared as float32 (ops/elementwise.cc converts first)
    } else {
      compare_kernel<T><<<blocks_for(a.plan.numel), kThreads, 0, s>>>(a.f, a.plan, static_cast<const T*>(a.in[0]),
                                                                      static_cast<const T*>(a.in[1]), a.out), cuda_rt::count_launch();
    }
  });
  cuda_rt::after_launch(a.device, a.op);
}

void logical_not(int device, const char* op, const bool* x, bool* out, int64_t n) {
  if (n == 0) return;
  not_kernel<<<blocks_for(n), kThreads, 0, stream_of(device)>>>(x, out, n), cuda_rt::count_launch();
  cuda_rt::after_launch(device, op);
}

void cast(const CastArgs& a) {
  if (a.n == 0) return;
  cudaStream_t s = stream_of(a.device);
  all_types(a.from, [&](auto from) {
    all_types(a.to, [&](auto to) {
      using From = decltype(from);
      using To = decltype(to);
      cast_kernel<From, To><<<blocks_for(a.n), kThreads, 0, s>>>(
          static_cast<const typename Storage<From>::type*>(a.x), static_cast<typename Storage<To>::type*>(a.out), a.n), cuda_rt::count_launch();
    });
  });
  cuda_rt::after_launch(a.device, a.op);
}

void where(const WhereArgs& a) {
  if (a.plan.numel == 0) return;
  cudaStream_t s = stream_of(a.device);
  float_types(a.type, [&](auto tag) {
    using T = decltype(tag);
    if (a.scalar) {
      masked_fill_kernel<T><<<blocks_for(a.plan.numel), kThreads, 0, s>>>(a.plan, a.cond, static_cast<const T*>(a.a),
                                                                          static_cast<T>(a.value), static_cast<T*>(a.out)), cuda_rt::count_launch();
    } else {
      where_kernel<T><<<blocks_for(a.plan.numel), kThreads, 0, s>>>(a.plan, a.cond, static_cast<const T*>(a.a),
                                                                    static_cast<const T*>(a.b), static_cast<T*>(a.out)), cuda_rt::count_launch();
    }
  });
  cuda_rt::after_launch(a.device, a.op);
}

}  // namespace tg::cuda_ops
