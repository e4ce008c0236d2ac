// 64-bit mixing shared by the core's hash tables and its random stream.
//
// Mix64 is the splitmix64 finaliser: a bijection on 64-bit words with full avalanche, cheap
// enough for every hash-table probe. Deterministic across platforms (part of the binary LM
// format's key layout and of the sampler's reproducible stream: do not change).
#pragma once

#include <cstdint>

namespace dl {

inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

}  // namespace dl
