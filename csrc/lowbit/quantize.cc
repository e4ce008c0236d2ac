#include "lowbit/quantize.h"

#include <cmath>

#include "lowbit/kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define DL_QUANTIZE_AVX512 1
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's _mm512_undefined_* (matmul_avx512.cc)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace dl::lowbit {

namespace {

constexpr int kRunOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// The reference: one group of 32 columns, as quantize.h says.
[[maybe_unused]] void QuantizeGroup(const uint16_t* x, int8_t* codes, float* scale,
                                    float* scaled_sum) {
  float value[kGroup], largest = 0.0f;
  for (int c = 0; c < kGroup; ++c) {
    value[c] = FromBf16(x[c]);
    largest = std::fmax(largest, std::fabs(value[c]));
  }
  const float inverse = largest > 0.0f ? 127.0f / largest : 0.0f;
  int sum = 0;
  int8_t q[kGroup];
  for (int c = 0; c < kGroup; ++c) {
    // nearbyint: the FPU's rounding, to nearest even (as PyTorch's torch.round)
    const float code = std::fmin(127.0f, std::fmax(-127.0f, std::nearbyint(value[c] * inverse)));
    q[c] = static_cast<int8_t>(code);
    sum += q[c];
  }
  for (int run = 0; run < kGroup; run += 8)
    for (int i = 0; i < 8; ++i) codes[run + i] = q[run + kRunOrder[i]];
  *scale = largest / 127.0f;
  *scaled_sum = *scale * static_cast<float>(sum);
}

#ifdef DL_QUANTIZE_AVX512
#define DL_AVX512 __attribute__((target("avx512f,avx512bw")))

DL_AVX512 inline __m512i Codes16(__m512 value, __m512 inverse) {
  const __m512 bound = _mm512_set1_ps(127.0f);
  return _mm512_cvtps_epi32(
      _mm512_min_ps(bound, _mm512_max_ps(-bound, _mm512_mul_ps(value, inverse))));
}

// The reference's arithmetic, 32 columns at once: the same division, product and rounding
// (vcvtps2dq rounds to nearest even), so both give the same codes.
DL_AVX512 void QuantizeGroupAvx512(const uint16_t* x, int8_t* codes, float* scale,
                                   float* scaled_sum) {
  alignas(64) static const uint16_t order[32] = {0,  2,  4,  6,  1,  3,  5,  7,  8,  10, 12,
                                                 14, 9,  11, 13, 15, 16, 18, 20, 22, 17, 19,
                                                 21, 23, 24, 26, 28, 30, 25, 27, 29, 31};
  const __m512i bf16 = _mm512_permutexvar_epi16(_mm512_load_si512(order), _mm512_loadu_si512(x));
  const __m512 low = _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(bf16)), 16));
  const __m512 high = _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(bf16, 1)), 16));
  const float largest =
      _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(low), _mm512_abs_ps(high)));
  const __m512 inverse = _mm512_set1_ps(largest > 0.0f ? 127.0f / largest : 0.0f);
  const __m512i q_low = Codes16(low, inverse), q_high = Codes16(high, inverse);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), _mm512_cvtepi32_epi8(q_low));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + 16), _mm512_cvtepi32_epi8(q_high));
  const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q_low, q_high));
  *scale = largest / 127.0f;
  *scaled_sum = *scale * static_cast<float>(sum);
}

bool HasAvx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}
#endif

}  // namespace

void QuantizeRows(const uint16_t* x, int64_t m, int64_t k, QuantizedRows& out) {
  const int64_t groups = k / kGroup;
  out.codes.resize(static_cast<size_t>(m * k));
  out.scales.resize(static_cast<size_t>(m * groups));
  out.scaled_sums.resize(out.scales.size());
  auto* group = &QuantizeGroup;
#ifdef DL_QUANTIZE_AVX512
  static const bool avx512 = HasAvx512();
  if (avx512) group = &QuantizeGroupAvx512;
#endif
  for (int64_t i = 0; i < m * groups; ++i)
    group(x + i * kGroup, out.codes.data() + i * kGroup, &out.scales[i], &out.scaled_sums[i]);
}

}  // namespace dl::lowbit
