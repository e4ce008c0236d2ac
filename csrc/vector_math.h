// Small vector-math helpers shared by the core's hot loops: clones of a function for wider
// vector units, and a branch-free exponential the compiler vectorizes.
#pragma once

#include <cstdint>
#include <cstring>

// On x86-64 with GCC, copies for AVX2 + FMA and AVX-512 machines, picked at load time (ifunc):
// two and four times the vector width of the baseline build. Not under ThreadSanitizer: the
// ifunc resolver runs while the program is relocated, before the TSan runtime is initialised,
// and the instrumented resolver crashes there (`make tsan`).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#define DL_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DL_VECTOR_CLONES
#endif

namespace dl {

// exp(x) for x <= 0: exp(x) = 2^n exp(f) with n = round(x / ln 2) and |f| <= ln(2) / 2, exp(f)
// by its degree-7 Taylor polynomial (truncation below 1e-8). Arguments below -87 (-inf included)
// give about 1e-38 instead of less: in a sum that is >= 1 that is nothing. No branch, so the
// compiler vectorizes a loop of these.
inline float ExpNonPositive(float x) {
  // Written so that NaN (from an invalid logit, reported by the caller) becomes -87 and nothing
  // positive gets through: the int conversion and the shift below stay defined for any input.
  const float low = x >= -87.0f ? x : -87.0f;
  const float clamped = low <= 0.0f ? low : 0.0f;
  // Round to nearest by adding 1.5 * 2^23: the float's rounding does it.
  const float n = (clamped * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float f = (clamped - n * 0.693145751953125f) - n * 1.428606765330187e-6f;
  float p = 1.0f / 5040;
  p = p * f + 1.0f / 720;
  p = p * f + 1.0f / 120;
  p = p * f + 1.0f / 24;
  p = p * f + 1.0f / 6;
  p = p * f + 0.5f;
  p = p * f + 1.0f;
  p = p * f + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // n >= -126: a normal 2^n
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

}  // namespace dl
