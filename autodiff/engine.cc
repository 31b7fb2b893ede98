// Reverse-mode autodiff over the recorded graph.
//
// 1. Walk the graph from the outputs (iteratively: a chain of a million ops must not overflow
//    the stack) and count, for every node, how many edges of the graph point to it.
// 2. Run nodes when all their consumers have run (Kahn's algorithm); among the ready ones, the
//    most recently created first, so the order is deterministic. Gradients reaching a node are
//    summed before its backward runs; gradients reaching a leaf are accumulated into .grad().
// 3. Unless retain_graph, each node frees its closure and saved tensors right after it ran.
#include "autodiff/engine.h"

#include <queue>

#include <absl/container/flat_hash_map.h>

#include "graph/factory.h"
#include "ops/elementwise.h"

namespace tg {
namespace {

struct Target {  // where tg::grad captures a gradient
  size_t slot;
};

class Engine {
 public:
  Engine(bool retain, bool create, bool accumulate_leaves)
      : retain_(retain || create), create_(create), accumulate_(accumulate_leaves) {}

  // Capture the gradient arriving at a tensor (tg::grad) instead of / besides accumulating it.
  void capture(const Tensor& t, size_t slot) {
    if (t.is_leaf()) leaf_targets_[t.impl_ptr().get()] = slot;
    else node_targets_[t.grad_fn().get()] = slot;
  }
  std::vector<Tensor>& captured() { return captured_; }

  void run(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads, size_t n_targets) {
    captured_.assign(n_targets, Tensor());
    GradModeGuard mode(create_);
    // Discover nodes and count dependencies.
    std::vector<std::shared_ptr<Node>> stack;
    std::vector<size_t> root_leaves;
    for (size_t i = 0; i < roots.size(); ++i) {
      const Tensor& r = roots[i];
      if (r.is_leaf()) {
        if (accumulate_) ++leaf_deps_[r.impl_ptr().get()];
        root_leaves.push_back(i);  // delivered once every edge into the leaves is counted
        continue;
      }
      const auto& n = r.grad_fn();
      accumulate(n.get(), root_grads[i]);
      if (!deps_.contains(n.get())) {
        deps_[n.get()] = 0;
        stack.push_back(n);
      }
    }
    std::vector<std::shared_ptr<Node>> all;  // keeps every node alive until the end
    while (!stack.empty()) {
      std::shared_ptr<Node> n = std::move(stack.back());
      stack.pop_back();
      TG_CHECK(!n->released(), n->name(), "trying to backward through the graph a second time: its saved tensors "
               "were freed by the first backward (pass retain_graph=true to the first one)");
      for (size_t i = 0; i < n->num_inputs(); ++i) {
        const Edge& e = n->edge(i);
        if (e.leaf && accumulate_) ++leaf_deps_[e.leaf.get()];
        if (!e.node) continue;
        auto [it, fresh] = deps_.try_emplace(e.node.get(), 0);
        ++it->second;
        if (fresh) stack.push_back(e.node);
      }
      all.push_back(std::move(n));
    }
    for (size_t i : root_leaves) {
      deliver_to_leaf(roots[i].impl_ptr(), root_grads[i]);
      leaf_done(roots[i].impl_ptr());
    }
    // Execute.
    using Item = std::pair<uint64_t, Node*>;
    std::priority_queue<Item> ready;
    for (const Tensor& r : roots)
      if (!r.is_leaf() && deps_[r.grad_fn().get()] == 0) ready.push({r.grad_fn()->seq(), r.grad_fn().get()});
    absl::flat_hash_map<Node*, bool> queued;
    while (!ready.empty()) {
      Node* n = ready.top().second;
      ready.pop();
      if (queued[n]) continue;
      queued[n] = true;
      Tensor g = std::move(buffer_[n]);
      buffer_.erase(n);
      if (!g.defined()) g = zeros(n->out_shape(), n->out_dtype(), n->out_device());
      // By index over the count taken first: a hook may register another hook.
      for (size_t h = 0, nh = n->pre_hooks().size(); h < nh; ++h) {
        Tensor r = n->pre_hooks()[h](g);
        if (r.defined()) g = r;
      }
      if (auto it = node_targets_.find(n); it != node_targets_.end()) captured_[it->second] = g;
      const bool offered = n->takes_grad_sinks() && offer_sinks(*n);
      Grads grads = n->apply(g, offered ? sinks_.data() : nullptr);
      g = Tensor();
      if (offered) drop_added(grads);
      TG_CHECK(grads.size() == n->num_inputs(), n->name(), "backward returned {} gradients for {} inputs",
               grads.size(), n->num_inputs());
      for (size_t i = 0; i < grads.size(); ++i) {
        const Edge& e = n->edge(i);
        if (!e.defined()) continue;
        if (!grads[i].defined()) {
          if (e.leaf) leaf_done(e.leaf);
          continue;
        }
        const Shape& want = e.node ? e.node->out_shape() : e.leaf->shape;
        TG_CHECK(grads[i].shape() == want, n->name(), "backward produced a gradient of shape {} for input {} of shape {}",
                 grads[i].shape(), i, want);
        const Device there = e.node ? e.node->out_device() : e.leaf->storage ? e.leaf->storage->device() : kCPU;
        TG_CHECK(grads[i].device() == there, n->name(), "backward produced a gradient on {} for input {}, which is on {}",
                 grads[i].device(), i, there);
        if (anomaly_enabled()) check_finite(grads[i], n->name(), "backward");
        if (e.node) accumulate(e.node.get(), std::move(grads[i]));
        else {
          deliver_to_leaf(e.leaf, std::move(grads[i]));
          leaf_done(e.leaf);
        }
      }
      // Make the consumers of this node's inputs ready; then free what the node saved.
      for (size_t i = 0; i < n->num_inputs(); ++i) {
        const Edge& e = n->edge(i);
        if (e.node && --deps_[e.node.get()] == 0) ready.push({e.node->seq(), e.node.get()});
      }
      if (!retain_) n->release();
    }
  }

