#pragma once
// Dropout's masks as data, for the ops that apply one (dropout, and flash_attention's dropout on its
// weights): the keys a call draws and applying the mask they make. Not a public header.
#include <cstdint>
#include <memory>
#include <vector>

#include "../graph/tensor.h"

namespace tg::detail {

// Which mask a dropout call applies: one key for the whole tensor, or (rows set) one key a row of
// its last dimension, kept on the host for the CPU and uploaded once (as int64) for a GPU.
struct DropoutKeys {
  uint64_t key = 0;
  std::shared_ptr<std::vector<uint64_t>> rows;
  Tensor rows_on_device;
};

// The keys of one dropout call over a tensor of `shape` on `device` (draws from the global
// generator, or from the thread's SampleKeyScope: keyed by sample when shape[0] is its samples).
DropoutKeys dropout_keys(const Shape& shape, const Device& device);
// p * 2^32, capped: element c is dropped when its bits are below it.
uint32_t dropout_threshold(double p);
// y = x where the mask keeps it, times scale; 0 where it drops it, on x's device.
Tensor apply_dropout(const Tensor& x, const DropoutKeys& keys, uint32_t threshold, double scale);

// residual + dropout(x, p, training): the transformer layers' residual connection. On a GPU, with x
// and residual of one shape and float dtype, one kernel (and one node) with the same numbers as the
// two ops and the same keys drawn; elsewhere exactly those two ops.
Tensor dropout_add(const Tensor& x, const Tensor& residual, double p, bool training);

}  // namespace tg::detail
