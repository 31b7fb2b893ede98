#pragma once
// Shape and movement ops. reshape/view/squeeze/unsqueeze/flatten share storage; the others copy
// into a fresh contiguous tensor. Every one is differentiable, and its backward is itself a
// public op (so gradients of gradients work).
#include <vector>

#include "../graph/tensor.h"

namespace tg {

// One dimension may be -1 (inferred).
Tensor reshape(const Tensor& x, const Shape& shape);
inline Tensor view(const Tensor& x, const Shape& shape) { return reshape(x, shape); }
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x);  // all size-1 dims
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor permute(const Tensor& x, const Shape& order);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor expand(const Tensor& x, const Shape& shape);  // -1 keeps a dimension
// Elements start, start+step, ... < end along dim (negative start/end count from the end;
// they are clamped to the dimension, as in Python slicing). step >= 1.
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor concat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
// Chunks of split_size along dim (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

// Indexing with int64 index tensors.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);  // index: 1-D
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);        // as torch.gather
// A zero tensor of `shape` with src added at index along dim (the backward of index_select).
Tensor index_add(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& src);
// A zero tensor of `shape` with src scatter-added at index along dim (the backward of gather).
Tensor scatter_add(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& src);
// In place, not recorded (as torch's index_add_): self[index[i]] += alpha * src[i] along dim. The
// sparse row update of an embedding table: it costs in proportion to the rows touched.
void index_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, double alpha = 1.0);
// Rows of weight [V, D] for every id in ids (any shape): output ids.shape + [D]. Backward adds
// into the used rows only. padding_idx >= 0: that row's lookups get no gradient (as PyTorch).
Tensor embedding(const Tensor& weight, const Tensor& ids, int64_t padding_idx = -1);

// The inverse of slice: zeros of `shape` with g placed at start, start+step, ... along dim.
Tensor slice_backward(const Tensor& g, const Shape& shape, int64_t dim, int64_t start, int64_t step);

}  // namespace tg
