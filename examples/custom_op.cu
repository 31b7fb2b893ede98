// custom_op's forward on a GPU: a plain CUDA kernel over the tensors' device pointers, launched on
// the stream tapegrad queues its own ops on (tg::cuda::stream, an opaque cudaStream_t), so that it
// runs after the ops that made x and before those that read y.
#include <cstdint>

#include <cuda_runtime.h>

namespace {
template <class T>
__global__ void softplus_kernel(const T* x, T* y, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T v = x[i];  // stable: max(x, 0) + log1p(exp(-|x|))
    y[i] = (v > T(0) ? v : T(0)) + log1p(exp(-fabs(v)));
  }
}
template <class T>
void launch(const T* x, T* y, int64_t n, void* stream) {
  const int64_t blocks = (n + 255) / 256;
  softplus_kernel<T><<<static_cast<unsigned>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096), 256, 0,
                       static_cast<cudaStream_t>(stream)>>>(x, y, n);
}
}  // namespace

void softplus_cuda(const float* x, float* y, int64_t n, void* stream) { launch(x, y, n, stream); }
void softplus_cuda(const double* x, double* y, int64_t n, void* stream) { launch(x, y, n, stream); }
