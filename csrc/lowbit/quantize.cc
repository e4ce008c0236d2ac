#include "lowbit/quantize.h"

#include "errors.h"
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
DL_AVX512 void QuantizeGroup(const uint16_t* x, int8_t* codes, float* scale, float* scaled_sum) {
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

}  // namespace

void QuantizeRows(const uint16_t* x, int64_t m, int64_t k, QuantizedRows& out) {
  const int64_t groups = k / kGroup;
  out.codes.resize(static_cast<size_t>(m * k));
  out.scales.resize(static_cast<size_t>(m * groups));
  out.scaled_sums.resize(out.scales.size());
  for (int64_t i = 0; i < m * groups; ++i)
    QuantizeGroup(x + i * kGroup, out.codes.data() + i * kGroup, &out.scales[i],
                  &out.scaled_sums[i]);
}

#else

// No integer kernel is built off x86: nothing calls this.
void QuantizeRows(const uint16_t*, int64_t, int64_t, QuantizedRows&) {
  throw InvalidArgument("int8 activations need the AVX-512 VNNI kernel (x86)");
}

#endif

}  // namespace dl::lowbit
