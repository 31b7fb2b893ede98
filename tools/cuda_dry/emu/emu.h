#pragma once
// The CUDA emulator's device side: what a .cu file of tapegrad needs to be compiled by the host
// compiler and run on the CPU (a check build, -DTG_CUDA_EMU=ON; `./tg.sh emu`). Each .cu file is
// first rewritten by rewrite.py (launches `k<<<grid, block, smem, stream>>>(args)` become
// `::tg_emu::Launch(grid, block, smem, stream).run("k", k, args)`; `extern __shared__` arrays point
// into the block's dynamic shared memory), then compiled as C++ with this header included first.
//
// Every CUDA thread of a block runs as a fiber of the launching host thread (cuda_dry.cc's
// executor): __syncthreads and the warp collectives (shuffles, __syncwarp, and the tensor-core
// instructions of emu/cuda_emu_mma.h) switch to the next thread until all threads of the block (of
// the warp) are there. __shared__ variables are static (one block runs at a time, all launches
// under one lock); dynamic shared memory is refilled with 0xff bytes for each block, so a read of
// shared memory nobody wrote shows as NaN. Kernels run in the order the host queued them, at the
// launch (or at each replay of a captured graph).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include <cuda_runtime.h>

// (after cuda_runtime.h, whose own host declarations use these)
#undef __shared__
#undef __global__
#undef __device__
#define __shared__ static
#define __global__
#define __device__
#define __launch_bounds__(...)

#include "emu_abi.h"

#define threadIdx (::tg_emu_now.thread)
#define blockIdx (::tg_emu_now.block)
#define blockDim (::tg_emu_now.block_dim)
#define gridDim (::tg_emu_now.grid_dim)

namespace tg_emu {

// A launch's configuration; run() queues the grid on the stream (or into the graph it captures).
struct Launch {
  dim3 grid, block;
  size_t smem = 0;
  cudaStream_t stream = nullptr;
  Launch(dim3 g, dim3 b, size_t s = 0, cudaStream_t st = nullptr) : grid(g), block(b), smem(s), stream(st) {}
  template <class... P, class... A>
  void run(const char* name, void (*kernel)(P...), A&&... args) const {
    static_assert(sizeof...(P) == sizeof...(A), "a kernel launch with the wrong number of arguments");
    // The arguments converted to the parameters' types now, as a launch copies them.
    std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
    const void* pointers[sizeof...(P) + 1];
    int positions[sizeof...(P) + 1];
    int n = 0;
    note_pointers(params, pointers, positions, n, std::index_sequence_for<P...>{});
    auto body = new std::function<void()>([kernel, params] { std::apply(kernel, params); });
    tg_emu_launch(reinterpret_cast<const void*>(kernel), name, grid, block, smem, stream, body, pointers, positions, n);
  }

 private:
  // The pointer parameters but `const char*` (an op's name, kept for a message, never dereferenced).
  template <class Tuple, size_t... I>
  static void note_pointers(const Tuple& t, const void** pointers, int* positions, int& n, std::index_sequence<I...>) {
    (
        [&] {
          using T = std::tuple_element_t<I, Tuple>;
          if constexpr (std::is_pointer_v<T> && !std::is_same_v<T, const char*>) {
            pointers[n] = static_cast<const void*>(std::get<I>(t));
            positions[n++] = static_cast<int>(I) + 1;
          }
        }(),
        ...);
  }
};

}  // namespace tg_emu

// cuda_runtime.h's typed form (declared only for nvcc).
template <class... P>
inline cudaError_t cudaFuncSetAttribute(void (*kernel)(P...), cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}

// ---- Device functions -------------------------------------------------------------------------------
inline void __syncthreads() { tg_emu_block_barrier(); }
inline int __syncthreads_or(int v) { return tg_emu_block_or(v); }
inline void __syncwarp(unsigned = 0xffffffffu) { tg_emu_warp_exchange(nullptr, 0); }
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int lane_mask, int width = 32) {
  static_assert(sizeof(T) <= 8, "a shuffle of more than 8 bytes");
  uint64_t w = 0;
  std::memcpy(&w, &v, sizeof(T));
  const uint64_t* all = tg_emu_warp_exchange(&w, 1);
  const unsigned lane = tg_emu_now.lane;
  unsigned src = lane ^ static_cast<unsigned>(lane_mask);
  if (src / width != lane / width) src = lane;  // (outside the lane's segment: its own value)
  T r;
  std::memcpy(&r, &all[src * 16], sizeof(T));
  return r;
}
inline void __threadfence() {}
inline void __threadfence_system() {}
[[noreturn]] inline void __trap() { tg_emu_trap("__trap() in a kernel"); }
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
// An addition rounded on its own: the empty asm hides where the operands came from, so the host
// compiler cannot merge a product before it into a fused multiply-add (as nvcc does not either).
inline float __fadd_rn(float a, float b) {
  asm("" : "+x"(a), "+x"(b));
  return a + b;
}
inline double __dadd_rn(double a, double b) {
  asm("" : "+x"(a), "+x"(b));
  return a + b;
}
template <class T>
inline T atomicCAS(T* p, T expected, T desired) {  // (one fiber runs at a time: no race)
  const T old = *p;
  if (old == expected) *p = desired;
  return old;
}
template <class T>
inline T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
