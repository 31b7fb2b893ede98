#include "graph/tensor.h"

#include <cmath>
#include <cstring>
#include <string>
#include <string_view>

#include "graph/cuda/runtime.h"
#include "graph/device_memory_internal.h"
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

// "softmax_forward (ops/nn.cc:36)", or "ops/nn.cc:36" where the caller is a lambda: the place a
// CallSite names, with the file's last two components.
std::string caller_name(const CallSite& where) {
  std::string_view file = where.file;
  const size_t slash = file.find_last_of('/');
  if (slash != std::string_view::npos && slash > 0) {
    const size_t parent = file.find_last_of('/', slash - 1);
    file = file.substr(parent == std::string_view::npos ? 0 : parent + 1);
  }
  const std::string_view f = where.function;
  if (f.empty() || f == "operator()") return fmt::format("{}:{}", file, where.line);
  return fmt::format("{} ({}:{})", f, file, where.line);
}

void fail_host_read(const CallSite& where, Device device) {
  fail(caller_name(where), "reads the host memory of a tensor on {}, which it cannot (copy it with .to(tg::kCPU) "
       "first; an op of tapegrad that says this has no GPU path yet)", device);
}
void fail_device_read(const CallSite& where, Device device) {
  fail(caller_name(where), "asks for the GPU pointer of a tensor on {} (move it with .to(tg::Device::cuda()) first)",
       device);
}

Tensor copy_to_device(const Tensor& x, Device to, const char* op) {
  const Device from = x.device();
  for (Device d : {from, to}) {
    if (d.is_cuda()) cuda_rt::use_device(d.index, op);  // no GPU: one line naming op, before allocating
  }
  Tensor out = Tensor::empty(x.shape(), x.dtype(), to);
  const size_t bytes = static_cast<size_t>(x.numel()) * dtype_size(x.dtype());
  const void* src = static_cast<const char*>(x.impl().storage->data()) +
                    x.impl().offset * static_cast<int64_t>(dtype_size(x.dtype()));
  void* dst = out.impl().storage->data();
  if (from.is_cpu() && to.is_cpu()) {
    std::memcpy(dst, src, bytes);
  } else if (from.is_cpu()) {
    cuda_rt::copy_to_device(to.index, dst, src, bytes, op);
  } else if (to.is_cpu()) {
    cuda_rt::copy_to_host(from.index, dst, src, bytes, op);
  } else {
    TG_CHECK(from.index == to.index, op, "copies between two GPUs ({} to {}) are not supported; go through the CPU",
             from, to);
    cuda_rt::copy_on_device(to.index, dst, src, bytes, op);
  }
  return out;
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

Tensor Tensor::empty_on_device(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) TG_CHECK(d >= 0, "empty", "negative dimension {} in shape {}", d, shape);
  auto impl = make_tensor_impl();
  impl->storage = make_storage(static_cast<size_t>(shape.numel()) * dtype_size(dtype), device);
  impl->shape = shape;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

int64_t Tensor::size(int64_t d) const {
  return shape()[normalize_axis(d, dim(), "size")];
}

void* Tensor::raw_data(detail::CallSite where) const {
  if (!device().is_cpu()) [[unlikely]] detail::fail_host_read(where, device());
  return static_cast<char*>(impl().storage->data()) + impl().offset * static_cast<int64_t>(dtype_size(dtype()));
}

double Tensor::item() const {
  TG_CHECK(numel() == 1, "item", "expected a tensor with one element, got shape {} ({} elements)", shape(), numel());
  if (is_cuda()) return detail::copy_to_device(*this, kCPU, "item").item();
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
  if (is_cuda()) return detail::copy_to_device(*this, kCPU, "to_vector").to_vector<T>();
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
