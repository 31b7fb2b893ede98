#include "distributed/dist.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "graph/error.h"

#ifdef TG_HAVE_MPI
#include <mpi.h>
#endif

namespace tg::dist {

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : 0;
}

double env_seconds(const char* name, double fallback) {
  if (const char* v = std::getenv(name)) {
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (end != v && *end == '\0' && s > 0 && s < 1e9) return s;
    std::fprintf(stderr, "tapegrad: %s='%s' is not a number of seconds > 0; using %g\n", name, v, fallback);
  }
  return fallback;
}
double default_timeout() { return env_seconds("TG_DIST_TIMEOUT", 30); }

std::atomic<bool> g_shared_error{false};

}  // namespace

bool launched_as_several() {
  // Open MPI's mpirun, MPICH/Hydra and PMI-based launchers, Slurm's srun.
  // (Slurm: the tasks of this job step, not of the whole allocation.)
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS"})
    if (env_int(v) > 1) return true;
  return false;
}

void mark_error_shared() { g_shared_error = true; }
bool error_is_shared() { return g_shared_error; }
void clear_error_shared() { g_shared_error = false; }

std::vector<int64_t> shard(const std::vector<int64_t>& batch, int rank, int size) {
  TG_CHECK(size >= 1 && rank >= 0 && rank < size, "dist::shard", "rank {} of {} processes is not valid", rank, size);
  const int64_t n = static_cast<int64_t>(batch.size()), base = n / size, extra = n % size;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra), len = base + (rank < extra ? 1 : 0);
  return std::vector<int64_t>(batch.begin() + begin, batch.begin() + begin + len);
}

// ---- Without MPI, or a communicator of one ----

struct Request::Impl {
#ifdef TG_HAVE_MPI
  MPI_Request req = MPI_REQUEST_NULL;
#endif
  bool done = true;
};
Request::Request() = default;
Request::~Request() = default;
Request::Request(Request&&) noexcept = default;
Request& Request::operator=(Request&&) noexcept = default;
bool Request::active() const { return impl_ && !impl_->done; }

Communicator::Communicator(bool mpi, int rank, int size) : mpi_(mpi), rank_(rank), size_(size), timeout_(default_timeout()) {}

PatientWaits::PatientWaits(Communicator& c) : c_(c), old_(c.timeout_seconds()) {
  static const double io = env_seconds("TG_DIST_IO_TIMEOUT", 600);
  c_.set_timeout_seconds(std::max(old_, io));
}

Communicator& single() {
  static Communicator* c = new Communicator(false, 0, 1);
  return *c;
}

bool Communicator::any(bool b) {
  if (size_ == 1) return b;
  int64_t v = b ? 1 : 0;
  all_reduce_max(&v, 1, "agreement");
  return v != 0;
}

bool Communicator::from_main(bool b) {
  if (size_ == 1) return b;
  char v = b ? 1 : 0;
  broadcast(&v, 1, 0, "agreement");
  return v != 0;
}

void Communicator::broadcast(std::string& bytes, int root, const char* what) {
  if (size_ == 1) return;
  int64_t n = static_cast<int64_t>(bytes.size());
  broadcast(&n, sizeof n, root, what);
  bytes.resize(static_cast<size_t>(n));
  broadcast(bytes.data(), n, root, what);
}

void Communicator::broadcast(void* data, int64_t bytes, int root, const char* what) {
  if (size_ == 1 || bytes == 0) return;
  bytes_broadcast(static_cast<char*>(data), bytes, root, what);
}

std::vector<std::string> Communicator::all_gather(const std::string& s, const char* what) {
  std::vector<std::string> out(static_cast<size_t>(size_));
  out[static_cast<size_t>(rank_)] = s;
  for (int r = 0; r < size_ && size_ > 1; ++r) broadcast(out[static_cast<size_t>(r)], r, what);
  return out;
}

