// What the integer kernels on AVX-512 VNNI share (matmul_avx512_vnni.cc, matmul_amx_int8.cc):
// the codes of one group decoded into the unsigned bytes vpdpbusd (and an AMX tile product)
// multiplies, and each group's float terms added to a row's sums in one fixed order, so that two
// kernels with the same integer sums give the same bits.
//
// vpdpbusd multiplies unsigned bytes by signed bytes, so the weights are the unsigned side:
// kInt4's codes (0..15) as they are, kInt8's shifted to q + 128. Per group g of a row with
// activation scale a and code sum S = sum q_x:
//   kInt4: sum x w ~= a * (scale * sum q_x q_w + min * S)
//   kInt8: sum x w ~= a * (scale * sum q_x (q_w + 128) - 128 * scale * S)
//
// Decoding (vpermb, AVX-512 VBMI) gathers lane j's four bytes from the packed layout of matmul.h
// so that lane j holds columns {0, 2, 4, 6} (and, in a second vector, {1, 3, 5, 7}) of each run
// of eight columns, the order in which quantize.h stores the activations.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include <cstdint>

#include "lowbit/kernels.h"

#define DL_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")))

namespace dl::lowbit::vnni {

// Whether this CPU runs the instructions below (AVX-512 F, BW, VL, VNNI and VBMI).
inline bool Runs() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
         __builtin_cpu_supports("avx512vbmi");
}

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

// The gathers and masks of one kernel call, built once.
struct Decoder {
  __m512i gather_even, gather_odd, low_nibbles, offset;
};

template <Codes C>
DL_AVX512_VNNI inline Decoder MakeDecoder() {
  return {C == Codes::kInt4 ? Int4Gather() : Int8Gather(0), Int8Gather(1), _mm512_set1_epi8(0x0F),
          _mm512_set1_epi8(-128)};
}

// Chunk c (activation columns 8c..8c+7 of the group) of the group whose codes start at `bytes`:
// `even` multiplies activation bytes 8c..8c+3 (as stored), `odd` bytes 8c+4..8c+7.
template <Codes C>
DL_AVX512_VNNI inline void DecodeChunk(const uint8_t* bytes, int c, const Decoder& d, __m512i& even,
                                       __m512i& odd) {
  if constexpr (C == Codes::kInt4) {
    const __m512i packed =
        _mm512_permutexvar_epi8(d.gather_even, _mm512_loadu_si512(bytes + 64 * c));
    even = _mm512_and_si512(packed, d.low_nibbles);
    odd = _mm512_and_si512(_mm512_srli_epi16(packed, 4), d.low_nibbles);
  } else {
    const __m512i a = _mm512_loadu_si512(bytes + 128 * c);
    const __m512i b = _mm512_loadu_si512(bytes + 128 * c + 64);
    even = _mm512_xor_si512(_mm512_permutex2var_epi8(a, d.gather_even, b), d.offset);
    odd = _mm512_xor_si512(_mm512_permutex2var_epi8(a, d.gather_odd, b), d.offset);
  }
}

// 16 float16 values as float32.
DL_AVX512_VNNI inline __m512 LoadHalves(const uint16_t* halves) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(halves)));
}

// Group g's float terms of output block `block`: the codes' scale, and the minimum (kInt4) or
// -128 x scale (kInt8) that multiplies the activations' scaled sum.
template <Codes C>
DL_AVX512_VNNI inline void GroupTerms(const Problem& pr, int64_t block, int64_t g, __m512& scale,
                                      __m512& low) {
  const int64_t groups = pr.w.k / kGroup;
  scale = LoadHalves(pr.w.scales + (block * groups + g) * kLanes);
  low = C == Codes::kInt4 ? LoadHalves(pr.w.mins + (block * groups + g) * kLanes)
                          : _mm512_mul_ps(scale, _mm512_set1_ps(-128.0f));
}

// Row `row`'s group g added to its sums `acc`: its exact integer sums `dot` scaled, then the
// group's minimum term, in this order (every integer kernel's bits depend on it).
DL_AVX512_VNNI inline __m512 AddGroup(__m512 acc, __m512i dot, __m512 scale, __m512 low,
                                      const QuantizedRows& q, int64_t at) {
  const __m512 scaled = _mm512_mul_ps(scale, _mm512_set1_ps(q.scales[at]));
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scaled, acc);
  return _mm512_fmadd_ps(low, _mm512_set1_ps(q.scaled_sums[at]), acc);
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

// Row `row`'s sums of output block `block`, rounded to bf16 into pr.out (the last block's
// columns past n left alone).
DL_AVX512_VNNI inline void StoreRow(const Problem& pr, int64_t block, int64_t row, __m512 acc) {
  const int64_t column = block * kLanes;
  const int64_t valid = pr.w.n - column < kLanes ? pr.w.n - column : kLanes;
  const __mmask16 store = static_cast<__mmask16>((1u << valid) - 1u);
  _mm256_mask_storeu_epi16(pr.out + row * pr.w.n + column, store, RoundToBf16(acc));
}

}  // namespace dl::lowbit::vnni

#endif
