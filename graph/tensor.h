#pragma once
// Tensor: a handle to (storage, offset, shape, dtype) plus what autodiff needs (requires_grad,
// grad, the node that produced it). Copying a Tensor copies the handle, not the data.
//
// Every tensor is contiguous and row-major: movement ops other than reshape/view produce copies,
// so every kernel walks plain arrays. reshape/view/flatten/squeeze/unsqueeze share storage.
//
// A tensor lives on a device (graph/device.h): the CPU or a GPU. data<T>() reads the host copy and
// refuses a GPU tensor, naming the function that asked; cuda_data<T>() is a GPU tensor's pointer.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "error.h"
#include "shape.h"
#include "storage.h"

namespace tg {

class Node;
class Tensor;

namespace detail {
// Where a call came from, for error messages: a defaulted argument of this type records its
// caller's function, file and line (the compilers' builtins, which std::source_location needs but
// Clang 14 with libstdc++ 12 lacks; nested in a default argument they still name the outer call).
struct CallSite {
  const char* function = "";
  const char* file = "";
  unsigned line = 0;
  static constexpr CallSite current(const char* function = __builtin_FUNCTION(), const char* file = __builtin_FILE(),
                                    unsigned line = __builtin_LINE()) {
    return {function, file, line};
  }
};

// The errors of the inline accessors below, out of line: checking a format string in every user
// file that includes this header would cost compile time.
[[noreturn]] void fail_undefined_tensor();
[[noreturn]] void fail_wrong_dtype(DType have, DType want);
[[noreturn]] void fail_unsupported_dtype(const char* op, DType d);
[[noreturn]] void fail_host_read(const CallSite& where, Device device);
[[noreturn]] void fail_device_read(const CallSite& where, Device device);
}  // namespace detail

struct TensorImpl;

// A gradient hook: receives the gradient, returns a replacement or an undefined Tensor to keep it.
using GradHook = std::function<Tensor(const Tensor&)>;
// Runs once a leaf's .grad() holds every contribution of the current backward (receives the leaf).
using PostAccumulateHook = std::function<void(const Tensor&)>;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  DType dtype = DType::kFloat32;
  bool requires_grad = false;
  bool retains_grad = false;
  std::shared_ptr<Node> grad_fn;        // null for leaves
  std::shared_ptr<TensorImpl> grad;     // accumulated gradient of a leaf (or retained)
  std::vector<GradHook> hooks;          // hooks of a leaf (non-leaf hooks live on grad_fn)
  std::vector<PostAccumulateHook> post_accumulate_hooks;  // a leaf's, after its gradient is complete
};

// A fresh TensorImpl from the small-object pool (graph/pool.h).
std::shared_ptr<TensorImpl> make_tensor_impl();

