// Filling a GPU buffer with one element's bits (zeros, ones, full on a GPU).
#include <cstdint>

#include <cuda_runtime.h>

#include "graph/cuda/runtime.h"

namespace tg::cuda_rt {
namespace {

template <class T>
__global__ void fill_kernel(T* dst, size_t count, T value) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) dst[i] = value;
}

template <class T>
void launch(void* dst, size_t count, uint64_t bits, cudaStream_t s) {
  constexpr unsigned kThreads = 256;
  const size_t blocks = (count + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(blocks < 4096 ? blocks : 4096);
  fill_kernel<T><<<grid, kThreads, 0, s>>>(static_cast<T*>(dst), count, static_cast<T>(bits)), cuda_rt::count_launch();
}

struct Values {
  uint64_t v[kValuesALaunch];
};
static_assert(sizeof(Values) + 64 <= 32764, "a launch's parameters must fit CUDA's 32,764 bytes");

__global__ void write_values_kernel(uint64_t* dst, size_t count, __grid_constant__ const Values values) {
  for (size_t i = threadIdx.x; i < count; i += blockDim.x) dst[i] = values.v[i];
}

}  // namespace

void write_values(int device, uint64_t* dst, const uint64_t* values, size_t count, const char* op) {
  if (count == 0) return;
  if (count > kValuesALaunch) count = kValuesALaunch;  // (callers split larger sets)
  Values v;
  for (size_t i = 0; i < count; ++i) v.v[i] = values[i];
  write_values_kernel<<<1, 256, 0, static_cast<cudaStream_t>(stream(device))>>>(dst, count, v), cuda_rt::count_launch();
  after_launch(device, op);
}

void fill_pattern(int device, void* dst, size_t count, int elem_bytes, uint64_t bits, const char* op) {
  if (count == 0) return;
  cudaStream_t s = static_cast<cudaStream_t>(stream(device));
  switch (elem_bytes) {
    case 1: launch<uint8_t>(dst, count, bits, s); break;
    case 2: launch<uint16_t>(dst, count, bits, s); break;
    case 4: launch<uint32_t>(dst, count, bits, s); break;
    default: launch<uint64_t>(dst, count, bits, s); break;
  }
  after_launch(device, op);
}

}  // namespace tg::cuda_rt
