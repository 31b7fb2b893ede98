// The emulator's memory check, made to fire on purpose: a kernel that writes one element past the
// end of its buffer (`global`), or past its dynamic shared memory (`shared`). Each run must die
// with the emulator's one line naming the kernel, the thread and what it overran;
// tests/gpu/dry_run.sh --emu runs both (so the check cannot pass by checking nothing).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

namespace {
__global__ void write_all(float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) out[i] = 1.0f;  // (the mistake: <= n)
}

__global__ void stage_in_shared(const float* in, float* out, int n) {
  extern __shared__ float tile[];
  const int i = threadIdx.x;
  tile[i + 1] = in[i];  // (the mistake: the last thread writes one past the tile)
  __syncthreads();
  if (i < n) out[i] = tile[i];
}
}  // namespace

int main(int argc, char** argv) {
  const bool shared = argc > 1 && std::strcmp(argv[1], "shared") == 0;
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  constexpr int n = 1000;  // (a multiple of 4 elements: the overrun is past the 16-byte-rounded end)
  float *in = nullptr, *out = nullptr;
  cudaMalloc(&in, n * sizeof(float));
  cudaMalloc(&out, n * sizeof(float));
  if (shared) {
    stage_in_shared<<<1, 256, 256 * sizeof(float), s>>>(in, out, 256);
  } else {
    write_all<<<(n + 255) / 256, 256, 0, s>>>(out, n);
  }
  cudaStreamSynchronize(s);
  std::printf("memcheck canary: the %s overrun went unnoticed\n", shared ? "shared-memory" : "global-memory");
  return 0;
}
