#pragma once
// Processes that train one model together (data parallelism) over MPI (Open MPI from Debian).
//
//   mpirun -np 4 ./build/train_lm ...      # or: srun --mpi=pmix -n 4 ./build/train_lm ...
//
// tg::dist::world() is every process of such a launch; it starts MPI on first use when the
// program was launched by mpirun or srun, and is this process alone otherwise. A tapegrad built
// without MPI (TG_MPI=OFF, or Open MPI not found) refuses, with one line, to run as one of several. tg::train::Trainer uses it by
// itself: each process takes its share of every batch, gradients are summed across processes,
// and only process 0 writes files and prints progress. A program of your own needs no MPI code.
//
// Every collective below must be called by every process of the communicator, in the same
// order. A wait that gets no answer for TG_DIST_TIMEOUT seconds (default 30) means a process
// died or stopped: this process prints one line and ends the whole job. Waits for process 0's
// file work use TG_DIST_IO_TIMEOUT (default 600 s) instead.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tg::dist {

// A non-blocking operation in flight (see Communicator::all_reduce_sum_async).
class Request {
 public:
  Request();
  ~Request();
  Request(Request&&) noexcept;
  Request& operator=(Request&&) noexcept;
  bool active() const;

 private:
  friend class Communicator;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class Communicator {
 public:
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_main() const { return rank_ == 0; }  // process 0 writes files and prints
  bool uses_mpi() const { return mpi_; }

  // Sums element-wise across processes, in place (every process gets the same result).
  void all_reduce_sum(float* data, int64_t n, const char* what = "all-reduce");
  void all_reduce_sum(double* data, int64_t n, const char* what = "all-reduce");
  void all_reduce_max(int64_t* data, int64_t n, const char* what = "all-reduce");
  // Starts a sum in place and returns at once; test() advances it, wait() finishes it.
  Request all_reduce_sum_async(float* data, int64_t n);
  Request all_reduce_sum_async(double* data, int64_t n);
  bool test(Request& r);  // true once done
  void wait(std::vector<Request>& rs, const char* what = "all-reduce");
  // Process `root`'s bytes to every process (the others' `bytes` are replaced, resized as needed).
  void broadcast(std::string& bytes, int root = 0, const char* what = "broadcast");
  void broadcast(void* data, int64_t bytes, int root = 0, const char* what = "broadcast");
  // Every process's string, in rank order.
  std::vector<std::string> all_gather(const std::string& s, const char* what = "all-gather");
  // The first process whose string differs from process 0's, or 0 when all agree; `all` gets
  // every process's string (the agreement checks: configurations, data, parameters).
  int first_difference(const std::string& s, std::vector<std::string>& all, const char* what = "comparing");
  void barrier(const char* what = "barrier");
  // Agreement helpers: true on every process when any has true / process 0 has true.
  bool any(bool b);
  bool from_main(bool b);

  // Seconds a wait may go without an answer before the job is ended (TG_DIST_TIMEOUT).
  double timeout_seconds() const { return timeout_; }
  void set_timeout_seconds(double s) { timeout_ = s; }

 private:
  friend Communicator& world();
  friend Communicator& single();
  Communicator(bool mpi, int rank, int size);
  void bytes_broadcast(char* data, int64_t n, int root, const char* what);
  void reduce_(void* data, int64_t n, int type, bool max, const char* what);  // type 0 float, 1 double, 2 int64
  bool mpi_;
  int rank_, size_;
  double timeout_;
  [[maybe_unused]] void* comm_ = nullptr;  // MPI_Comm, when mpi_
};

// Within its scope the communicator's waits may last TG_DIST_IO_TIMEOUT seconds (default 600):
// where the others wait for process 0's file work (loading or writing a checkpoint) or for a slow
// set-up (data, tokenizers) rather than for a training step.
class PatientWaits {
 public:
  explicit PatientWaits(Communicator& c);
  ~PatientWaits() { c_.set_timeout_seconds(old_); }
  PatientWaits(const PatientWaits&) = delete;
  PatientWaits& operator=(const PatientWaits&) = delete;

 private:
  Communicator& c_;
  double old_;
};

// Every process of the launch (starts MPI on first use when launched by mpirun or srun).
Communicator& world();
// This process alone (size 1): for running the Trainer undistributed inside an MPI launch.
Communicator& single();
// Shorthands for world().
inline int rank() { return world().rank(); }
inline int size() { return world().size(); }
inline bool is_main() { return world().is_main(); }

// Whether this build of tapegrad has MPI, and whether this process was started by a launcher
// (mpirun, srun) as one of several.
bool built_with_mpi();
bool launched_as_several();

// Ends every process of the job now with `code` (after a failure on this process only); with one
// process, std::exit(code).
[[noreturn]] void abort_job(int code);

// An error every process raised together (a configuration mismatch, a missing checkpoint seen by
// process 0): programs print it once, from process 0, and exit normally with code 1.
void mark_error_shared();
bool error_is_shared();
void clear_error_shared();  // a handled shared error (e.g. a failed resume followed by a fresh start)

// The part of a global batch that process `rank` of `size` takes: contiguous slices, the first
// `batch.size() % size` processes one sample more; empty when the batch has fewer samples than
// processes. Concatenated in rank order they give back the batch.
std::vector<int64_t> shard(const std::vector<int64_t>& batch, int rank, int size);

}  // namespace tg::dist