 private:
  // A gathered gradient the op may add its own into (Node::grad_sink): one nothing else holds, in
  // float32 or float64 (bfloat16 sums stay out of place, as in accumulate()), a leaf's only where
  // its .grad() is on the leaf's device with its shape. Not with create_graph (the sum must stay
  // differentiable) or in anomaly mode (each op's own gradient is checked), not for a leaf with
  // hooks or one tg::grad captures (they see each part), and each sum offered to one input only.
  static bool exclusive(const std::shared_ptr<TensorImpl>& t) {
    return t.use_count() == 1 && t->storage && t->storage.use_count() == 1 && !t->requires_grad &&
           (t->dtype == kFloat32 || t->dtype == kFloat64);
  }
  [[gnu::noinline]] bool offer_sinks(const Node& n) {
    if (create_ || anomaly_enabled()) return false;  // (anomaly mode checks each op's own gradient)
    bool any = false;
    sinks_.assign(n.num_inputs(), Tensor());
    for (size_t i = 0; i < n.num_inputs(); ++i) {
      const Edge& e = n.edge(i);
      Tensor s;
      if (e.node) {
        auto it = buffer_.find(e.node.get());
        if (it != buffer_.end() && it->second.defined() && exclusive(it->second.impl_ptr())) s = it->second;
      } else if (e.leaf && accumulate_ && e.leaf->grad && e.leaf->hooks.empty() && !leaf_targets_.contains(e.leaf.get()) &&
                 exclusive(e.leaf->grad) && e.leaf->storage && e.leaf->grad->storage->device() == e.leaf->storage->device() &&
                 e.leaf->grad->shape == e.leaf->shape) {
        s = Tensor(e.leaf->grad);
      }
      if (!s.defined()) continue;
      for (size_t j = 0; j < i && s.defined(); ++j)
        if (sinks_[j].same(s)) s = Tensor();
      if (s.defined()) any = true;
      sinks_[i] = std::move(s);
    }
    if (!any) sinks_.clear();
    return any;
  }

  // A gradient the op added into the gathered sum itself is served already: dropped (as "none" in
  // run(): a leaf is then done). The sinks go too, so the sums after may still be made in place.
  [[gnu::noinline]] void drop_added(Grads& grads) {
    for (size_t i = 0; i < grads.size() && i < sinks_.size(); ++i)
      if (grads[i].defined() && grads[i].same(sinks_[i])) grads[i] = Tensor();
    sinks_.clear();
  }

  // One more edge into this leaf has been served; after the last one its post-accumulate hooks run.
  void leaf_done(const std::shared_ptr<TensorImpl>& leaf) {
    if (!accumulate_) return;
    auto it = leaf_deps_.find(leaf.get());
    if (it == leaf_deps_.end() || --it->second > 0) return;
    leaf_deps_.erase(it);
    if (!leaf->grad) return;
    Tensor t(leaf);
    for (size_t h = 0, nh = leaf->post_accumulate_hooks.size(); h < nh; ++h) leaf->post_accumulate_hooks[h](t);
  }

  void accumulate(Node* n, Tensor g) {
    Tensor& slot = buffer_[n];
    if (!slot.defined()) {
      slot = std::move(g);
    } else if (!create_ && slot.impl_ptr().use_count() == 1 && slot.impl().storage.use_count() == 1 &&
               slot.shape() == g.shape() && slot.dtype() == g.dtype() && slot.dtype() != kBFloat16) {
      slot.add_(g);  // nothing else holds this sum: added in place (no fresh tensor, no cold pages to fill)
    } else {
      slot = add(slot, g);
    }
  }

