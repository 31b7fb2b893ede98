#pragma once
// Tensor factories: constants, ranges, literals and random tensors (seeded by tg::manual_seed).
// The constants take a device; *_like follow their input's device and dtype. Ranges, literals and
// random tensors are made on the CPU (so a seed gives the same numbers everywhere): .to(device).
#include <initializer_list>
#include <vector>

#include "tensor.h"

namespace tg {

Tensor empty(const Shape& shape, DType dtype = kFloat32);  // uninitialised
Tensor zeros(const Shape& shape, DType dtype = kFloat32);
Tensor ones(const Shape& shape, DType dtype = kFloat32);
Tensor full(const Shape& shape, double value, DType dtype = kFloat32);
Tensor empty(const Shape& shape, DType dtype, Device device);
Tensor zeros(const Shape& shape, DType dtype, Device device);
Tensor ones(const Shape& shape, DType dtype, Device device);
Tensor full(const Shape& shape, double value, DType dtype, Device device);
Tensor scalar(double value, DType dtype = kFloat32);  // rank 0
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
// [start, end) in steps of step, like torch.arange.
Tensor arange(double start, double end, double step = 1, DType dtype = kFloat32);
Tensor arange(int64_t end, DType dtype = kInt64);
Tensor eye(int64_t n, DType dtype = kFloat32);
Tensor eye(int64_t n, int64_t m, DType dtype = kFloat32);

// From a flat vector and a shape (the shape's element count must match).
template <class T> Tensor from_vector(const std::vector<T>& data, const Shape& shape, DType dtype = dtype_of<T>());
Tensor from_vector(const std::vector<double>& data, const Shape& shape, DType dtype = kFloat32);
// Literals: tensor({1, 2, 3}), tensor({{1, 2}, {3, 4}}, kFloat64).
Tensor tensor(std::initializer_list<double> values, DType dtype = kFloat32);
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, DType dtype = kFloat32);
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<double>>> mats, DType dtype = kFloat32);

Tensor rand(const Shape& shape, DType dtype = kFloat32);                  // U[0, 1)
Tensor randn(const Shape& shape, DType dtype = kFloat32);                 // N(0, 1)
Tensor uniform(const Shape& shape, double low, double high, DType dtype = kFloat32);
Tensor normal(const Shape& shape, double mean, double stddev, DType dtype = kFloat32);
Tensor randint(int64_t low, int64_t high, const Shape& shape);            // int64 in [low, high)

// Fills an existing tensor in place (used by initialisers), on its device.
void fill_(const Tensor& t, double value);

}  // namespace tg
