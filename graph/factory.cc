#include "graph/factory.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "graph/cuda/runtime.h"
#include "graph/random.h"

namespace tg {
namespace {

// Writes f(i) (a double) into every element, converted to the tensor's dtype.
template <class F>
void fill_with(const Tensor& t, F&& f) {
  int64_t n = t.numel();
  switch (t.dtype()) {
    case DType::kFloat32: { float* p = t.data<float>(); for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(f(i)); break; }
    case DType::kFloat64: { double* p = t.data<double>(); for (int64_t i = 0; i < n; ++i) p[i] = f(i); break; }
    case DType::kInt64: { int64_t* p = t.data<int64_t>(); for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int64_t>(f(i)); break; }
    case DType::kBool: { bool* p = t.data<bool>(); for (int64_t i = 0; i < n; ++i) p[i] = f(i) != 0; break; }
    case DType::kBFloat16: { bfloat16* p = t.data<bfloat16>(); for (int64_t i = 0; i < n; ++i) p[i] = bfloat16(static_cast<float>(f(i))); break; }
  }
}

void check_random_dtype(DType d, const char* op) {
  TG_CHECK(is_floating(d), op, "dtype {} is not supported (expected float32 or float64)", d);
}

}  // namespace

void fill_(const Tensor& t, double value) {
  t.impl().storage->bump_version();  // (a bfloat16 copy or pack made of the old values is stale)
  if (t.is_cuda()) {  // the element's bits, converted on the host, written by one kernel
    Tensor one = Tensor::empty(Shape{}, t.dtype());
    fill_with(one, [value](int64_t) { return value; });
    uint64_t bits = 0;
    std::memcpy(&bits, one.raw_data(), dtype_size(t.dtype()));
    const size_t elem = dtype_size(t.dtype());
    char* dst = static_cast<char*>(t.impl().storage->data()) + t.impl().offset * static_cast<int64_t>(elem);
    cuda_rt::fill_pattern(t.device().index, dst, static_cast<size_t>(t.numel()), static_cast<int>(elem), bits, "fill");
    return;
  }
  fill_with(t, [value](int64_t) { return value; });
}

Tensor empty(const Shape& shape, DType dtype) { return Tensor::empty(shape, dtype); }
Tensor empty(const Shape& shape, DType dtype, Device device) { return Tensor::empty(shape, dtype, device); }

Tensor full(const Shape& shape, double value, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  fill_with(t, [value](int64_t) { return value; });
  return t;
}
Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  if (device.is_cpu()) return full(shape, value, dtype);
  Tensor t = Tensor::empty(shape, dtype, device);
  fill_(t, value);
  return t;
}
Tensor zeros(const Shape& shape, DType dtype) { return full(shape, 0.0, dtype); }
Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }
Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }
Tensor scalar(double value, DType dtype) { return full(Shape{}, value, dtype); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype(), t.device()); }
Tensor full_like(const Tensor& t, double value) { return full(t.shape(), value, t.dtype(), t.device()); }

Tensor arange(double start, double end, double step, DType dtype) {
  TG_CHECK(step != 0, "arange", "step must be non-zero");
  TG_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step), "arange",
           "start, end and step must be finite (got {}, {}, {})", start, end, step);
  double count = std::ceil((end - start) / step);
  int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  Tensor t = Tensor::empty(Shape{n}, dtype);
  fill_with(t, [&](int64_t i) { return start + step * static_cast<double>(i); });
  return t;
}
Tensor arange(int64_t end, DType dtype) { return arange(0.0, static_cast<double>(end), 1.0, dtype); }

Tensor eye(int64_t n, int64_t m, DType dtype) {
  TG_CHECK(n >= 0 && m >= 0, "eye", "sizes must be non-negative (got {} and {})", n, m);
  Tensor t = zeros(Shape{n, m}, dtype);
  fill_with(t, [m](int64_t i) { return (i / m == i % m) ? 1.0 : 0.0; });
  return t;
}
Tensor eye(int64_t n, DType dtype) { return eye(n, n, dtype); }