int Communicator::first_difference(const std::string& s, std::vector<std::string>& all, const char* what) {
  all = all_gather(s, what);
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) return static_cast<int>(r);
  return 0;
}

#ifndef TG_HAVE_MPI

Communicator::~Communicator() = default;
bool built_with_mpi() { return false; }

Communicator& world() {
  static Communicator* w = [] {
    if (launched_as_several())
      throw Error("tapegrad: this program was launched as several processes (mpirun or srun), but this build of tapegrad has "
                  "no MPI (built with TG_MPI=OFF, or without Open MPI: apt-get install libopenmpi-dev, then rebuild)");
    return new Communicator(false, 0, 1);
  }();
  return *w;
}

void Communicator::reduce_(void*, int64_t, int, bool, const char*) {}
void Communicator::all_reduce_sum(float*, int64_t, const char*) {}
void Communicator::all_reduce_sum(double*, int64_t, const char*) {}
void Communicator::all_reduce_max(int64_t*, int64_t, const char*) {}
Request Communicator::all_reduce_sum_async(float*, int64_t) { return {}; }
Request Communicator::all_reduce_sum_async(double*, int64_t) { return {}; }
bool Communicator::test(Request&) { return true; }
void Communicator::wait(std::vector<Request>&, const char*) {}
void Communicator::barrier(const char*) {}
void Communicator::bytes_broadcast(char*, int64_t, int, const char*) {}

[[noreturn]] void abort_job(int code) { std::exit(code); }

#else  // TG_HAVE_MPI

namespace {

MPI_Comm comm_of(void* c) { return *static_cast<MPI_Comm*>(c); }

[[noreturn]] void die(int rank, int size, const std::string& line) {
  std::fprintf(stderr, "tapegrad: process %d of %d: %s\n", rank, size, line.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

void check(int rc, int rank, int size, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  die(rank, size, fmt::format("{} failed: {} (another process probably died)", what, std::string(text, static_cast<size_t>(len))));
}

// At exit: wait for every process (sleeping, so a process that finished early does not take a core
// from one still writing its report), then finalize.
void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  MPI_Request r;
  if (MPI_Ibarrier(MPI_COMM_WORLD, &r) == MPI_SUCCESS) {
    for (int done = 0;;) {
      if (MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  MPI_Finalize();
}

template <class T>
MPI_Datatype mpi_type() { return sizeof(T) == 4 ? MPI_FLOAT : MPI_DOUBLE; }

constexpr int64_t kChunk = int64_t{1} << 30;  // elements per MPI call (counts are ints)

}  // namespace

bool built_with_mpi() { return true; }

Communicator::~Communicator() { delete static_cast<MPI_Comm*>(comm_); }

Communicator& world() {
  static Communicator* w = [] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized && !launched_as_several()) return new Communicator(false, 0, 1);
    if (!initialized) {
      int provided = 0;
      // Only the thread that runs the training loop calls MPI; the kernel threads never do.
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        throw Error("tapegrad: MPI_Init_thread failed: cannot join the other processes of this launch");
      if (provided < MPI_THREAD_FUNNELED)
        throw Error("tapegrad: this MPI library supports no threads (MPI_THREAD_SINGLE); tapegrad's kernels use threads");
      std::atexit(finalize_at_exit);
    }
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    auto* c = new Communicator(size > 1, rank, size);
    if (size > 1) {
      auto* comm = new MPI_Comm;
      MPI_Comm_dup(MPI_COMM_WORLD, comm);
      MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN);
      c->comm_ = comm;
    }
    return c;
  }();
  return *w;
}

[[noreturn]] void abort_job(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  std::fflush(stdout);
  std::fflush(stderr);
  if (initialized && !finalized) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, code);
  }
  std::exit(code);
}

