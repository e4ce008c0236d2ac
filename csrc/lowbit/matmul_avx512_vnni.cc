// The AVX-512 VNNI kernel (Zen 4, Ice Lake, Sapphire Rapids and later): integer products of the
// codes with int8 activations (quantize.h), four per lane and instruction with vpdpbusd, twice
// the products per instruction of vdpbf16ps. Why: a step verifying several tokens is bound by
// arithmetic, not by reading weights; this halves its instructions.
//
// vpdpbusd multiplies unsigned bytes by signed bytes, so the weights are the unsigned side:
// kInt4's codes (0..15) as they are, kInt8's shifted to q + 128. Per group g of a row with
// activation scale a and code sum S = sum q_x:
//   kInt4: sum x w ~= a * (scale * sum q_x q_w + min * S)
//   kInt8: sum x w ~= a * (scale * sum q_x (q_w + 128) - 128 * scale * S)
// The integer sum is exact; the group's float terms are added in one fixed order per row.
//
// Decoding (vpermb, AVX-512 VBMI) gathers lane j's four bytes from the packed layout of matmul.h
// so that lane j holds columns {0, 2, 4, 6} (and, in a second vector, {1, 3, 5, 7}) of each run
// of eight columns, the order in which quantize.h stores the activations.
#include "lowbit/kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#if !defined(__clang__)
// GCC 12's _mm512_undefined_epi32 (inside the shifts) trips false warnings; see matmul_avx512.cc.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define DL_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")))

