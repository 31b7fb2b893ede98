#include "io/checksum.h"

#include <bit>
#include <cstring>

#include <fmt/format.h>

namespace tg {
namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full, kP3 = 0x165667B19E3779F9ull,
                   kP4 = 0x85EBCA77C2B2AE63ull, kP5 = 0x27D4EB2F165667C5ull;

inline uint64_t read64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // little-endian hosts only (safetensors.cc asserts it)
}
inline uint32_t read32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t round(uint64_t acc, uint64_t input) { return std::rotl(acc + input * kP2, 31) * kP1; }
inline uint64_t merge(uint64_t h, uint64_t v) { return (h ^ round(0, v)) * kP1 + kP4; }

}  // namespace

uint64_t xxh64(const void* data, size_t bytes, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  const unsigned char* const end = p + bytes;
  uint64_t h;
  if (bytes >= 32) {
    // Four independent lanes over 32-byte stripes (the multiplies of one lane overlap the others').
    uint64_t v1 = seed + kP1 + kP2, v2 = seed + kP2, v3 = seed, v4 = seed - kP1;
    const unsigned char* const last_stripe = end - 32;
    do {
      v1 = round(v1, read64(p));
      v2 = round(v2, read64(p + 8));
      v3 = round(v3, read64(p + 16));
      v4 = round(v4, read64(p + 24));
      p += 32;
    } while (p <= last_stripe);
    h = std::rotl(v1, 1) + std::rotl(v2, 7) + std::rotl(v3, 12) + std::rotl(v4, 18);
    h = merge(merge(merge(merge(h, v1), v2), v3), v4);
  } else {
    h = seed + kP5;
  }
  h += static_cast<uint64_t>(bytes);
  for (; p + 8 <= end; p += 8) h = std::rotl(h ^ round(0, read64(p)), 27) * kP1 + kP4;
  if (p + 4 <= end) {
    h = std::rotl(h ^ (static_cast<uint64_t>(read32(p)) * kP1), 23) * kP2 + kP3;
    p += 4;
  }
  for (; p < end; ++p) h = std::rotl(h ^ (*p * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

std::string xxh64_hex(const void* data, size_t bytes) { return fmt::format("{:016x}", xxh64(data, bytes)); }

}  // namespace tg
