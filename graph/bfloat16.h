#pragma once
// bfloat16: the upper 16 bits of a float32 (sign, 8 exponent bits, 7 mantissa bits): float32's
// range with about 3 significant decimal digits. The element type of tg::kBFloat16 tensors.
//
// float32 -> bfloat16 rounds to nearest, ties to even, in software on every path (the hardware
// conversion instructions flush subnormals to zero; this never does): ±Inf and signed zeros are
// kept, subnormals round like any other number, finite values that round past the largest
// bfloat16 (3.3895e38) become ±Inf, and a NaN stays a quiet NaN with its sign and upper payload
// bits (as vcvtneps2bf16 keeps them; PyTorch writes 0x7FC0 for every NaN on its scalar path).
// bfloat16 -> float32 is exact.
#include <bit>
#include <cstdint>

namespace tg {

struct bfloat16 {
  uint16_t bits = 0;

  bfloat16() = default;
  explicit bfloat16(float f) : bits(round_bits(f)) {}
  explicit operator float() const { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }
  static bfloat16 from_bits(uint16_t b) {
    bfloat16 x;
    x.bits = b;
    return x;
  }

  static constexpr uint16_t round_bits(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN: quiet, sign kept
    return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  }
};
static_assert(sizeof(bfloat16) == 2);

}  // namespace tg
