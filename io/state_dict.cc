#include "io/state_dict.h"

#include <cstring>

#include "graph/device_memory_internal.h"

namespace tg {

void StateDict::insert(std::string name, Tensor t) {
  TG_CHECK(!contains(name), "state_dict", "duplicate entry '{}'", name);
  index_.emplace(name, items_.size());
  items_.emplace_back(std::move(name), std::move(t));
}

const Tensor& StateDict::at(const std::string& name) const {
  auto it = index_.find(name);
  TG_CHECK(it != index_.end(), "state_dict", "no entry named '{}'", name);
  return items_[it->second].second;
}

namespace {

// The bits of an IEEE value with every exponent bit set: infinity or NaN. The first pass only
// ORs a flag (vectorizes); the index is looked for when there is one.
template <typename Bits>
int64_t first_all_ones_exponent(const void* data, int64_t n, Bits exponent) {
  const auto* p = static_cast<const Bits*>(data);
  bool any = false;
  for (int64_t i = 0; i < n; ++i) any |= (p[i] & exponent) == exponent;
  if (!any) return -1;
  for (int64_t i = 0; i < n; ++i)
    if ((p[i] & exponent) == exponent) return i;
  return -1;
}

}  // namespace

int64_t first_non_finite(const Tensor& t) {
  if (!t.defined()) return -1;
  if (t.is_cuda()) return first_non_finite(detail::copy_to_device(t, kCPU, "check_finite"));  // read on the host
  const Tensor c = t.contiguous();
  switch (c.dtype()) {
    case DType::kFloat32: return first_all_ones_exponent<uint32_t>(c.raw_data(), c.numel(), 0x7f800000u);
    case DType::kFloat64: return first_all_ones_exponent<uint64_t>(c.raw_data(), c.numel(), 0x7ff0000000000000ull);
    case DType::kBFloat16: return first_all_ones_exponent<uint16_t>(c.raw_data(), c.numel(), 0x7f80u);
    default: return -1;
  }
}

std::string non_finite_name(const Tensor& t, int64_t index) {
  if (t.is_cuda()) return non_finite_name(detail::copy_to_device(t, kCPU, "check_finite"), index);
  const Tensor c = t.contiguous();
  const size_t bytes = dtype_size(c.dtype());
  const auto* p = static_cast<const unsigned char*>(c.raw_data()) + static_cast<size_t>(index) * bytes;
  uint64_t bits = 0;
  std::memcpy(&bits, p, bytes);
  const int exp_bits = c.dtype() == DType::kFloat64 ? 11 : 8, value_bits = static_cast<int>(bytes) * 8;
  const uint64_t mantissa = bits & ((uint64_t{1} << (value_bits - 1 - exp_bits)) - 1);
  const bool negative = (bits >> (value_bits - 1)) & 1;
  return mantissa != 0 ? "NaN" : negative ? "-Inf" : "Inf";
}

}  // namespace tg
