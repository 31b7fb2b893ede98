// The elementwise GPU entry points in a build without CUDA: never reached (no tensor can be on a
// GPU there), and refusing with one line if they were.
#include <cstdint>

#include "graph/error.h"
#include "ops/cuda/elementwise.h"

namespace tg::cuda_ops {
namespace {
[[noreturn]] void refuse(const char* op) { detail::fail(op, "this tapegrad was built without CUDA"); }
}  // namespace

void unary(const UnaryArgs& a) { refuse(a.op); }
void binary(const BinaryArgs& a) { refuse(a.op); }
void compare(const CompareArgs& a) { refuse(a.op); }
void logical_not(int, const char* op, const bool*, bool*, int64_t) { refuse(op); }
void cast(const CastArgs& a) { refuse(a.op); }
void where(const WhereArgs& a) { refuse(a.op); }

}  // namespace tg::cuda_ops
