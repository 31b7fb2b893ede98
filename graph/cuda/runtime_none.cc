// The CUDA runtime's surface in a build without CUDA: no GPU is ever usable, and whatever needs
// one says so in one line naming the op.
#include "graph/cuda/runtime.h"

#include "graph/error.h"

namespace tg::cuda_rt {
using detail::fail;
namespace {
constexpr const char* kWhy =
    "this tapegrad was built without CUDA (configure with -DTG_CUDA=ON where the CUDA toolkit is installed)";
[[noreturn]] void refuse(const char* op) { fail(op, "{}", kWhy); }
}  // namespace

bool built() { return false; }
const char* architectures() { return ""; }
int device_count(std::string* why) {
  if (why != nullptr) *why = kWhy;
  return 0;
}
void use_device(int, const char* op) { refuse(op); }
std::string describe(int) { refuse("describe"); }
void* malloc(int, size_t, const char* op) { refuse(op); }
void free(int, void*) {}
void mem_info(int, size_t* free_bytes, size_t* total_bytes) { *free_bytes = *total_bytes = 0; }
void copy_to_device(int, void*, const void*, size_t, const char* op) { refuse(op); }
void copy_to_host(int, void*, const void*, size_t, const char* op) { refuse(op); }
void copy_on_device(int, void*, const void*, size_t, const char* op) { refuse(op); }
void fill_bytes(int, void*, size_t, int, const char* op) { refuse(op); }
void poison_bytes(int, void*, size_t, const char* op) { refuse(op); }
void synchronize(int, const char* op) { refuse(op); }
void* stream(int) { refuse("stream"); }
void count_launch() {}
void after_launch(int, const char* op) { refuse(op); }
uint64_t launches() { return 0; }
void profile_begin(int, const char* op) { refuse(op); }
std::vector<ProfileMark> profile_end(int, const char* op) { refuse(op); }
void check_status(int, int, const char* op, const char*) { refuse(op); }
uint64_t host_waits() { return 0; }
bool forbid_host_waits(bool) { return false; }
bool sync_debug() { return false; }
void set_sync_debug(bool) {}

}  // namespace tg::cuda_rt

namespace tg::cuda_rt {
void fill_pattern(int, void*, size_t, int, uint64_t, const char* op) { fail(op, "{}", "this tapegrad was built without CUDA"); }
void write_values(int, uint64_t*, const uint64_t*, size_t, const char* op) { fail(op, "{}", "this tapegrad was built without CUDA"); }
void begin_capture(int, const char* op) { fail(op, "{}", "this tapegrad was built without CUDA"); }
void* end_capture(int, const char* op, size_t*) { fail(op, "{}", "this tapegrad was built without CUDA"); }
void abort_capture(int) {}
bool capturing(int) { return false; }
void launch_graph(int, void*, const char* op) { fail(op, "{}", "this tapegrad was built without CUDA"); }
void destroy_graph(int, void*) {}
IndexError* index_error_flag(int) { fail("index", "{}", "this tapegrad was built without CUDA"); }
void copy_rows_on_device(int, void*, size_t, const void*, size_t, size_t, size_t, const char* op) {
  fail(op, "{}", "this tapegrad was built without CUDA");
}
}  // namespace tg::cuda_rt
