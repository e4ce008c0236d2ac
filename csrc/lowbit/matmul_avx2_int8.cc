// The AVX2 integer kernel (CPUs without AVX-512, e.g. AMD Zen 2/3): activations quantized to int8
// as the VNNI kernel's (quantize.h), products summed exactly in integers by vpmaddubsw (unsigned
// bytes times signed bytes, adjacent pairs summed to int16) and vpmaddwd (pairs of int16 to
// int32), 8 outputs at a time; then per group the VNNI kernel's float32 terms in its order, so
// its results are the VNNI kernel's bit for bit. Why: without VNNI the float kernel spends an FMA
// on every 8 products and more decoding each code to float; a step verifying several tokens is
// bound by that arithmetic.
//
// kInt4: the codes (0..15) are the unsigned side as they are; a pair sums to at most 2*15*127.
// kInt8: codes -128..127 times activations -127..127 through their signs (|q_w| times q_x with
// q_w's sign, llama.cpp's vpsignb trick; a pair sums to at most 2*128*127), then 128 * S (S the
// group's activation code sum) makes the VNNI kernel's integer sum of q_x (q_w + 128).
//
// Lane j of 8 takes byte j of each of a run's 4 column pairs (4 bytes a lane): low nibbles (kInt4)
// or first bytes (kInt8) are columns {0, 2, 4, 6} of the run's 8, high nibbles or second bytes
// {1, 3, 5, 7}: the order in which quantize.h stores the activations.
#include "lowbit/kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define DL_AVX2_INT8 __attribute__((target("avx2,fma,f16c")))

namespace dl::lowbit {
namespace {

// Lanes 8h..8h+7 of column pair t of a run (h = half): kInt4's 8 bytes; kInt8's 16 bytes, a
// lane's first columns in the low 8 and its second ones in the high 8.
template <Codes C>
DL_AVX2_INT8 inline __m128i PairBytesOf(const uint8_t* run, int t, int half) {
  constexpr int64_t pair_bytes = PairBytes(C);
  if constexpr (C == Codes::kInt4) {
    return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(run + t * pair_bytes + 8 * half));
  } else {
    const __m128i split = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    return _mm_shuffle_epi8(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(run + t * pair_bytes + 16 * half)), split);
  }
}

// Byte j of a and b, then of c and d, interleaved (j < 8) into lane j's 4 bytes: a_j b_j c_j d_j.
DL_AVX2_INT8 inline __m256i Lanes(__m128i ab, __m128i cd) {
  return _mm256_set_m128i(_mm_unpackhi_epi16(ab, cd), _mm_unpacklo_epi16(ab, cd));
}

// Columns {0, 2, 4, 6} (even) and {1, 3, 5, 7} (odd) of a run of 8, lanes 8h..8h+7 (h = half),
// from the run's 4 column pairs at `run`.
template <Codes C>
DL_AVX2_INT8 inline void Gather(const uint8_t* run, int half, __m256i* even, __m256i* odd) {
  const __m128i a = PairBytesOf<C>(run, 0, half), b = PairBytesOf<C>(run, 1, half);
  const __m128i c = PairBytesOf<C>(run, 2, half), d = PairBytesOf<C>(run, 3, half);
  if constexpr (C == Codes::kInt4) {
    const __m256i packed = Lanes(_mm_unpacklo_epi8(a, b), _mm_unpacklo_epi8(c, d));
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    *even = _mm256_and_si256(packed, nibble);
    *odd = _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble);
  } else {
    *even = Lanes(_mm_unpacklo_epi8(a, b), _mm_unpacklo_epi8(c, d));
    *odd = Lanes(_mm_unpackhi_epi8(a, b), _mm_unpackhi_epi8(c, d));
  }
}

// 8 float16 values as float32.
DL_AVX2_INT8 inline __m256 LoadHalves(const uint16_t* halves) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(halves)));
}

