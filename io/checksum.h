#pragma once
// xxHash64 (XXH64, Yann Collet's specification, seed 0 by default): the per-tensor checksum our
// safetensors writers record and our loaders verify. Fast (several GB/s a core), not
// cryptographic: it catches flipped bytes and truncation, not a deliberate forgery.
#include <cstddef>
#include <cstdint>
#include <string>

namespace tg {

uint64_t xxh64(const void* data, size_t bytes, uint64_t seed = 0);
// 16 lower-case hex digits, as xxhsum prints it.
std::string xxh64_hex(const void* data, size_t bytes);

}  // namespace tg
