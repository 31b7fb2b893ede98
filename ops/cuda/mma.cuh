#pragma once
// The device side of the tensor-core kernels (attention_tc.cu, attention_tc_bwd.cu): asynchronous
// copies into shared memory, ldmatrix, mma.sync m16n8k16 in bfloat16 with float32 sums, and the
// shuffles over the four lanes that share an accumulator row. Where each lane's data sits is
// mma_layout.h (tested on the CPU).
#include <cstdint>

#include "ops/cuda/mma_layout.h"

// The instructions below need sm_80 (Ampere) or newer; tapegrad refuses older cards at first use,
// and a build for one (CMAKE_CUDA_ARCHITECTURES=75) still compiles, trapping there instead.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define TG_SM80_ASM(...) __trap()
#define TG_SM80_MATH(...) __trap()
#else
#define TG_SM80_ASM(...) asm volatile(__VA_ARGS__)
#define TG_SM80_MATH(...) asm(__VA_ARGS__)  // (no side effect: the compiler may schedule it)
#endif

#if defined(TG_CUDA_EMU)  // a check build: these instructions emulated on the CPU (tools/cuda_dry/emu)
#include "tools/cuda_dry/emu/include/cuda_emu_mma.h"
#endif

namespace tg::cuda_ops::mma {

#if !defined(TG_CUDA_EMU)
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronously; zeros instead when !valid (src is then not read).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  TG_SM80_ASM("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
// 4 bytes global -> shared, asynchronously; zeros instead when !valid.
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
  TG_SM80_ASM("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { TG_SM80_ASM("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  TG_SM80_ASM("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Four 8x8 bf16 matrices: lanes 8i..8i+7 give the row addresses of matrix i; register i holds
// matrix i's row lane/4, elements 2(lane%4) and +1 (with .trans: its column lane/4, rows 2(lane%4), +1).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  TG_SM80_ASM("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  TG_SM80_ASM("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}

// c (16x8, float32) += a (16x16, bf16, row-major) * b (16x8, bf16, column-major). Lane l = 4g + t
// holds c's rows g and g + 8, columns 2t and 2t + 1 (c[0], c[1]: row g; c[2], c[3]: row g + 8).
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  TG_SM80_MATH("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats rounded to bfloat16 (to nearest, ties to even), lo in the low half.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  uint32_t r = 0;
  TG_SM80_MATH("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

#endif  // !TG_CUDA_EMU

// A double buffer's step, for the whole block: queue the next tile's copies (load(), when `more`)
// and wait until the current tile's have landed and every thread sees them.
template <class Load>
__device__ __forceinline__ void next_tile_and_wait(bool more, Load load) {
  if (more) {
    load();
    cp_async_commit();
    cp_async_wait<1>();
  } else {
    cp_async_wait<0>();
  }
  __syncthreads();
}

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// A bool mask's offset for head n (its coordinates in `lead`, the mask's strides over them).
__device__ __forceinline__ int64_t mask_base(int64_t n, int lead_rank, const int64_t* lead, const int64_t* stride) {
  int64_t base = 0;
  for (int r = lead_rank - 1; r >= 0; --r) {
    base += (n % lead[r]) * stride[r];
    n /= lead[r];
  }
  return base;
}

}  // namespace tg::cuda_ops::mma
