#pragma once
// The recorded graph. Every op whose inputs require grad (and grad mode is on) records one Node:
// its name, edges to the nodes (or leaves) that produced its inputs, and a backward function
// that maps the gradient of its output to gradients of its inputs. Saved tensors live inside the
// backward closure; the output, when backward needs it, is saved by the node itself (to avoid a
// reference cycle output -> node -> output).
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

#include "small_vector.h"
#include "tensor.h"

namespace tg {

// The gradients a backward function returns, one per input (undefined where not needed).
using Grads = SmallVector<Tensor, 3>;

// A read-only view of the tensors an op records as its inputs: `{a, b}`, a std::vector<Tensor> or
// Grads. It does not own them; it lives for the duration of the call it is passed to.
class TensorList {
 public:
  TensorList(std::initializer_list<Tensor> l) : TensorList(l.begin(), l.size()) {}
  TensorList(const std::vector<Tensor>& v) : data_(v.data()), size_(v.size()) {}
  template <size_t N>
  TensorList(const SmallVector<Tensor, N>& v) : data_(v.data()), size_(v.size()) {}
  TensorList(const Tensor* data, size_t size) : data_(data), size_(size) {}
  const Tensor* begin() const { return data_; }
  const Tensor* end() const { return data_ + size_; }
  const Tensor& operator[](size_t i) const { return data_[i]; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  const Tensor* data_;
  size_t size_;
};
class Node;

// A backward function: Grads(const Tensor& grad, const Node& node), where grad is the gradient of
// the op's output and node gives needs(i) and the saved output(). Like a move-only std::function,
// but a closure of up to kInlineBytes lives inside it (and so inside the node): recording an op
// allocates nothing for its closure.
class BackwardFn {
 public:
  static constexpr size_t kInlineBytes = 128;
  BackwardFn() = default;
  BackwardFn(std::nullptr_t) {}
  template <class F, class D = std::decay_t<F>,
            class = std::enable_if_t<!std::is_same_v<D, BackwardFn> && !std::is_same_v<D, std::nullptr_t>>>
  BackwardFn(F&& f) {
    if constexpr (sizeof(D) <= kInlineBytes && alignof(D) <= alignof(std::max_align_t) &&
                  std::is_nothrow_move_constructible_v<D>) {
      new (buf_) D(std::forward<F>(f));
      ops_ = &kInline<D>;
    } else {
      *reinterpret_cast<D**>(buf_) = new D(std::forward<F>(f));
      ops_ = &kHeap<D>;
    }
  }
  BackwardFn(BackwardFn&& o) noexcept : ops_(o.ops_) {
    if (ops_) ops_->move(o.buf_, buf_);
    o.ops_ = nullptr;
  }
  BackwardFn& operator=(BackwardFn&& o) noexcept {
    if (this != &o) {
      BackwardFn incoming(std::move(o));  // out of `o` first: our closure might own `o`
      reset();
      ops_ = incoming.ops_;
      if (ops_) ops_->move(incoming.buf_, buf_);
      incoming.ops_ = nullptr;
    }
    return *this;
  }
  BackwardFn& operator=(std::nullptr_t) noexcept {
    reset();
    return *this;
  }
  BackwardFn(const BackwardFn&) = delete;
  BackwardFn& operator=(const BackwardFn&) = delete;
  ~BackwardFn() { reset(); }
  explicit operator bool() const { return ops_ != nullptr; }
  Grads operator()(const Tensor& g, const Node& n) const { return ops_->call(buf_, g, n); }

 private:
  struct Ops {
    Grads (*call)(const unsigned char*, const Tensor&, const Node&);
    void (*move)(unsigned char* from, unsigned char* to);  // leaves `from` destroyed
    void (*destroy)(unsigned char*);
  };
  template <class D>
  static constexpr Ops kInline = {
      [](const unsigned char* b, const Tensor& g, const Node& n) { return (*std::launder(reinterpret_cast<const D*>(b)))(g, n); },
      [](unsigned char* from, unsigned char* to) {
        D* f = std::launder(reinterpret_cast<D*>(from));
        new (to) D(std::move(*f));
        f->~D();
      },
      [](unsigned char* b) { std::launder(reinterpret_cast<D*>(b))->~D(); }};
  template <class D>
  static constexpr Ops kHeap = {
      [](const unsigned char* b, const Tensor& g, const Node& n) { return (**reinterpret_cast<D* const*>(b))(g, n); },
      [](unsigned char* from, unsigned char* to) { *reinterpret_cast<D**>(to) = *reinterpret_cast<D**>(from); },
      [](unsigned char* b) { delete *reinterpret_cast<D**>(b); }};
  void reset() noexcept {
    if (ops_) {
      const Ops* ops = ops_;
      ops_ = nullptr;
      ops->destroy(buf_);
    }
  }