namespace dl::lowbit {
namespace {

// kInt4: 64 bytes are column pairs 4c..4c+3 (16 bytes each, byte 16i + j = lane j's pair i).
// Lane j takes byte 16t + j as its byte t: low nibbles are columns 2t, high nibbles 2t + 1.
DL_AVX512_VNNI inline __m512i Int4Gather() {
  alignas(64) uint8_t index[64];
  for (int j = 0; j < 16; ++j)
    for (int t = 0; t < 4; ++t) index[4 * j + t] = static_cast<uint8_t>(16 * t + j);
  return _mm512_load_si512(index);
}

// kInt8: 128 bytes (two vectors) are column pairs 4c..4c+3 (32 bytes each, byte 2j + s = lane
// j's column 2p + s). Lane j takes columns {0, 2, 4, 6} (first index) or {1, 3, 5, 7}.
DL_AVX512_VNNI inline __m512i Int8Gather(int odd) {
  alignas(64) uint8_t index[64];
  for (int j = 0; j < 16; ++j)
    for (int t = 0; t < 4; ++t) index[4 * j + t] = static_cast<uint8_t>(32 * t + 2 * j + odd);
  return _mm512_load_si512(index);
}

// float32 -> bf16 bits, as ToBf16 (nearest even; NaN stays NaN), 16 lanes.
DL_AVX512_VNNI inline __m256i RoundToBf16(__m512 value) {
  const __m512i bits = _mm512_castps_si512(value);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
  rounded = _mm512_srli_epi32(rounded, 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(value, value, _CMP_UNORD_Q);
  rounded =
      _mm512_mask_or_epi32(rounded, nan, _mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(rounded);
}

// 16 float16 values as float32.
DL_AVX512_VNNI inline __m512 LoadHalves(const uint16_t* halves) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(halves)));
}

// Rows [row, row + R) of one output block, R <= 8: each row keeps its float sum and its group's
// integer sum in registers. A row's instruction sequence does not depend on R.
template <Codes C, int R>
DL_AVX512_VNNI void BlockRows(const Problem& pr, int64_t block, int64_t row) {
  constexpr int64_t pair_bytes = PairBytes(C);
  const int64_t k = pr.w.k, groups = k / kGroup;
  const uint8_t* codes = pr.w.codes + block * groups * (kGroup / 2) * pair_bytes;
  const uint16_t* scales = pr.w.scales + block * groups * kLanes;
  const QuantizedRows& q = *pr.quantized;
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F), offset = _mm512_set1_epi8(-128);
  const __m512i gather_even = C == Codes::kInt4 ? Int4Gather() : Int8Gather(0);
  const __m512i gather_odd = Int8Gather(1);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    __m512i dot[R];
    for (int r = 0; r < R; ++r) dot[r] = _mm512_setzero_si512();
    const uint8_t* bytes = codes + g * (kGroup / 2) * pair_bytes;
    PrefetchAhead(bytes, (kGroup / 2) * pair_bytes);
    for (int c = 0; c < kGroup / 8; ++c) {
      __m512i even, odd;
      if constexpr (C == Codes::kInt4) {
        const __m512i packed =
            _mm512_permutexvar_epi8(gather_even, _mm512_loadu_si512(bytes + 64 * c));
        even = _mm512_and_si512(packed, low_nibbles);
        odd = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low_nibbles);
      } else {
        const __m512i a = _mm512_loadu_si512(bytes + 128 * c);
        const __m512i b = _mm512_loadu_si512(bytes + 128 * c + 64);
        even = _mm512_xor_si512(_mm512_permutex2var_epi8(a, gather_even, b), offset);
        odd = _mm512_xor_si512(_mm512_permutex2var_epi8(a, gather_odd, b), offset);
      }
      for (int r = 0; r < R; ++r) {
        const int8_t* x = q.codes.data() + (row + r) * k + g * kGroup + 8 * c;
        dot[r] = _mm512_dpbusd_epi32(dot[r], even, _mm512_set1_epi32(Broadcast4(x)));
        dot[r] = _mm512_dpbusd_epi32(dot[r], odd, _mm512_set1_epi32(Broadcast4(x + 4)));
      }
    }
    const __m512 scale = LoadHalves(scales + g * kLanes);
    const __m512 low = C == Codes::kInt4 ? LoadHalves(pr.w.mins + (block * groups + g) * kLanes)
                                         : _mm512_mul_ps(scale, _mm512_set1_ps(-128.0f));
    for (int r = 0; r < R; ++r) {
      const int64_t at = (row + r) * groups + g;
      const __m512 scaled = _mm512_mul_ps(scale, _mm512_set1_ps(q.scales[at]));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r]), scaled, acc[r]);
      acc[r] = _mm512_fmadd_ps(low, _mm512_set1_ps(q.scaled_sums[at]), acc[r]);
    }
  }
  const int64_t column = block * kLanes;
  const int64_t valid = pr.w.n - column < kLanes ? pr.w.n - column : kLanes;
  const __mmask16 store = static_cast<__mmask16>((1u << valid) - 1u);
  for (int r = 0; r < R; ++r)
    _mm256_mask_storeu_epi16(pr.out + (row + r) * pr.w.n + column, store, RoundToBf16(acc[r]));
}

template <Codes C>
DL_AVX512_VNNI void Blocks(const Problem& pr, int64_t block_begin, int64_t block_end) {
  for (int64_t block = block_begin; block < block_end; ++block)
    for (int64_t row = 0; row < pr.m; row += 8)
      WithRowCount<8>(pr.m - row,
                      [&](auto rows) { BlockRows<C, decltype(rows)::value>(pr, block, row); });
}

DL_AVX512_VNNI void Run(const Problem& pr, int64_t block_begin, int64_t block_end) {
  if (pr.w.format == Codes::kInt4)
    Blocks<Codes::kInt4>(pr, block_begin, block_end);
  else
    Blocks<Codes::kInt8>(pr, block_begin, block_end);
}

}  // namespace

Kernel KernelAvx512Vnni() {
  __builtin_cpu_init();
  const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
                  __builtin_cpu_supports("avx512vbmi");
  return ok ? &Run : nullptr;
}

}  // namespace dl::lowbit

#else

namespace dl::lowbit {
Kernel KernelAvx512Vnni() { return nullptr; }
}  // namespace dl::lowbit

#endif
