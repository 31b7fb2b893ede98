#include "graph/format.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "graph/device_memory_internal.h"

namespace tg {
namespace {

constexpr int64_t kElideAbove = 1000;
constexpr int64_t kEdge = 3;

struct Printer {
  const Tensor& t;
  bool elide;
  std::vector<double> vals;  // as double, for choosing the format
  std::string fmt_kind;      // "int", "fixed", "sci", "bool", "i64"
  size_t width = 0;

  double at(int64_t i) const {
    switch (t.dtype()) {
      case DType::kFloat32: return t.data<float>()[i];
      case DType::kFloat64: return t.data<double>()[i];
      case DType::kInt64: return static_cast<double>(t.data<int64_t>()[i]);
      case DType::kBool: return t.data<bool>()[i];
      case DType::kBFloat16: return static_cast<float>(t.data<bfloat16>()[i]);
    }
    return 0;
  }
  std::string one(int64_t i) const {
    if (t.dtype() == DType::kBool) return t.data<bool>()[i] ? "true" : "false";
    if (t.dtype() == DType::kInt64) return fmt::format("{}", t.data<int64_t>()[i]);
    double v = at(i);
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (fmt_kind == "int") return fmt::format("{:.0f}.", v);
    if (fmt_kind == "sci") return fmt::format("{:.4e}", v);
    return fmt::format("{:.4f}", v);
  }
  // Visits the indices that will be shown.
  template <class F>
  void visit(int64_t dim, int64_t base, F&& f) const {
    const Shape& s = t.shape();
    if (dim == s.rank()) { f(base); return; }
    int64_t stride = 1;
    for (int64_t d = dim + 1; d < s.rank(); ++d) stride *= s[d];
    for (int64_t i = 0; i < s[dim]; ++i) {
      if (elide && s[dim] > 2 * kEdge && i == kEdge) i = s[dim] - kEdge;
      visit(dim + 1, base + i * stride, f);
    }
  }
  void choose() {
    if (!is_floating(t.dtype())) return;
    bool all_int = true;
    double max_abs = 0, min_abs = INFINITY;
    visit(0, 0, [&](int64_t i) {
      double v = at(i);
      if (!std::isfinite(v)) return;
      if (v != std::floor(v)) all_int = false;
      max_abs = std::max(max_abs, std::fabs(v));
      if (v != 0) min_abs = std::min(min_abs, std::fabs(v));
    });
    if (all_int && max_abs < 1e8) fmt_kind = "int";
    else if (max_abs >= 1e8 || (min_abs < 1e-4 && min_abs != INFINITY) || max_abs / min_abs > 1e6) fmt_kind = "sci";
    else fmt_kind = "fixed";
  }
  void body(std::string& out, int64_t dim, int64_t base, int indent) const {
    const Shape& s = t.shape();
    if (dim == s.rank()) {
      std::string v = one(base);
      out.append(width > v.size() ? width - v.size() : 0, ' ');
      out += v;
      return;
    }
    int64_t stride = 1;
    for (int64_t d = dim + 1; d < s.rank(); ++d) stride *= s[d];
    out += '[';
    for (int64_t i = 0; i < s[dim]; ++i) {
      if (i > 0) {
        out += ',';
        if (dim == s.rank() - 1) out += ' ';
        else {
          out.append(static_cast<size_t>(s.rank() - dim - 1), '\n');
          out.append(static_cast<size_t>(indent + dim + 1), ' ');
        }
      }
      if (elide && s[dim] > 2 * kEdge && i == kEdge) {
        out += "...";
        i = s[dim] - kEdge - 1;
        continue;
      }
      body(out, dim + 1, base + i * stride, indent);
    }
    out += ']';
  }
};

}  // namespace

std::string to_string(const Tensor& t) {
  if (!t.defined()) return "tensor(undefined)";
  // A GPU tensor prints from a host copy of its values (as PyTorch's does), and says where it is.
  const Tensor host = t.is_cuda() ? detail::copy_to_device(t, kCPU, "print") : t;
  Printer p{host, t.numel() > kElideAbove, {}, "", 0};
  p.choose();
  p.visit(0, 0, [&](int64_t i) { p.width = std::max(p.width, p.one(i).size()); });
  std::string out = "tensor(";
  if (t.numel() == 0) out += "[]";
  else p.body(out, 0, 0, 7);
  bool extra = false;
  if (t.dim() > 0 && t.numel() == 0) { out += fmt::format(", size={}", t.shape()); extra = true; }
  if (t.is_cuda()) out += fmt::format(", device='{}'", t.device());
  if (t.dtype() != kFloat32 && t.dtype() != kInt64) out += fmt::format(", dtype={}", t.dtype());
  if (t.requires_grad()) {
    if (!t.is_leaf()) out += fmt::format(", grad_fn=<{}>", t.grad_fn_name());
    else out += ", requires_grad=true";
  }
  (void)extra;
  return out + ")";
}

}  // namespace tg
