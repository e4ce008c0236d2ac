#include "lowbit/quantize.h"

#include <algorithm>
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

#ifdef DL_QUANTIZE_AVX512
namespace {

#define DL_AVX512 __attribute__((target("avx512f,avx512bw")))

DL_AVX512 inline __m512i Codes16(__m512 value, __m512 inverse) {
  const __m512 bound = _mm512_set1_ps(127.0f);
  return _mm512_cvtps_epi32(
      _mm512_min_ps(bound, _mm512_max_ps(-bound, _mm512_mul_ps(value, inverse))));
}

// One group of 32 columns, as quantize.h says, at once: one division, products rounded to
// nearest even (vcvtps2dq), the codes stored in the kernel's order by one permutation.
DL_AVX512 void QuantizeGroup(const uint16_t* x, int8_t* codes, float* scale, float* scaled_sum,
                             int32_t* code_sum) {
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
  *code_sum = sum;
}

}  // namespace
#endif

namespace {

// The kernel's order of a group's 32 columns: each run of 8 as 0, 2, 4, 6, 1, 3, 5, 7.
constexpr int kOrder[32] = {0,  2,  4,  6,  1,  3,  5,  7,  8,  10, 12, 14, 9,  11, 13, 15,
                            16, 18, 20, 22, 17, 19, 21, 23, 24, 26, 28, 30, 25, 27, 29, 31};

// QuantizeGroup's arithmetic one value at a time: the same division, products, clamps (as
// vmaxps / vminps compare) and rounding to nearest even.
void QuantizeGroupPortable(const uint16_t* x, int8_t* codes, float* scale, float* scaled_sum,
                           int32_t* code_sum) {
  float largest = 0.0f;
  for (int i = 0; i < kGroup; ++i) largest = std::max(largest, std::abs(FromBf16(x[i])));
  const float inverse = largest > 0.0f ? 127.0f / largest : 0.0f;
  int32_t sum = 0;
  for (int i = 0; i < kGroup; ++i) {
    float product = FromBf16(x[kOrder[i]]) * inverse;
    product = -127.0f > product ? -127.0f : product;
    product = 127.0f < product ? 127.0f : product;
    const auto code = product == product ? static_cast<int32_t>(std::nearbyint(product)) : 0;
    codes[i] = static_cast<int8_t>(code);
    sum += code;
  }
  *scale = largest / 127.0f;
  *scaled_sum = *scale * static_cast<float>(sum);
  *code_sum = sum;
}

using GroupQuantizer = void (*)(const uint16_t*, int8_t*, float*, float*, int32_t*);

void Quantize(const uint16_t* x, int64_t m, int64_t k, QuantizedRows& out,
              GroupQuantizer quantize) {
  const int64_t groups = k / kGroup;
  out.codes.resize(static_cast<size_t>(m * k));
  out.scales.resize(static_cast<size_t>(m * groups));
  out.scaled_sums.resize(out.scales.size());
  out.sums.resize(out.scales.size());
  for (int64_t i = 0; i < m * groups; ++i)
    quantize(x + i * kGroup, out.codes.data() + i * kGroup, &out.scales[i], &out.scaled_sums[i],
             &out.sums[i]);
}

}  // namespace

void QuantizeRowsPortable(const uint16_t* x, int64_t m, int64_t k, QuantizedRows& out) {
  Quantize(x, m, k, out, &QuantizeGroupPortable);
}

void QuantizeRows(const uint16_t* x, int64_t m, int64_t k, QuantizedRows& out) {
#ifdef DL_QUANTIZE_AVX512
  static const bool avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }();
  if (avx512) return Quantize(x, m, k, out, &QuantizeGroup);
#endif
  Quantize(x, m, k, out, &QuantizeGroupPortable);
}

}  // namespace dl::lowbit