template <class T>
Tensor from_vector(const std::vector<T>& data, const Shape& shape, DType dtype) {
  TG_CHECK(static_cast<int64_t>(data.size()) == shape.numel(), "from_vector",
           "{} values do not fill shape {} ({} elements)", data.size(), shape, shape.numel());
  Tensor t = Tensor::empty(shape, dtype);
  if constexpr (std::is_integral_v<T>) {
    if (dtype == DType::kInt64) {  // exactly, not through a double (ids past 2^53, 64-bit dropout keys)
      int64_t* p = t.data<int64_t>();
      for (size_t i = 0; i < data.size(); ++i) p[i] = static_cast<int64_t>(data[i]);
      return t;
    }
  }
  fill_with(t, [&](int64_t i) { return static_cast<double>(data[static_cast<size_t>(i)]); });
  return t;
}
template Tensor from_vector<float>(const std::vector<float>&, const Shape&, DType);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, DType);
template Tensor from_vector<int>(const std::vector<int>&, const Shape&, DType);
Tensor from_vector(const std::vector<double>& data, const Shape& shape, DType dtype) {
  return from_vector<double>(data, shape, dtype);
}
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, DType);

Tensor tensor(std::initializer_list<double> values, DType dtype) {
  return from_vector(std::vector<double>(values), Shape{static_cast<int64_t>(values.size())}, dtype);
}
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, DType dtype) {
  std::vector<double> flat;
  size_t cols = rows.size() ? rows.begin()->size() : 0;
  for (const auto& r : rows) {
    TG_CHECK(r.size() == cols, "tensor", "ragged rows: expected {} values in every row, got {}", cols, r.size());
    flat.insert(flat.end(), r.begin(), r.end());
  }
  return from_vector(flat, Shape{static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols)}, dtype);
}
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<double>>> mats, DType dtype) {
  std::vector<double> flat;
  size_t rows = mats.size() ? mats.begin()->size() : 0;
  size_t cols = rows ? mats.begin()->begin()->size() : 0;
  for (const auto& m : mats) {
    TG_CHECK(m.size() == rows, "tensor", "ragged matrices: expected {} rows in every matrix, got {}", rows, m.size());
    for (const auto& r : m) {
      TG_CHECK(r.size() == cols, "tensor", "ragged rows: expected {} values in every row, got {}", cols, r.size());
      flat.insert(flat.end(), r.begin(), r.end());
    }
  }
  return from_vector(flat, Shape{static_cast<int64_t>(mats.size()), static_cast<int64_t>(rows),
                                 static_cast<int64_t>(cols)}, dtype);
}

Tensor uniform(const Shape& shape, double low, double high, DType dtype) {
  check_random_dtype(dtype, "uniform");
  TG_CHECK(low <= high, "uniform", "low ({}) must not exceed high ({})", low, high);
  Tensor t = Tensor::empty(shape, dtype);
  Generator& g = default_generator();
  fill_with(t, [&](int64_t) { return low + (high - low) * g.uniform(); });
  return t;
}
Tensor rand(const Shape& shape, DType dtype) { return uniform(shape, 0.0, 1.0, dtype); }
Tensor normal(const Shape& shape, double mean, double stddev, DType dtype) {
  check_random_dtype(dtype, "normal");
  TG_CHECK(stddev >= 0, "normal", "stddev must be non-negative (got {})", stddev);
  Tensor t = Tensor::empty(shape, dtype);
  Generator& g = default_generator();
  fill_with(t, [&](int64_t) { return mean + stddev * g.normal(); });
  return t;
}
Tensor randn(const Shape& shape, DType dtype) { return normal(shape, 0.0, 1.0, dtype); }
Tensor randint(int64_t low, int64_t high, const Shape& shape) {
  TG_CHECK(low < high, "randint", "low ({}) must be below high ({})", low, high);
  Tensor t = Tensor::empty(shape, kInt64);
  Generator& g = default_generator();
  uint64_t range = static_cast<uint64_t>(high - low);
  int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = low + static_cast<int64_t>(g.next_u64() % range);
  return t;
}

}  // namespace tg
