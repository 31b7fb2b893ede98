// The dry runtime's canary: each mistake it must catch, made once on purpose. `./tg.sh dry` runs it
// and fails unless every finding below is reported (so a dry run cannot pass by checking nothing).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

extern "C" void tg_cuda_dry_pointers(const void* const* ptrs, int n);  // (the dry runtime's, for the library)

namespace {
__global__ void fill(float* out, long n, float v) {
  const long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = v;
}

int expect(bool ok, const char* what) {
  std::printf("canary: %s: %s\n", what, ok ? "as expected" : "NOT AS EXPECTED");
  return ok ? 0 : 1;
}
}  // namespace

int main() {
  int bad = 0;
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  float* d = nullptr;
  cudaMalloc(&d, 1024 * sizeof(float));
  std::vector<float> host(2048);

  fill<<<0, 256, 0, s>>>(d, 1024, 1.0f);  // an empty grid
  bad += expect(cudaGetLastError() == cudaErrorInvalidConfiguration, "a launch of 0 blocks");
  fill<<<1, 2048, 0, s>>>(d, 1024, 1.0f);  // more threads than a block may have
  bad += expect(cudaGetLastError() == cudaErrorInvalidConfiguration, "a block of 2048 threads");
  fill<<<1, 32, 64 << 10, s>>>(d, 1024, 1.0f);  // 64 KiB of dynamic shared memory, never allowed
  bad += expect(cudaGetLastError() == cudaErrorInvalidValue, "64 KiB of shared memory unasked for");
  fill<<<4, 256, 0, s>>>(host.data(), 1024, 1.0f);  // a host pointer given to a kernel (reported)
  fill<<<4, 256, 0, nullptr>>>(d, 1024, 1.0f);      // the legacy default stream (reported)
  const void* inside[2] = {d, host.data()};          // a host pointer inside a struct argument (reported)
  tg_cuda_dry_pointers(inside, 2);
  fill<<<4, 256, 0, s>>>(d, 1024, 1.0f);
  bad += expect(cudaMemcpyAsync(host.data(), d, 2048 * sizeof(float), cudaMemcpyDeviceToHost, s) != cudaSuccess,
                "a copy past the end of an allocation");
  cudaGetLastError();
  bad += expect(cudaMemcpyAsync(d, host.data(), 16, cudaMemcpyDeviceToHost, s) != cudaSuccess, "a copy of the wrong kind");
  cudaGetLastError();

  // A capture in thread-local mode (as tapegrad captures): cudaMalloc is refused and invalidates it.
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  fill<<<4, 256, 0, s>>>(d, 1024, 2.0f);
  void* p = nullptr;
  bad += expect(cudaMalloc(&p, 256) == cudaErrorStreamCaptureUnsupported, "cudaMalloc while capturing");
  cudaGraph_t g = nullptr;
  bad += expect(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated, "ending an invalidated capture");
  cudaGetLastError();
  // A graph whose buffer is freed before its launch.
  float* e = nullptr;
  cudaMalloc(&e, 256 * sizeof(float));
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  fill<<<1, 256, 0, s>>>(e, 256, 3.0f);
  cudaStreamEndCapture(s, &g);
  cudaGraphExec_t exec = nullptr;
  cudaGraphInstantiate(&exec, g, 0);
  cudaFree(e);
  bad += expect(cudaGraphLaunch(exec, s) == cudaErrorIllegalAddress, "a graph launched after its buffer was freed");
  cudaGetLastError();

  // cuBLASLt: a product whose shapes disagree; one whose operand runs past its allocation; one whose
  // operand is less aligned than its algorithm was chosen for; an algorithm chosen for other shapes.
  cublasLtHandle_t h = nullptr;
  cublasLtCreate(&h);
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, wide = nullptr;
  cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, 16, 16, 16);
  cublasLtMatrixLayoutCreate(&b, CUDA_R_32F, 8, 16, 8);       // k = 8 against A's 16
  cublasLtMatrixLayoutCreate(&wide, CUDA_R_32F, 16, 65, 16);  // 16 x 65 floats: past d's 1024
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulPreferenceCreate(&pref);
  auto search = [&](cublasLtMatrixLayout_t bl, cublasLtMatrixLayout_t cl) {
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(h, desc, a, bl, cl, cl, pref, 1, &r, &found);
    return r.algo;
  };
  const float one = 1, zero = 0;
  const cublasLtMatmulAlgo_t square = search(a, a), wide_algo = search(wide, wide);
  bad += expect(cublasLtMatmul(h, desc, &one, d, a, d, b, &zero, d, a, d, a, &square, nullptr, 0, s) !=
                    CUBLAS_STATUS_SUCCESS, "a product whose shapes disagree");
  bad += expect(cublasLtMatmul(h, desc, &one, d, a, d, wide, &zero, d, wide, d, wide, &wide_algo, nullptr, 0, s) !=
                    CUBLAS_STATUS_SUCCESS, "a product past its operand's allocation");
  bad += expect(cublasLtMatmul(h, desc, &one, d, a, d + 1, a, &zero, d, a, d, a, &square, nullptr, 0, s) !=
                    CUBLAS_STATUS_SUCCESS, "an operand 4-byte aligned for an algorithm chosen for 256");
  bad += expect(cublasLtMatmul(h, desc, &one, d, a, d, wide, &zero, d, wide, d, wide, &square, nullptr, 0, s) !=
                    CUBLAS_STATUS_SUCCESS, "an algorithm chosen for other shapes");
  bad += expect(cublasLtMatmul(h, desc, &one, d, a, d, a, &zero, d, a, d, a, &square, nullptr, 0, s) ==
                    CUBLAS_STATUS_SUCCESS, "(a right product goes through)");
  cudaFree(d);
  std::printf("canary: %s\n", bad == 0 ? "every mistake refused" : "SOME MISTAKES WENT THROUGH");
  return bad == 0 ? 0 : 1;
}
