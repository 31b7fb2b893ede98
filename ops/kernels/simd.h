#pragma once
// xsimd, as every kernel includes it, with the few names that changed between the versions
// tapegrad builds with: Debian 12's xsimd 8.1 and Ubuntu 24.04's 12.1 (hadd became reduce_add in
// 9.0; bitwise_cast takes the element type since 11.0; aligned_allocator lost its default
// alignment in 11.1). Kernels write tg::kernels::hsum, bitcast and AlignedAllocator.
#include <cstddef>

#include <xsimd/xsimd.hpp>

namespace tg::kernels {

// The sum of a batch's lanes. The order of the additions is xsimd's and may differ between its
// versions (results then differ in the last bits, never between runs of one build).
template <class T, class A>
inline T hsum(const xsimd::batch<T, A>& v) noexcept {
#if XSIMD_VERSION_MAJOR >= 9
  return xsimd::reduce_add(v);
#else
  return xsimd::hadd(v);
#endif
}

// The same bits as another batch type of the same width: bitcast<xsimd::batch<int32_t>>(floats).
template <class To, class T, class A>
inline To bitcast(const xsimd::batch<T, A>& v) noexcept {
#if XSIMD_VERSION_MAJOR >= 11
  return xsimd::bitwise_cast<typename To::value_type>(v);
#else
  return xsimd::bitwise_cast<To>(v);
#endif
}

// An allocator whose blocks are aligned for the default batch (std::vector<float, AlignedAllocator<float>>).
template <class T>
using AlignedAllocator = xsimd::aligned_allocator<T, xsimd::default_arch::alignment()>;

}  // namespace tg::kernels
