#pragma once
// The optimizers' GPU kernels (optim.cu; optim_none.cc without CUDA): SGD and Adam/AdamW over many
// parameters in one launch (a table of up to kMaxTensors pointers passed by value), the global
// gradient norm summed in a fixed order (two launches: the same bits every run, no host read),
// gradients scaled by a factor held in device memory (clipping), and the non-finite flag: raised
// by the norm or check_finite for a step, it makes every later update skip itself.
#include <cstdint>

#include "elementwise.h"

namespace tg::cuda_ops {

constexpr int kMaxTensors = 128;           // tensors a launch
constexpr int64_t kOptimChunk = 8192;      // elements a block

// Tensors of one launch: parameter, gradient and state pointers (m, v may be null), sizes, and the
// per-tensor scalars (Adam's bias-corrected step size and 1/sqrt(1 - b2^t); SGD's first-step flag).
struct OptimTable {
  int count = 0;
  void* p[kMaxTensors] = {};
  const void* g[kMaxTensors] = {};
  void* m[kMaxTensors] = {};
  void* v[kMaxTensors] = {};
  int64_t n[kMaxTensors] = {};
  double step_size[kMaxTensors] = {};
  double inv_sqrt_bc2[kMaxTensors] = {};
  bool first[kMaxTensors] = {};
  void* bf16[kMaxTensors] = {};  // float32 parameters: autocast's bfloat16 copy, rewritten in the pass (or null)
};

// The non-finite flag in device memory: int64 [raised, first step].
struct OptimArgs {
  int device = 0;
  const char* op = "";
  Scalar type = Scalar::kF32;
  bool adam = true;
  double b1 = 0.9, b2 = 0.999, eps = 1e-8, wd_l2 = 0, decay = 1;  // Adam / AdamW
  double lr = 0, wd = 0, mu = 0, dampening = 0;                   // SGD
  bool nesterov = false;
  const int64_t* skip_flag = nullptr;  // raised: no update (null: always update)
  OptimTable table;
  // Device memory (a CUDA graph's step values, float64): when set, the scalars that change from
  // step to step are read there, not from above: [0] SGD's lr or Adam's decay, then for the
  // table's tensors step_size[count], inv_sqrt_bc2[count] and first[count] (0 or 1).
  const double* scalars = nullptr;
};
void optimizer_step(const OptimArgs& args);

// The global L2 norm of gradients listed in tables (each table: g and n), float32 or float64, in
// float64: per-block partial sums (`partial`: blocks_for_norm values) then one block adding them
// in order. The gradients count as multiplied by `scale`: writes norm[0] = scale * sqrt(sum), and
// coef[0] = scale * min(1, max_norm / (norm + 1e-6)) (scale alone where max_norm is 0), the factor
// scale_grads applies; a non-finite norm raises flag (if not null) for `step`.
int64_t blocks_for_norm(const OptimTable& t);
struct GradNormArgs {
  int device = 0;
  const char* op = "";
  Scalar type = Scalar::kF32;
  const OptimTable* tables = nullptr;
  int table_count = 0;
  double* partial = nullptr;
  double* norm = nullptr;
  double max_norm = 0;
  double scale = 1;
  double* coef = nullptr;
  int64_t* flag = nullptr;
  int64_t step = 0;
  const int64_t* step_at = nullptr;  // device memory: the step, read there when set (a CUDA graph's step value)
};
void grad_norm(const GradNormArgs& args);

// g *= coef[0] for the gradients of a table (coef in device memory, float64).
void scale_grads(int device, const char* op, Scalar type, const OptimTable& table, const double* coef);

// Raises flag for `step` when any of the n values at x is NaN or infinite (float32 or float64).
// (step_at: device memory holding the step, read there when set.)
void check_finite(int device, const char* op, Scalar type, const void* x, int64_t n, int64_t* flag, int64_t step,
                  const int64_t* step_at = nullptr);

}  // namespace tg::cuda_ops
