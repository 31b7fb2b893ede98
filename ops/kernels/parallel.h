#pragma once
// The library's one thread pool. parallel_for splits [begin, end) into at most num_threads()
// contiguous chunks of at least `grain` items; the calling thread runs the first, worker i the
// i-th when it is ready in time (else another thread takes it), so that consecutive ops split the
// same way find their data in the cache of the core that wrote it. Workers wait
// on a condition variable (no spinning: on a 2-core machine a spinning pool slows everything).
// A call from inside a worker runs serially. Kernels are written so that each output element is
// computed by one thread in a fixed order: results do not depend on the thread count.
#include <cstdint>
#include <functional>

#include "../threads.h"  // num_threads, set_num_threads: declared there (no graph in it)

namespace tg {
namespace kernels {

void parallel_run(int chunks, const std::function<void(int)>& fn);

template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& f) {
  int64_t n = end - begin;
  if (n <= 0) return;
  int64_t max_chunks = grain > 0 ? n / grain : n;
  int threads = num_threads();
  int chunks = static_cast<int>(max_chunks < threads ? max_chunks : threads);
  if (chunks <= 1) {
    f(begin, end);
    return;
  }
  parallel_run(chunks, [&](int c) {
    int64_t b = begin + n * c / chunks, e = begin + n * (c + 1) / chunks;
    if (b < e) f(b, e);
  });
}

// Bytes an op must move (reads + writes) before its output is written with non-temporal
// (streaming) stores: past the last-level cache the output cannot stay cached anyway, and
// streaming skips reading each destination line before writing it (measured here: a 16 MB
// add, 1.65 ms -> 1.07 ms on one thread). The L3 size from sysfs; 32 MiB when unknown.
int64_t stream_threshold_bytes();
void set_stream_threshold_bytes(int64_t bytes);  // 0 restores the default; for tests and tuning

// Element counts above which elementwise and row-wise kernels go parallel.
inline constexpr int64_t kParallelGrain = 32768;

}  // namespace kernels
}  // namespace tg
