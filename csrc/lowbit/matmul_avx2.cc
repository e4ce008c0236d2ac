// The AVX2+FMA kernel (CPUs without AVX-512 BF16, e.g. AMD Zen 2/3): each group's codes decoded
// to float32 weights (min + scale * q, or scale * q) once per block and rows, multiplied by the
// float32 activations with FMAs.
#include "lowbit/kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define DL_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace dl::lowbit {
namespace {

// The codes of columns 2p and 2p + 1 for 8 lanes (half 0: lanes 0..7, 1: lanes 8..15).
template <Codes C>
DL_AVX2 inline void DecodeHalf(const uint8_t* pair, int half, __m256* q0, __m256* q1) {
  if constexpr (C == Codes::kInt4) {
    const __m128i eight = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(pair + 8 * half));
    const __m256i d = _mm256_cvtepu8_epi32(eight);
    *q0 = _mm256_cvtepi32_ps(_mm256_and_si256(d, _mm256_set1_epi32(0xF)));
    *q1 = _mm256_cvtepi32_ps(_mm256_srli_epi32(d, 4));
  } else {
    const __m128i mixed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pair + 16 * half));
    const __m128i split = _mm_shuffle_epi8(
        mixed, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
    *q0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(split));
    *q1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(split, 8)));
  }
}

// 8 float16 values as float32.
DL_AVX2 inline __m256 LoadHalves(const uint16_t* halves) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(halves)));
}

// Rows [row, row + R) of one output block (two halves of 8 lanes); R <= 4 keeps the 2R running
// sums, the group's scales and minima and two decoded weight vectors in the 16 ymm registers.
template <Codes C, int R>
DL_AVX2 void BlockRows(const Problem& pr, int64_t block, int64_t row) {
  constexpr int64_t pair_bytes = PairBytes(C);
  const int64_t k = pr.w.k, groups = k / kGroup;
  const uint8_t* codes = pr.w.codes + block * groups * (kGroup / 2) * pair_bytes;
  const uint16_t* scales = pr.w.scales + block * groups * kLanes;
  const float* x = pr.xf + row * k;
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* bytes = codes + g * (kGroup / 2) * pair_bytes;
    PrefetchAhead(bytes, (kGroup / 2) * pair_bytes);
    for (int half = 0; half < 2; ++half) {
      const __m256 scale = LoadHalves(scales + g * kLanes + 8 * half);
      const __m256 low = C == Codes::kInt4
                             ? LoadHalves(pr.w.mins + (block * groups + g) * kLanes + 8 * half)
                             : _mm256_setzero_ps();
      for (int p = 0; p < kGroup / 2; ++p) {
        __m256 q0, q1;
        DecodeHalf<C>(bytes + p * pair_bytes, half, &q0, &q1);
        const __m256 w0 = _mm256_fmadd_ps(q0, scale, low);
        const __m256 w1 = _mm256_fmadd_ps(q1, scale, low);
        for (int r = 0; r < R; ++r) {
          const float* xr = x + r * k + g * kGroup + 2 * p;
          acc[r][half] = _mm256_fmadd_ps(w0, _mm256_broadcast_ss(xr), acc[r][half]);
          acc[r][half] = _mm256_fmadd_ps(w1, _mm256_broadcast_ss(xr + 1), acc[r][half]);
        }
      }
    }
  }
  const int64_t column = block * kLanes;
  const int64_t valid = pr.w.n - column < kLanes ? pr.w.n - column : kLanes;
  for (int r = 0; r < R; ++r) {
    alignas(32) float sums[kLanes];
    _mm256_store_ps(sums, acc[r][0]);
    _mm256_store_ps(sums + 8, acc[r][1]);
    uint16_t* out = pr.out + (row + r) * pr.w.n + column;
    for (int64_t j = 0; j < valid; ++j) out[j] = ToBf16(sums[j]);
  }
}

template <Codes C>
DL_AVX2 void Blocks(const Problem& pr, int64_t block_begin, int64_t block_end) {
  for (int64_t block = block_begin; block < block_end; ++block) {
    for (int64_t row = 0; row < pr.m; row += 4) {
      WithRowCount<4>(pr.m - row,
                      [&](auto rows) { BlockRows<C, decltype(rows)::value>(pr, block, row); });
    }
  }
}

DL_AVX2 void Run(const Problem& pr, int64_t block_begin, int64_t block_end) {
  if (pr.w.format == Codes::kInt4)
    Blocks<Codes::kInt4>(pr, block_begin, block_end);
  else
    Blocks<Codes::kInt8>(pr, block_begin, block_end);
}

}  // namespace

Kernel KernelAvx2() {
  __builtin_cpu_init();
  // F16C (the scales' vcvtph2ps) is not checked: every AVX2 CPU has it (Intel since Ivy Bridge,
  // AMD since Piledriver), and clang's __builtin_cpu_supports does not know the name.
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &Run : nullptr;
}

}  // namespace dl::lowbit

#else

namespace dl::lowbit {
Kernel KernelAvx2() { return nullptr; }
}  // namespace dl::lowbit

#endif
