#pragma once
// Dropout's masks as data, for the ops that apply one (dropout, and flash_attention's dropout on its
// weights): the keys a call draws and applying the mask they make. Not a public header.
#include <cstdint>
#include <memory>
#include <vector>

#include "../graph/tensor.h"

namespace tg::detail {

// Which mask a dropout call applies: one key for the whole tensor, or (rows set) one key a row of
// its last dimension, kept on the host for the CPU and uploaded once (as int64) for a GPU. While a
// CUDA graph is captured the GPU's keys are step values (graph/capture_internal.h): key_at and
// rows_at, in device memory, hold each replay's keys (drawn as the eager step would draw them).
struct DropoutKeys {
  uint64_t key = 0;
  std::shared_ptr<std::vector<uint64_t>> rows;
  Tensor rows_on_device;
  const uint64_t* key_at = nullptr;
  const uint64_t* rows_at = nullptr;
};
// The row keys' device memory for a GPU kernel (nullptr: one key).
const uint64_t* gpu_row_keys(const DropoutKeys& keys, const Tensor& x, const char* op);

// The keys of one dropout call over a tensor of `shape` on `device` (draws from the global
// generator, or from the thread's SampleKeyScope: keyed by sample when shape[0] is its samples).
DropoutKeys dropout_keys(const Shape& shape, const Device& device);
// p * 2^32, capped: element c is dropped when its bits are below it.
uint32_t dropout_threshold(double p);
// y = x where the mask keeps it, times scale; 0 where it drops it, on x's device. With bf16_copy
// (float32 on a GPU), y's bfloat16 rounding is written in the same pass and kept as autocast's copy.
Tensor apply_dropout(const Tensor& x, const DropoutKeys& keys, uint32_t threshold, double scale, bool bf16_copy = false);

// residual + dropout(x, p, training): the transformer layers' residual connection. On a GPU, with x
// and residual of one shape and float dtype, one kernel (and one node) with the same numbers as the
// two ops and the same keys drawn; elsewhere exactly those two ops.
Tensor dropout_add(const Tensor& x, const Tensor& residual, double p, bool training);

}  // namespace tg::detail
