#include "graph/node.h"

#include "graph/device_memory_internal.h"
#include "graph/pool.h"

#include <atomic>
#include <cmath>
#include <vector>

namespace tg {
namespace {
thread_local bool t_grad_enabled = true;
thread_local const char* t_backward_op = nullptr;
std::atomic<bool> g_anomaly{false};
std::atomic<uint64_t> g_seq{0};

// Destroying a long chain of nodes would recurse once per node (node -> edge -> node ...), and a
// chain of a million ops would overflow the stack. The outermost ~Node on a thread drains a queue
// instead: nested destructors move what they own into it and return.
struct Deferred {
  BackwardFn fn;
  SmallVector<Edge, 2> edges;
  std::vector<GradHook> hooks;
};
thread_local std::vector<Deferred>* t_teardown = nullptr;
}  // namespace

bool grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool on) { t_grad_enabled = on; }
const char* current_backward_op() { return t_backward_op; }
void set_current_backward_op(const char* op) { t_backward_op = op; }
bool anomaly_enabled() { return g_anomaly.load(std::memory_order_relaxed); }
void set_anomaly_enabled(bool on) { g_anomaly.store(on); }

uint64_t Node::next_seq() { return g_seq.fetch_add(1, std::memory_order_relaxed); }

Node::~Node() {
  if (t_teardown) {
    t_teardown->push_back({std::move(fn_), std::move(edges_), std::move(pre_hooks_)});
    return;
  }
  std::vector<Deferred> queue;
  t_teardown = &queue;
  {
    Deferred mine{std::move(fn_), std::move(edges_), std::move(pre_hooks_)};
  }
  while (!queue.empty()) {
    Deferred d = std::move(queue.back());
    queue.pop_back();
  }
  t_teardown = nullptr;
}

Tensor Node::output() const {
  TG_CHECK(saved_out_, name_, "backward asked for the op's output, which was not saved "
           "(or was freed by an earlier backward; pass retain_graph=true to backward twice)");
  auto impl = make_tensor_impl();
  impl->storage = saved_out_;
  impl->offset = saved_out_offset_;
  impl->shape = out_shape_;
  impl->dtype = out_dtype_;
  impl->requires_grad = true;
  impl->grad_fn = std::const_pointer_cast<Node>(shared_from_this());
  return Tensor(std::move(impl));
}

Grads Node::apply(const Tensor& grad, const Tensor* sinks) {
  TG_CHECK(!released_, name_, "trying to backward through the graph a second time: its saved tensors "
           "were freed by the first backward (pass retain_graph=true to the first one)");
  struct Scope {
    const char* prev;
    explicit Scope(const char* op) : prev(current_backward_op()) { set_current_backward_op(op); }
    ~Scope() { set_current_backward_op(prev); }
  } scope(name_);
  if (sinks == nullptr) return fn_(grad, *this);
  struct Sinks {
    Node& n;
    Sinks(Node& node, const Tensor* s) : n(node) { n.sinks_ = s; }
    ~Sinks() { n.sinks_ = nullptr; }
  } offered(*this, sinks);
  return fn_(grad, *this);
}

void Node::release() {
  released_ = true;
  fn_ = nullptr;
  saved_out_.reset();
  edges_.clear();
}

void check_finite(const Tensor& t0, const char* op, const char* what) {
  if (!t0.defined() || !is_floating(t0.dtype())) return;
  // A GPU tensor is read through a copy (anomaly mode waits for the GPU at every op: a debugging mode).
  const Tensor t = t0.is_cuda() ? detail::copy_to_device(t0, kCPU, "anomaly") : t0;
  dispatch_float(t.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (!std::isfinite(p[i])) {
        const char* bw = current_backward_op();
        if (bw && std::string_view(what) == "forward")
          detail::fail("anomaly", "backward of '{}' produced {} (in its '{}' step, at flat index {} of a tensor of shape {})",
                       bw, std::isnan(p[i]) ? "NaN" : "Inf", op, i, t.shape());
        detail::fail("anomaly", "{} of '{}' produced {} (at flat index {} of a tensor of shape {})", what, op,
                     std::isnan(p[i]) ? "NaN" : "Inf", i, t.shape());
      }
    }
  });
}

Tensor record_node(const char* op, Tensor out, TensorList inputs, BackwardFn fn,
                   bool save_output) {
  auto node = std::allocate_shared<Node>(detail::PoolAllocator<Node>{}, op, std::move(fn));
  node->edges_.reserve(inputs.size());
  for (const Tensor& in : inputs) {
    Edge e;
    if (in.defined() && in.requires_grad()) {
      if (in.grad_fn())
        e.node = in.grad_fn();
      else
        e.leaf = in.impl_ptr();
    }
    node->edges_.push_back(std::move(e));
  }
  TensorImpl& o = out.impl();
  node->out_shape_ = o.shape;
  node->out_dtype_ = o.dtype;
  if (o.storage) node->out_device_ = o.storage->device();
  if (save_output) {
    node->saved_out_ = o.storage;
    node->saved_out_offset_ = o.offset;
  }
  // `out` may alias an input's impl only if the op returned its input; give it its own impl.
  for (const Tensor& in : inputs)
    if (in.same(out)) { out = out.detach(); break; }
  out.impl().requires_grad = true;
  out.impl().grad_fn = std::move(node);
  return out;
}

}  // namespace tg