#define TG_DIST_ASYNC(T)                                                                                            \
  Request Communicator::all_reduce_sum_async(T* data, int64_t n) {                                                  \
    Request r;                                                                                                      \
    r.impl_ = std::make_unique<Request::Impl>();                                                                    \
    if (size_ == 1 || n == 0) return r;                                                                             \
    TG_CHECK(n <= INT_MAX, "dist::all_reduce_sum_async", "{} elements is more than one call takes ({})", n, INT_MAX); \
    check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), mpi_type<T>(), MPI_SUM, comm_of(comm_), &r.impl_->req), \
          rank_, size_, "MPI_Iallreduce");                                                                          \
    r.impl_->done = false;                                                                                          \
    return r;                                                                                                       \
  }
TG_DIST_ASYNC(float)
TG_DIST_ASYNC(double)
#undef TG_DIST_ASYNC

bool Communicator::test(Request& r) {
  if (!r.active()) return true;
  int done = 0;
  check(MPI_Test(&r.impl_->req, &done, MPI_STATUS_IGNORE), rank_, size_, "MPI_Test");
  r.impl_->done = done != 0;
  return r.impl_->done;
}

void Communicator::wait(std::vector<Request>& rs, const char* what) {
  const auto start = std::chrono::steady_clock::now();
  int64_t polls = 0;
  bool patient = false;  // after 50 ms: sleep between polls (another process evaluating or saving)
  for (;;) {
    bool all = true;
    for (auto& r : rs) all = test(r) && all;
    if (all) return;
    if (patient || (++polls & 255) == 0) {
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > timeout_)
        die(rank_, size_, fmt::format("no answer from the other processes for {:g} s in {} (a process died, stopped or "
                                      "hangs); ending the job (TG_DIST_TIMEOUT sets the limit)", timeout_, what));
      patient = waited > 0.05;
      if (patient) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
}

void Communicator::reduce_(void* data, int64_t n, int type, bool max, const char* what) {
  if (size_ == 1 || n == 0) return;
  const MPI_Datatype t = type == 0 ? MPI_FLOAT : type == 1 ? MPI_DOUBLE : MPI_INT64_T;
  const int64_t elem = type == 0 ? 4 : 8;
  std::vector<Request> rs;
  for (int64_t at = 0; at < n; at += kChunk) {
    Request r;
    r.impl_ = std::make_unique<Request::Impl>();
    check(MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(data) + at * elem, static_cast<int>(std::min(kChunk, n - at)), t,
                         max ? MPI_MAX : MPI_SUM, comm_of(comm_), &r.impl_->req),
          rank_, size_, "MPI_Iallreduce");
    r.impl_->done = false;
    rs.push_back(std::move(r));
  }
  wait(rs, what);
}

void Communicator::all_reduce_sum(float* data, int64_t n, const char* what) { reduce_(data, n, 0, false, what); }
void Communicator::all_reduce_sum(double* data, int64_t n, const char* what) { reduce_(data, n, 1, false, what); }
void Communicator::all_reduce_max(int64_t* data, int64_t n, const char* what) { reduce_(data, n, 2, true, what); }

void Communicator::bytes_broadcast(char* data, int64_t n, int root, const char* what) {
  std::vector<Request> rs;
  for (int64_t at = 0; at < n; at += kChunk) {
    Request r;
    r.impl_ = std::make_unique<Request::Impl>();
    check(MPI_Ibcast(data + at, static_cast<int>(std::min(kChunk, n - at)), MPI_BYTE, root, comm_of(comm_), &r.impl_->req),
          rank_, size_, "MPI_Ibcast");
    r.impl_->done = false;
    rs.push_back(std::move(r));
  }
  wait(rs, what);
}

void Communicator::barrier(const char* what) {
  if (size_ == 1) return;
  std::vector<Request> rs(1);
  rs[0].impl_ = std::make_unique<Request::Impl>();
  check(MPI_Ibarrier(comm_of(comm_), &rs[0].impl_->req), rank_, size_, "MPI_Ibarrier");
  rs[0].impl_->done = false;
  wait(rs, what);
}

#endif  // TG_HAVE_MPI

}  // namespace tg::dist
