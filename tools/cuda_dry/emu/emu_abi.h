#pragma once
// What the CUDA emulator's kernels (emu.h, compiled into tapegrad) and its runtime (cuda_dry.cc
// built with TG_CUDA_EMU) share.
#include <cstddef>
#include <cstdint>
#include <functional>

#include <cuda_runtime_api.h>

// The running CUDA thread's coordinates (the runtime sets them at each switch between threads).
struct TgEmuNow {
  uint3 thread;
  uint3 block;
  dim3 block_dim;
  dim3 grid_dim;
  char* dynamic_shared;  // the block's dynamic shared memory
  unsigned lane;         // threadIdx's linear index % 32
};

extern "C" {
extern TgEmuNow tg_emu_now;
// Queues a kernel (body: one CUDA thread's work) on the stream, or into the graph it captures; the
// runtime owns body from here.
// pointers: the launch's pointer parameters (positions: 1-based), checked as the dry run checks them.
void tg_emu_launch(const void* kernel, const char* name, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                   std::function<void()>* body, const void* const* pointers, const int* positions, int n_pointers);
// Queues host work standing for a library's kernels (CUB's sort) the same way.
void tg_emu_enqueue(const char* name, cudaStream_t stream, std::function<void()>* work);
void tg_emu_block_barrier();  // __syncthreads
int tg_emu_block_or(int v);   // __syncthreads_or
// A warp collective: hands the lane's n (<= 16) words to the warp and waits for its 32 lanes; returns
// every lane's words (lane l's at [16 l]), valid until this lane's next collective.
const uint64_t* tg_emu_warp_exchange(const uint64_t* words, int n);
[[noreturn]] void tg_emu_trap(const char* what);
}
