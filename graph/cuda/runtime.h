#pragma once
// The CUDA runtime as the library uses it: plain functions, no CUDA header (graph/cuda/runtime.cc
// holds every cudart call; graph/cuda/runtime_none.cc is the same surface in a build without CUDA,
// where each call that needs a GPU throws "built without CUDA"). Not a public header.
//
// Every call names the op it serves, so that a failure reads "softmax: cuda:0: ...". After a
// sticky error (an illegal address, a launch failure) the device is unusable until the process
// ends: every later call refuses with one line naming the first error and the op that launched it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tg::cuda_rt {

bool built();
// Usable devices, or 0 with *why saying why (no driver, none found, built without CUDA...).
int device_count(std::string* why);
// Makes `device` current on this thread, creating its context and stream on first use. Throws one
// line naming op when the device does not exist, or has no code in this build (compute capability
// below 8.0, or an architecture the build left out: names CMAKE_CUDA_ARCHITECTURES to use).
void use_device(int device, const char* op);

// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)"; throws like use_device.
std::string describe(int device);

void* malloc(int device, size_t bytes, const char* op);  // nullptr when out of memory
void free(int device, void* p);
void mem_info(int device, size_t* free_bytes, size_t* total_bytes);

// Copies, queued on the device's stream; those to the host wait for the stream.
void copy_to_device(int device, void* dst, const void* src, size_t bytes, const char* op);
void copy_to_host(int device, void* dst, const void* src, size_t bytes, const char* op);
void copy_on_device(int device, void* dst, const void* src, size_t bytes, const char* op);
void fill_bytes(int device, void* dst, size_t bytes, int value, const char* op);  // memset
// The allocator's poisoning (0xFF bytes, TG_CUDA_POISON): a memset not counted by launches(), so that
// a test's "the op launched a kernel" cannot be met by the poisoning of its output.
void poison_bytes(int device, void* dst, size_t bytes, const char* op);

void synchronize(int device, const char* op);
void* stream(int device);
// Counts one kernel (or copy, fill, cuBLASLt call) queued: each launch site calls it right after
// its launch, so an op of several kernels counts each (tg::cuda::kernel_launches()).
void count_launch();
// After an op's launches: checks cudaGetLastError, and in sync-debug mode waits for the kernels.
// Throws one line naming op on failure.
void after_launch(int device, const char* op);
// A cudaError_t (as an int) returned by a CUDA library call made for `op` (CUB): one line if not success.
void check_status(int error, int device, const char* op, const char* what);
uint64_t launches();
// Kernel timing for tg::cuda::KernelProfile: between profile_begin and profile_end every
// after_launch on `device` records a CUDA event on its stream (one profile at a time, process-wide);
// profile_end waits for the stream and returns, per launch in order, its op and the milliseconds
// from the previous event (the profile's start for the first) to its own.
struct ProfileMark {
  const char* op;
  double ms;
};
void profile_begin(int device, const char* op);
std::vector<ProfileMark> profile_end(int device, const char* op);
uint64_t host_waits();
bool forbid_host_waits(bool on);  // this thread's switch; returns the previous value
bool sync_debug();
void set_sync_debug(bool on);

// Pure logic, tested on the CPU: does an architecture list like "80-real;90-real;90-virtual" run on
// a card of compute capability major*10+minor? Real code runs on its own major version at the same
// or a later minor; PTX (virtual) is compiled by the driver for any card at or above it.
bool architectures_run_on(const std::string& archs, int capability);
const char* architectures();  // the build's list ("" without CUDA)

}  // namespace tg::cuda_rt

namespace tg::cuda_rt {
// The index flag of a device: index kernels (embedding, index_select, gather) that meet an index
// out of range write zeros instead of reading out of bounds, and raise this flag (the first bad
// index wins). The next synchronize() or copy to the host reads it and throws one line naming the
// op, the index and the size: an asynchronous error blamed on the op that caused it.
struct IndexError {
  int raised = 0;
  int unused = 0;
  const char* op = nullptr;  // a string literal of the library (the op's name)
  int64_t value = 0;
  int64_t limit = 0;
};
IndexError* index_error_flag(int device);  // device memory, made at first use

// Copies `rows` rows of `row_bytes` between device buffers with their own row pitches (concat).
void copy_rows_on_device(int device, void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                         size_t rows, const char* op);

// Writes `count` copies of an element of elem_bytes (1, 2, 4 or 8) whose bits are `bits` (graph/cuda/fill.cu).
void fill_pattern(int device, void* dst, size_t count, int elem_bytes, uint64_t bits, const char* op);
// Writes count (<= kValuesALaunch) values to dst: one kernel with the values as its parameters, so
// that the host may rewrite `values` as soon as this returns (graph/cuda/fill.cu).
constexpr size_t kValuesALaunch = 4000;
void write_values(int device, uint64_t* dst, const uint64_t* values, size_t count, const char* op);

// CUDA graphs (tg::cuda::Graph). begin_capture puts the device's stream in capture mode: from then on
// what this thread queues there is recorded, not run, and host waits, copies from or to the host and
// KernelProfile refuse with one line naming the op. end_capture stops recording and returns the graph
// ready to launch (an opaque cudaGraphExec_t) and its number of nodes; abort_capture stops a capture
// that failed and drops what it recorded.
void begin_capture(int device, const char* op);
void* end_capture(int device, const char* op, size_t* nodes);
void abort_capture(int device);
bool capturing(int device);
void launch_graph(int device, void* exec, const char* op);
void destroy_graph(int device, void* exec);
}  // namespace tg::cuda_rt
