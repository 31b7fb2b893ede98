#include "ops/kernels/parallel.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tg {
namespace {

thread_local bool t_in_worker = false;
constexpr int kSpinDefault = 20000;

class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { loop(i); });
  }
  ~Pool() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void run(int chunks, const std::function<void(int)>& fn) {
    std::lock_guard call(call_mu_);  // one parallel region at a time
    uint64_t gen;
    {
      std::lock_guard lock(mu_);
      job_ = &fn;
      chunks_ = chunks;
      next_ = 0;
      claimed_.assign(static_cast<size_t>(chunks), 0);
      pending_ = chunks;
      left_.store(chunks, std::memory_order_relaxed);
      error_ = nullptr;
      gen = ++generation_;
      published_.store(gen, std::memory_order_release);
    }
    cv_.notify_all();
    work(gen, 0);
    // The other chunks are usually finishing too (a memory-bound product split evenly): spin a
    // little before sleeping, so that the next op does not wait for a futex wake-up.
    for (int i = 0; i < kSpinIterations && left_.load(std::memory_order_acquire) != 0; ++i) pause();
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // Claims chunks of generation `gen` under the lock until none is left: first chunk `mine` (the
  // caller's is 0, worker i's is i), then any left in order. The same thread then takes the same
  // part of every parallel op, so data an op wrote stays in the cache of the core that reads it in
  // the next op (a row split by threads, as parallel_for makes it); a thread that comes late still
  // has its chunk taken by the others.
  void work(uint64_t gen, int mine) {
    for (;;) {
      int c;
      const std::function<void(int)>* job;
      {
        std::lock_guard lock(mu_);
        if (generation_ != gen || job_ == nullptr) return;
        if (mine >= 0 && mine < chunks_ && !claimed_[static_cast<size_t>(mine)]) {
          c = mine;
        } else {
          while (next_ < chunks_ && claimed_[static_cast<size_t>(next_)]) ++next_;
          if (next_ >= chunks_) return;
          c = next_;
        }
        claimed_[static_cast<size_t>(c)] = 1;
        mine = -1;
        job = job_;
      }
      std::exception_ptr err;
      try {
        (*job)(c);
      } catch (...) {
        err = std::current_exception();
      }
      std::lock_guard lock(mu_);
      if (err && !error_) error_ = err;
      left_.fetch_sub(1, std::memory_order_release);
      if (--pending_ == 0) done_cv_.notify_all();
    }
  }
  void loop(int index) {
    t_in_worker = true;
    uint64_t seen = 0;
    for (;;) {
      // Spin briefly (about 50 microseconds) before sleeping: back-to-back parallel ops then
      // start without a futex wake-up, while an idle pool still leaves the cores alone (unlike
      // OpenMP's default 200 ms spin, which makes two threads slower than one on two cores).
      for (int i = 0; i < kSpinIterations && published_.load(std::memory_order_acquire) == seen; ++i) pause();
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || (generation_ != seen && job_ != nullptr); });
        if (stop_) return;
        seen = generation_;
      }
      work(seen, index);
    }
  }

  std::vector<std::thread> workers_;
  std::mutex call_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  int chunks_ = 0;
  int next_ = 0;
  std::vector<char> claimed_;  // per chunk of the current generation
  int pending_ = 0;
  uint64_t generation_ = 0;
  std::atomic<uint64_t> published_{0};  // generation_, readable without the lock (for spinning)
  std::atomic<int> left_{0};             // pending_, readable without the lock (for spinning)
  static constexpr int kSpinIterations = kSpinDefault;
  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  bool stop_ = false;
  std::exception_ptr error_;
};

int initial_threads() {
  if (const char* env = std::getenv("TG_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n >= 1) return n;
  }
  // The cores this process may run on (mpirun binds each process to its own by default), shared
  // with the other processes of a launch on this machine when they are not bound.
  int hw = static_cast<int>(std::thread::hardware_concurrency());
  if (hw < 1) hw = 1;
  int mine = hw;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) mine = std::max(1, CPU_COUNT(&set));
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}) {
    const char* e = std::getenv(v);
    const int local = e ? std::atoi(e) : 0;
    if (local > 1) return std::max(1, std::min(mine, hw / local));  // bound to a socket shared with others too
  }
  return mine;
}

std::mutex g_pool_mu;
std::atomic<int> g_threads{0};
std::shared_ptr<Pool> g_pool;

std::shared_ptr<Pool> pool() {
  std::lock_guard lock(g_pool_mu);
  if (g_threads.load() == 0) g_threads.store(initial_threads());
  if (!g_pool || g_pool->size() != g_threads.load()) g_pool = std::make_shared<Pool>(g_threads.load());
  return g_pool;
}

}  // namespace

int num_threads() {
  if (t_in_worker) return 1;
  int n = g_threads.load();
  if (n == 0) {
    std::lock_guard lock(g_pool_mu);
    if (g_threads.load() == 0) g_threads.store(initial_threads());
    n = g_threads.load();
  }
  return n;
}

void set_num_threads(int n) {
  std::lock_guard lock(g_pool_mu);
  g_threads.store(n < 1 ? 1 : n);
}

namespace kernels {
std::atomic<int64_t> g_stream_override{0};
int64_t stream_threshold_bytes() {
  if (int64_t o = g_stream_override.load(std::memory_order_relaxed)) return o;
  static const int64_t bytes = [] {
    int64_t b = int64_t{32} << 20;
    if (std::FILE* f = std::fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r")) {
      long kb = 0;
      char unit = 0;
      if (std::fscanf(f, "%ld%c", &kb, &unit) >= 1 && kb > 0) b = (unit == 'M' ? kb << 20 : kb << 10);
      std::fclose(f);
    }
    return b;
  }();
  return bytes;
}
void set_stream_threshold_bytes(int64_t bytes) { g_stream_override.store(bytes); }

void parallel_run(int chunks, const std::function<void(int)>& fn) {
  if (chunks <= 1 || t_in_worker) {
    for (int c = 0; c < chunks; ++c) fn(c);
    return;
  }
  // The caller runs chunks too; a parallel_for nested in them must run serially.
  t_in_worker = true;
  struct Reset { ~Reset() { t_in_worker = false; } } reset;
  pool()->run(chunks, fn);
}
}  // namespace kernels
}  // namespace tg