  alignas(std::max_align_t) unsigned char buf_[kInlineBytes];
  const Ops* ops_ = nullptr;
};

struct Edge {
  std::shared_ptr<Node> node;        // the input came from this op ...
  std::shared_ptr<TensorImpl> leaf;  // ... or is this leaf that requires grad
  bool defined() const { return node || leaf; }
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node(const char* name, BackwardFn fn) : name_(name), fn_(std::move(fn)), seq_(next_seq()) {}
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const char* name() const { return name_; }
  uint64_t seq() const { return seq_; }
  size_t num_inputs() const { return edges_.size(); }
  bool needs(size_t i) const { return i < edges_.size() && edges_[i].defined(); }
  const Edge& edge(size_t i) const { return edges_[i]; }
  const Shape& out_shape() const { return out_shape_; }
  DType out_dtype() const { return out_dtype_; }
  Device out_device() const { return out_device_; }
  // The op's output, with this node as its grad_fn (so a create_graph backward differentiates it).
  Tensor output() const;
  bool released() const { return released_; }
  // During this node's backward, for an op that asked with take_grad_sinks() when it recorded:
  // the gradient already gathered for input i (another consumer's, or the leaf's .grad()) when the
  // engine lets the op add its own into it in place — nothing else holds it, no hook or tg::grad
  // must see the parts, no create_graph. Undefined otherwise. A backward that adds into it (a
  // product with beta = 1, say) bumps its version and returns that same tensor as input i's
  // gradient; any other gradient is summed as usual.
  Tensor grad_sink(size_t i) const { return sinks_ != nullptr && i < edges_.size() ? sinks_[i] : Tensor(); }
  void take_grad_sinks() { takes_sinks_ = true; }
  bool takes_grad_sinks() const { return takes_sinks_; }

  // Engine interface (autodiff/engine.cc); sinks: num_inputs() tensors (see grad_sink) or null.
  Grads apply(const Tensor& grad, const Tensor* sinks = nullptr);
  void release();  // frees the closure, saved tensors and edges after a non-retaining backward
  std::vector<GradHook>& pre_hooks() { return pre_hooks_; }

 private:
  friend Tensor record_node(const char*, Tensor, TensorList, BackwardFn, bool);
  static uint64_t next_seq();

  const char* name_;
  BackwardFn fn_;
  uint64_t seq_;
  SmallVector<Edge, 2> edges_;
  Shape out_shape_;
  DType out_dtype_ = DType::kFloat32;
  Device out_device_ = kCPU;
  std::shared_ptr<Storage> saved_out_;
  int64_t saved_out_offset_ = 0;
  std::vector<GradHook> pre_hooks_;
  const Tensor* sinks_ = nullptr;  // set only while apply() runs
  bool takes_sinks_ = false;
  bool released_ = false;
};

// Grad mode (thread-local): when off, ops record nothing.
bool grad_enabled();
void set_grad_enabled(bool on);
class NoGradGuard {
 public:
  NoGradGuard() : prev_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
 private:
  bool prev_;
};
class GradModeGuard {
 public:
  explicit GradModeGuard(bool on) : prev_(grad_enabled()) { set_grad_enabled(on); }
  ~GradModeGuard() { set_grad_enabled(prev_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;
 private:
  bool prev_;
};

// Anomaly mode (global): every op's output and every backward's gradients are checked for
// NaN/Inf, and the first op that produced one is named in a tg::Error.
bool anomaly_enabled();
void set_anomaly_enabled(bool on);
class AnomalyGuard {
 public:
  explicit AnomalyGuard(bool on = true) : prev_(anomaly_enabled()) { set_anomaly_enabled(on); }
  ~AnomalyGuard() { set_anomaly_enabled(prev_); }
  AnomalyGuard(const AnomalyGuard&) = delete;
  AnomalyGuard& operator=(const AnomalyGuard&) = delete;
 private:
  bool prev_;
};
// The op whose backward is running on this thread (null outside backward): anomaly reports
// charge a NaN made inside a backward formula to that op.
const char* current_backward_op();
void set_current_backward_op(const char* op);
// Throws naming `what` when t (floating) holds a NaN or Inf.
void check_finite(const Tensor& t, const char* op, const char* what);

// True when grad mode is on and any input requires grad.
inline bool needs_record(TensorList inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

// Attaches a node to `out` (when needed) and returns it. This is the one place every op,
// library or user-defined, goes through: custom ops call it exactly as the built-ins do.
Tensor record_node(const char* op, Tensor out, TensorList inputs, BackwardFn fn,
                   bool save_output);

template <class F>
Tensor record(const char* op, Tensor out, TensorList inputs, F&& backward,
              bool save_output = false) {
  if (anomaly_enabled()) check_finite(out, op, "forward");
  if (!needs_record(inputs)) return out;
  return record_node(op, std::move(out), inputs, BackwardFn(std::forward<F>(backward)), save_output);
}

}  // namespace tg
