// Read bandwidth of this machine: the GB/s at which 1, 2, ... threads sum a buffer far larger
// than the caches (the bound on a memory-bound kernel such as one-token decoding, which reads
// every weight once per token). The median of --repeats passes per thread count; one JSON line each.
//
//   build/mem_bandwidth [--mib 1024] [--threads 1,2] [--repeats 5]
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "ops/kernels/simd.h"
#include "tapegrad.h"
#include "ops/kernels/parallel.h"

int main(int argc, char** argv) {
  return tg::cli::run_main(argc, argv, [&] {
    int64_t mib = 1024, repeats = 5;
    std::string threads = "1,2";
    tg::cli::Flags flags("mem_bandwidth", "read bandwidth: threads summing a large buffer");
    flags.add("mib", &mib, "buffer size in MiB").range(64, 1 << 16);
    flags.add("threads", &threads, "comma-separated thread counts");
    flags.add("repeats", &repeats, "passes per thread count (the median is reported)").min(1);
    flags.parse(argc, argv).or_throw();
    const size_t n = static_cast<size_t>(mib) << 18;  // floats
    std::vector<float> buf(n);
    for (size_t i = 0; i < n; ++i) buf[i] = static_cast<float>(i & 7);
    using B = xsimd::batch<float>;
    constexpr size_t W = B::size;
    for (size_t pos = 0; pos < threads.size();) {
      const size_t comma = std::min(threads.find(',', pos), threads.size());
      const int t = std::stoi(threads.substr(pos, comma - pos));
      pos = comma + 1;
      tg::set_num_threads(t);
      std::vector<double> secs;
      double total = 0;
      for (int64_t r = 0; r < repeats; ++r) {
        std::vector<float> part(static_cast<size_t>(t), 0.f);
        const auto start = std::chrono::steady_clock::now();
        const int64_t chunks = t;
        tg::kernels::parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi) {
          for (int64_t c = lo; c < hi; ++c) {
            const size_t a = n / static_cast<size_t>(chunks) * static_cast<size_t>(c);
            const size_t b = c + 1 == chunks ? n : n / static_cast<size_t>(chunks) * static_cast<size_t>(c + 1);
            B s0(0.f), s1(0.f), s2(0.f), s3(0.f);
            size_t i = a;
            for (; i + 4 * W <= b; i += 4 * W) {
              s0 += B::load_unaligned(&buf[i]);
              s1 += B::load_unaligned(&buf[i + W]);
              s2 += B::load_unaligned(&buf[i + 2 * W]);
              s3 += B::load_unaligned(&buf[i + 3 * W]);
            }
            float s = tg::kernels::hsum(s0 + s1 + s2 + s3);
            for (; i < b; ++i) s += buf[i];
            part[static_cast<size_t>(c)] = s;
          }
        });
        secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        for (float v : part) total += v;
      }
      std::sort(secs.begin(), secs.end());
      const double s = secs[secs.size() / 2];
      fmt::print("{{\"bench\": \"mem_bandwidth\", \"threads\": {}, \"mib\": {}, \"seconds\": {:.4f}, \"gb_per_s\": {:.2f}, \"check\": {}}}\n",
                 t, mib, s, static_cast<double>(n) * 4 / s / 1e9, total > 0 ? 1 : 0);
    }
    return 0;
  });
}
