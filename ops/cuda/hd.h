#pragma once
// TG_HD marks a function that runs on both sides: compiled by nvcc it is __host__ __device__, by
// the host compiler a plain inline function. The per-element formulas and launch plans the GPU
// kernels share with the CPU are written once, in headers of this folder, and tested on the CPU.
#if defined(__CUDACC__)
#define TG_HD __host__ __device__ __forceinline__
#else
#define TG_HD inline
#endif