// Rows [row, row + R) of half `half` of one output block, R <= 4.
template <Codes C, int R>
DL_AVX2_INT8 void HalfRows(const Problem& pr, int64_t block, int64_t row, int half) {
  constexpr int64_t pair_bytes = PairBytes(C);
  const int64_t k = pr.w.k, groups = k / kGroup;
  const uint8_t* codes = pr.w.codes + block * groups * (kGroup / 2) * pair_bytes;
  const uint16_t* scales = pr.w.scales + block * groups * kLanes;
  const QuantizedRows& q = *pr.quantized;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    __m256i dot[R];
    for (int r = 0; r < R; ++r) dot[r] = _mm256_setzero_si256();
    const uint8_t* bytes = codes + g * (kGroup / 2) * pair_bytes;
    PrefetchAhead(bytes, (kGroup / 2) * pair_bytes);
    for (int c = 0; c < kGroup / 8; ++c) {
      __m256i even, odd;
      Gather<C>(bytes + 4 * c * pair_bytes, half, &even, &odd);
      if constexpr (C == Codes::kInt4) {
        for (int r = 0; r < R; ++r) {
          const int8_t* x = q.codes.data() + (row + r) * k + g * kGroup + 8 * c;
          const __m256i pairs =
              _mm256_add_epi16(_mm256_maddubs_epi16(even, _mm256_set1_epi32(Broadcast4(x))),
                               _mm256_maddubs_epi16(odd, _mm256_set1_epi32(Broadcast4(x + 4))));
          dot[r] = _mm256_add_epi32(dot[r], _mm256_madd_epi16(pairs, ones));
        }
      } else {
        const __m256i even_abs = _mm256_abs_epi8(even), odd_abs = _mm256_abs_epi8(odd);
        for (int r = 0; r < R; ++r) {
          const int8_t* x = q.codes.data() + (row + r) * k + g * kGroup + 8 * c;
          const __m256i xe = _mm256_sign_epi8(_mm256_set1_epi32(Broadcast4(x)), even);
          const __m256i xo = _mm256_sign_epi8(_mm256_set1_epi32(Broadcast4(x + 4)), odd);
          // the two halves' int16 sums could overflow together: added as int32
          dot[r] =
              _mm256_add_epi32(dot[r], _mm256_madd_epi16(_mm256_maddubs_epi16(even_abs, xe), ones));
          dot[r] =
              _mm256_add_epi32(dot[r], _mm256_madd_epi16(_mm256_maddubs_epi16(odd_abs, xo), ones));
        }
      }
    }
    const __m256 scale = LoadHalves(scales + g * kLanes + 8 * half);
    const __m256 low = C == Codes::kInt4
                           ? LoadHalves(pr.w.mins + (block * groups + g) * kLanes + 8 * half)
                           : _mm256_mul_ps(scale, _mm256_set1_ps(-128.0f));
    for (int r = 0; r < R; ++r) {
      const int64_t at = (row + r) * groups + g;
      if constexpr (C == Codes::kInt8)
        dot[r] = _mm256_add_epi32(dot[r], _mm256_set1_epi32(128 * q.sums[at]));
      const __m256 scaled = _mm256_mul_ps(scale, _mm256_set1_ps(q.scales[at]));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r]), scaled, acc[r]);
      acc[r] = _mm256_fmadd_ps(low, _mm256_set1_ps(q.scaled_sums[at]), acc[r]);
    }
  }
  const int64_t column = block * kLanes + 8 * half;
  const int64_t valid = pr.w.n - column < 8 ? pr.w.n - column : 8;
  for (int r = 0; r < R; ++r) {
    alignas(32) float sums[8];
    _mm256_store_ps(sums, acc[r]);
    uint16_t* out = pr.out + (row + r) * pr.w.n + column;
    for (int64_t j = 0; j < valid; ++j) out[j] = ToBf16(sums[j]);
  }
}

template <Codes C>
DL_AVX2_INT8 void Blocks(const Problem& pr, int64_t block_begin, int64_t block_end) {
  for (int64_t block = block_begin; block < block_end; ++block)
    for (int half = 0; half < 2 && block * kLanes + 8 * half < pr.w.n; ++half)
      for (int64_t row = 0; row < pr.m; row += 4)
        WithRowCount<4>(pr.m - row, [&](auto rows) {
          HalfRows<C, decltype(rows)::value>(pr, block, row, half);
        });
}

DL_AVX2_INT8 void Run(const Problem& pr, int64_t block_begin, int64_t block_end) {
  if (pr.w.format == Codes::kInt4)
    Blocks<Codes::kInt4>(pr, block_begin, block_end);
  else
    Blocks<Codes::kInt8>(pr, block_begin, block_end);
}

}  // namespace

Kernel KernelAvx2Int8() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &Run : nullptr;
}

}  // namespace dl::lowbit

#else

namespace dl::lowbit {
Kernel KernelAvx2Int8() { return nullptr; }
}  // namespace dl::lowbit

#endif