  void deliver_to_leaf(const std::shared_ptr<TensorImpl>& leaf, Tensor g) {
    for (size_t h = 0, nh = leaf->hooks.size(); h < nh; ++h) {
      Tensor r = leaf->hooks[h](g);
      if (r.defined()) g = r;
    }
    if (auto it = leaf_targets_.find(leaf.get()); it != leaf_targets_.end()) {
      Tensor& c = captured_[it->second];
      c = c.defined() ? add(c, g) : g;
    }
    if (!accumulate_) return;
    if (!leaf->grad) {
      // Keep the gradient only if nothing else shares its storage (an op may hand the same
      // tensor to two inputs); otherwise copy, so later in-place updates stay private.
      if (!create_) {
        g = g.detach();
        if (g.impl().storage.use_count() > 1) g = clone(g);
      } else if (g.impl_ptr().use_count() > 1) {
        g = clone(g);  // recorded, so still differentiable; never the same tensor as another .grad()
      }
      leaf->grad = g.impl_ptr();
    } else {
      Tensor prev(leaf->grad);
      leaf->grad = add(create_ ? prev : prev.detach(), g).impl_ptr();
    }
  }

  bool retain_, create_, accumulate_;
  absl::flat_hash_map<Node*, int64_t> deps_;
  absl::flat_hash_map<const TensorImpl*, int64_t> leaf_deps_;  // edges into each leaf not yet served
  absl::flat_hash_map<Node*, Tensor> buffer_;
  absl::flat_hash_map<Node*, size_t> node_targets_;
  absl::flat_hash_map<const TensorImpl*, size_t> leaf_targets_;
  std::vector<Tensor> captured_;
  std::vector<Tensor> sinks_;  // offered to the node running now
};

std::vector<Tensor> root_gradients(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                                   const char* op) {
  TG_CHECK(!outputs.empty(), op, "expected at least one output");
  TG_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), op,
           "got {} grad_outputs for {} outputs", grad_outputs.size(), outputs.size());
  std::vector<Tensor> grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& o = outputs[i];
    TG_CHECK(o.defined(), op, "output {} is an undefined tensor", i);
    TG_CHECK(o.requires_grad(), op, "output {} (shape {}) does not require grad and has no grad_fn: no input of the "
             "ops that made it requires grad, or it was made under NoGradGuard", i, o.shape());
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!g.defined()) {
      TG_CHECK(o.numel() == 1, op, "grad can be implicitly created only for one-element outputs; output {} has shape {} "
               "(pass a gradient of that shape, e.g. ones_like)", i, o.shape());
      g = ones(o.shape(), o.dtype(), o.device());  // on the output's device (a GPU loss: a GPU seed)
    }
    TG_CHECK(g.shape() == o.shape(), op, "gradient of shape {} given for output {} of shape {}", g.shape(), i, o.shape());
    grads.push_back(to(g, o.dtype()));
  }
  return grads;
}

}  // namespace

void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs, BackwardOptions opts) {
  std::vector<Tensor> grads = root_gradients(outputs, grad_outputs, "backward");
  Engine e(opts.retain_graph, opts.create_graph, /*accumulate_leaves=*/true);
  e.run(outputs, grads, 0);
}

// Defined here rather than in graph/: accumulating needs the add op.
void Tensor::retain_grad() {
  TG_CHECK(requires_grad(), "retain_grad", "tensor does not require grad");
  if (is_leaf() || impl().retains_grad) return;
  impl().retains_grad = true;
  std::weak_ptr<TensorImpl> weak = impl_ptr();
  impl().grad_fn->pre_hooks().push_back([weak](const Tensor& g) {
    if (auto self = weak.lock()) {
      NoGradGuard ng;
      self->grad = self->grad ? add(Tensor(self->grad), g.detach()).impl_ptr() : g.detach().impl_ptr();
    }
    return Tensor();
  });
}

void Tensor::backward(const Tensor& grad, BackwardOptions opts) const {
  tg::backward({*this}, grad.defined() ? std::vector<Tensor>{grad} : std::vector<Tensor>{}, opts);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, GradOptions opts) {
  std::vector<Tensor> grads = root_gradients(outputs, grad_outputs, "grad");
  Engine e(opts.retain_graph, opts.create_graph, /*accumulate_leaves=*/false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    TG_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "grad", "input {} does not require grad", i);
    e.capture(inputs[i], i);
  }
  e.run(outputs, grads, inputs.size());
  std::vector<Tensor> out = e.captured();
  for (size_t i = 0; i < out.size(); ++i) {
    TG_CHECK(out[i].defined() || opts.allow_unused, "grad", "input {} (shape {}) was not used to compute the outputs "
             "(pass allow_unused=true to get an undefined gradient)", i, inputs[i].shape());
    if (out[i].defined() && !opts.create_graph) out[i] = out[i].detach();
  }
  return out;
}

}  // namespace tg
