#include "graph/tensor.h"

#include <cmath>
#include <cstring>

#include "graph/node.h"
#include "graph/pool.h"

namespace tg {

namespace detail {
void fail_undefined_tensor() {
  fail("tensor", "use of an undefined Tensor (default-constructed or moved-from)");
}
void fail_wrong_dtype(DType have, DType want) {
  fail("data", "tensor has dtype {}, requested {}", have, want);
}
void fail_unsupported_dtype(const char* op, DType d) {
  fail(op, "dtype {} is not supported (expected float32 or float64{})", d,
       d == DType::kBFloat16 ? "; bfloat16 tensors take to, copies, comparisons, add/sub/mul/div, embedding and matmul" : "");
}
}  // namespace detail


std::shared_ptr<TensorImpl> make_tensor_impl() {
  return std::allocate_shared<TensorImpl>(detail::PoolAllocator<TensorImpl>{});
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  for (int64_t d : shape) TG_CHECK(d >= 0, "empty", "negative dimension {} in shape {}", d, shape);
  auto impl = make_tensor_impl();
  impl->storage = make_storage(static_cast<size_t>(shape.numel()) * dtype_size(dtype));
  impl->shape = shape;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

int64_t Tensor::size(int64_t d) const {
  return shape()[normalize_axis(d, dim(), "size")];
}

void* Tensor::raw_data() const {
  return static_cast<char*>(impl().storage->data()) + impl().offset * static_cast<int64_t>(dtype_size(dtype()));
}

double Tensor::item() const {
  TG_CHECK(numel() == 1, "item", "expected a tensor with one element, got shape {} ({} elements)", shape(), numel());
  switch (dtype()) {
    case DType::kFloat32: return *data<float>();
    case DType::kFloat64: return *data<double>();
    case DType::kInt64: return static_cast<double>(*data<int64_t>());
    case DType::kBool: return *data<bool>() ? 1.0 : 0.0;
    case DType::kBFloat16: return static_cast<float>(*data<bfloat16>());
  }
  return 0;
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  std::vector<T> out(static_cast<size_t>(numel()));
  auto copy = [&](auto* p) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(p[i]);
  };
  switch (dtype()) {
    case DType::kFloat32: copy(data<float>()); break;
    case DType::kFloat64: copy(data<double>()); break;
    case DType::kInt64: copy(data<int64_t>()); break;
    case DType::kBool: copy(data<bool>()); break;
    case DType::kBFloat16: {
      const bfloat16* p = data<bfloat16>();
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(static_cast<float>(p[i]));
      break;
    }
  }
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<int> Tensor::to_vector<int>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;

Tensor& Tensor::set_requires_grad(bool r) {
  TG_CHECK(is_leaf(), "requires_grad", "can only be set on a leaf tensor; this one was produced by '{}' "
           "(use detach() first)", grad_fn_name());
  TG_CHECK(!r || is_floating(dtype()), "requires_grad", "only float32 and float64 tensors can require "
           "gradients, got {}", dtype());
  impl().requires_grad = r;
  return *this;
}

std::string Tensor::grad_fn_name() const { return impl().grad_fn ? impl().grad_fn->name() : ""; }

Tensor Tensor::grad() const { return Tensor(impl().grad); }

void Tensor::set_grad(const Tensor& g) {
  if (g.defined()) {
    TG_CHECK(g.shape() == shape() && g.dtype() == dtype(), "set_grad",
             "gradient of shape {} ({}) does not match the tensor's shape {} ({})", g.shape(), g.dtype(),
             shape(), dtype());
  }
  impl().grad = g.impl_ptr();
}

void Tensor::zero_grad() { impl().grad.reset(); }

Tensor Tensor::detach() const {
  auto d = make_tensor_impl();
  d->storage = impl().storage;
  d->offset = impl().offset;
  d->shape = impl().shape;
  d->dtype = impl().dtype;
  return Tensor(std::move(d));
}

void Tensor::register_hook(GradHook hook) {
  TG_CHECK(requires_grad(), "register_hook", "cannot register a hook on a tensor that does not require grad");
  if (is_leaf())
    impl().hooks.push_back(std::move(hook));
  else
    impl().grad_fn->pre_hooks().push_back(std::move(hook));
}

void Tensor::register_post_accumulate_grad_hook(PostAccumulateHook hook) {
  TG_CHECK(requires_grad() && is_leaf(), "register_post_accumulate_grad_hook",
           "expected a leaf that requires grad (a parameter), got {}", is_leaf() ? "a leaf without requires_grad" : "a non-leaf");
  impl().post_accumulate_hooks.push_back(std::move(hook));
}

void Tensor::clear_post_accumulate_grad_hooks() { impl().post_accumulate_hooks.clear(); }

}  // namespace tg