struct BackwardOptions {
  bool retain_graph = false;
  bool create_graph = false;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // A fresh, uninitialised contiguous tensor.
  static Tensor empty(const Shape& shape, DType dtype = kFloat32);
  static Tensor empty(const Shape& shape, DType dtype, Device device) {
    return device.is_cpu() ? empty(shape, dtype) : empty_on_device(shape, dtype, device);
  }

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  int64_t dim() const { return shape().rank(); }
  int64_t size(int64_t d) const;
  int64_t numel() const { return shape().numel(); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  bool is_cuda() const { return device().is_cuda(); }

  // Raw element access (checked dtype). The pointer already includes the view's offset. data<T>()
  // and raw_data() are host memory: on a GPU tensor they throw, naming the function that asked.
  template <class T> T* data(detail::CallSite where = detail::CallSite::current()) const;
  void* raw_data(detail::CallSite where = detail::CallSite::current()) const;
  // A GPU tensor's device pointer, for kernels of your own (graph/cuda.h: stream()); throws on a
  // CPU tensor.
  template <class T> T* cuda_data(detail::CallSite where = detail::CallSite::current()) const;
  // Copies to the host where the tensor is on a GPU (waiting for the work queued before).
  double item() const;                 // a one-element tensor's value, as double
  template <class T> T item() const { return static_cast<T>(item()); }
  template <class T> std::vector<T> to_vector() const;  // converts from any dtype

  // Autodiff.
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& set_requires_grad(bool r = true);   // leaves only
  Tensor& requires_grad_(bool r = true) { return set_requires_grad(r); }
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  const std::shared_ptr<Node>& grad_fn() const { return impl().grad_fn; }
  std::string grad_fn_name() const;            // "mul", "matmul", ... or "" for a leaf
  Tensor grad() const;                         // undefined until a backward reaches it
  void set_grad(const Tensor& g);
  void zero_grad();                            // drops the gradient (as set_to_none=True)
  Tensor detach() const;                       // same storage, no history
  void retain_grad();                          // keep .grad() on a non-leaf
  void register_hook(GradHook hook);
  // A leaf's hook that runs when backward has accumulated the last contribution to .grad() (as
  // torch's register_post_accumulate_grad_hook): where data-parallel training all-reduces a
  // gradient while the rest of backward still runs. Tied weights run it once, with the full sum.
  void register_post_accumulate_grad_hook(PostAccumulateHook hook);
  void clear_post_accumulate_grad_hooks();
  void backward(const Tensor& grad = Tensor(), BackwardOptions opts = {}) const;  // autodiff/engine.cc

  // In-place updates (for optimizers), allowed on leaves under NoGradGuard or on tensors that
  // do not require grad: self += alpha * other (other broadcasts to self), self *= s, self = v.
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& mul_(double s);
  Tensor& fill_(double v);
  Tensor& copy_(const Tensor& src);

  // Convenience forms of ops (ops/*.cc).
  Tensor reshape(const Shape& s) const;
  Tensor view(const Shape& s) const;
  Tensor flatten() const;
  Tensor permute(const Shape& order) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;
  Tensor squeeze(int64_t d) const;
  Tensor unsqueeze(int64_t d) const;
  Tensor expand(const Shape& s) const;
  Tensor slice(int64_t d, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t d, int64_t start, int64_t length) const;
  Tensor sum() const;
  Tensor sum(std::initializer_list<int64_t> axes, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(std::initializer_list<int64_t> axes, bool keepdim = false) const;
  Tensor to(DType d) const;
  // A copy on `device` (this tensor itself when it is there already); gradients flow back to this
  // device. The one way a tensor changes device: no op copies behind your back.
  Tensor to(Device device) const;
  Tensor clone() const;
  Tensor contiguous() const { return *this; }

  TensorImpl& impl() const {
    if (!impl_) [[unlikely]] detail::fail_undefined_tensor();
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  static Tensor empty_on_device(const Shape& shape, DType dtype, Device device);
  std::shared_ptr<TensorImpl> impl_;
};

template <class T>
T* Tensor::data(detail::CallSite where) const {
  if (dtype() != dtype_of<T>()) [[unlikely]] detail::fail_wrong_dtype(dtype(), dtype_of<T>());
  const Storage& s = *impl().storage;
  if (!s.device().is_cpu()) [[unlikely]] detail::fail_host_read(where, s.device());
  return static_cast<T*>(s.data()) + impl().offset;
}

template <class T>
T* Tensor::cuda_data(detail::CallSite where) const {
  if (dtype() != dtype_of<T>()) [[unlikely]] detail::fail_wrong_dtype(dtype(), dtype_of<T>());
  const Storage& s = *impl().storage;
  if (!s.device().is_cuda()) [[unlikely]] detail::fail_device_read(where, s.device());
  return static_cast<T*>(s.data()) + impl().offset;
}

// Calls f with a typed null pointer for the dtype: DISPATCH_FLOAT(t.dtype(), "op", [&](auto tag) {
// using T = decltype(tag); ... }). Float32 and Float64 only; anything else is an error naming op.
template <class F>
decltype(auto) dispatch_float(DType d, const char* op, F&& f) {
  switch (d) {
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: return f(double{});
    default: break;
  }
  detail::fail_unsupported_dtype(op, d);
}

}  // namespace tg
