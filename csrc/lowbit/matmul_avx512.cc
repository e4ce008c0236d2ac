// The AVX-512 BF16 kernel (Zen 4, Sapphire Rapids and later).
//
// Codes become bf16 pairs that vdpbf16ps multiplies by a pair of activations exactly, summing in
// float32; a group's sum is then scaled once. kInt4: a code q (0..15) OR-ed into 0x4300 (bf16
// 128.0, whose last 7 mantissa bits count units) is the bf16 number 128 + q, so one AND and one OR
// decode a lane's pair; the 128 folds into the minima:
//   sum x (min + s q) = s * sum x (128 + q) + (min - 128 s) * sum x.
// kInt8: codes sign-extended and converted (int8 values are exact in bf16).
#include <cstring>

#include "lowbit/kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

// GCC 12's _mm512_undefined_epi32 (inside _mm512_slli_epi32 and _mm512_cvtepu8_epi32) trips a
// false -Wmaybe-uninitialized: the "undefined" pass-through operand is masked off entirely.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define DL_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace dl::lowbit {
namespace {

// The bf16 pairs (one per lane) of column pair `bytes` of a block.
template <Codes C>
DL_AVX512_BF16 inline __m512i DecodePairs(const uint8_t* bytes) {
  if constexpr (C == Codes::kInt4) {
    const __m512i d =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
    const __m512i both =
        _mm512_or_si512(d, _mm512_slli_epi32(d, 12));  // high nibble to bits 16..19
    return _mm512_ternarylogic_epi32(both, _mm512_set1_epi32(0x000F000F),
                                     _mm512_set1_epi32(0x43004300),
                                     0xEA);  // (a & b) | c
  } else {
    const __m512 first = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes))));
    const __m512 second = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + 16))));
    return (__m512i)_mm512_cvtne2ps_pbh(second, first);  // first's 16 values in the low half
  }
}

// 16 float16 values as float32.
DL_AVX512_BF16 inline __m512 LoadHalves(const uint16_t* halves) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(halves)));
}

// Rows [row, row + R) of one output block, R <= 8 so that each row keeps a running sum and a
// group's partial sum in registers. The instruction sequence of a row does not depend on R.
template <Codes C, int R>
DL_AVX512_BF16 void BlockRows(const Problem& pr, int64_t block, int64_t row) {
  constexpr int64_t pair_bytes = PairBytes(C);
  const int64_t k = pr.w.k, groups = k / kGroup;
  const uint8_t* codes = pr.w.codes + block * groups * (kGroup / 2) * pair_bytes;
  const uint16_t* scales = pr.w.scales + block * groups * kLanes;
  const uint16_t* x = pr.x + row * k;
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    __m512 part[R];
    for (int r = 0; r < R; ++r) part[r] = _mm512_setzero_ps();
    const uint8_t* bytes = codes + g * (kGroup / 2) * pair_bytes;
    PrefetchAhead(bytes, (kGroup / 2) * pair_bytes);
    for (int p = 0; p < kGroup / 2; ++p) {
      const __m512i pairs = DecodePairs<C>(bytes + p * pair_bytes);
      for (int r = 0; r < R; ++r) {
        int32_t xp;
        std::memcpy(&xp, x + r * k + g * kGroup + 2 * p, sizeof xp);
        part[r] = _mm512_dpbf16_ps(part[r], (__m512bh)pairs, (__m512bh)_mm512_set1_epi32(xp));
      }
    }
    const __m512 scale = LoadHalves(scales + g * kLanes);
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(part[r], scale, acc[r]);
    if constexpr (C == Codes::kInt4) {
      const __m512 low = _mm512_fnmadd_ps(scale, _mm512_set1_ps(128.0f),
                                          LoadHalves(pr.w.mins + (block * groups + g) * kLanes));
      for (int r = 0; r < R; ++r)
        acc[r] = _mm512_fmadd_ps(low, _mm512_set1_ps(pr.sums[(row + r) * groups + g]), acc[r]);
    }
  }
  const int64_t column = block * kLanes;
  const int64_t valid = pr.w.n - column < kLanes ? pr.w.n - column : kLanes;
  const __mmask16 store = static_cast<__mmask16>((1u << valid) - 1u);
  for (int r = 0; r < R; ++r) {
    const __m256i bf16 = (__m256i)_mm512_cvtneps_pbh(acc[r]);
    _mm256_mask_storeu_epi16(pr.out + (row + r) * pr.w.n + column, store, bf16);
  }
}

template <Codes C>
DL_AVX512_BF16 void Blocks(const Problem& pr, int64_t block_begin, int64_t block_end) {
  for (int64_t block = block_begin; block < block_end; ++block) {
    for (int64_t row = 0; row < pr.m; row += 8) {
      WithRowCount<8>(pr.m - row,
                      [&](auto rows) { BlockRows<C, decltype(rows)::value>(pr, block, row); });
    }
  }
}

DL_AVX512_BF16 void Run(const Problem& pr, int64_t block_begin, int64_t block_end) {
  if (pr.w.format == Codes::kInt4)
    Blocks<Codes::kInt4>(pr, block_begin, block_end);
  else
    Blocks<Codes::kInt8>(pr, block_begin, block_end);
}

}  // namespace

Kernel KernelAvx512Bf16() {
  __builtin_cpu_init();
  const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
  return ok ? &Run : nullptr;
}

}  // namespace dl::lowbit

#else

namespace dl::lowbit {
Kernel KernelAvx512Bf16() { return nullptr; }
}  // namespace dl::lowbit

#endif
