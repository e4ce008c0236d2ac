// The AVX-512 VNNI kernel (Zen 4, Ice Lake, Sapphire Rapids and later): integer products of the
// codes with int8 activations (quantize.h), four per lane and instruction with vpdpbusd, twice
// the products per instruction of vdpbf16ps. Why: a step verifying several tokens is bound by
// arithmetic, not by reading weights; this halves its instructions. The decoding of the codes
// and each group's float terms are in vnni_codes.h (the AMX kernel shares them); the integer
// sums are exact, the float terms added in one fixed order per row.
#include "lowbit/kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#if !defined(__clang__)
// GCC 12's _mm512_undefined_epi32 (inside the shifts) trips false warnings; see matmul_avx512.cc.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "lowbit/vnni_codes.h"

namespace dl::lowbit {
namespace {

using namespace vnni;  // NOLINT: this kernel is vnni_codes.h's first user

// Rows [row, row + R) of one output block, R <= 8: each row keeps its float sum and its group's
// integer sum in registers. A row's instruction sequence does not depend on R.
template <Codes C, int R>
DL_AVX512_VNNI void BlockRows(const Problem& pr, int64_t block, int64_t row) {
  constexpr int64_t pair_bytes = PairBytes(C);
  const int64_t k = pr.w.k, groups = k / kGroup;
  const uint8_t* codes = pr.w.codes + block * groups * (kGroup / 2) * pair_bytes;
  const QuantizedRows& q = *pr.quantized;
  const Decoder decoder = MakeDecoder<C>();
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    __m512i dot[R];
    for (int r = 0; r < R; ++r) dot[r] = _mm512_setzero_si512();
    const uint8_t* bytes = codes + g * (kGroup / 2) * pair_bytes;
    PrefetchAhead(bytes, (kGroup / 2) * pair_bytes);
    for (int c = 0; c < kGroup / 8; ++c) {
      __m512i even, odd;
      DecodeChunk<C>(bytes, c, decoder, even, odd);
      for (int r = 0; r < R; ++r) {
        const int8_t* x = q.codes.data() + (row + r) * k + g * kGroup + 8 * c;
        dot[r] = _mm512_dpbusd_epi32(dot[r], even, _mm512_set1_epi32(Broadcast4(x)));
        dot[r] = _mm512_dpbusd_epi32(dot[r], odd, _mm512_set1_epi32(Broadcast4(x + 4)));
      }
    }
    __m512 scale, low;
    GroupTerms<C>(pr, block, g, scale, low);
    for (int r = 0; r < R; ++r)
      acc[r] = AddGroup(acc[r], dot[r], scale, low, q, (row + r) * groups + g);
  }
  for (int r = 0; r < R; ++r) StoreRow(pr, block, row + r, acc[r]);
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

Kernel KernelAvx512Vnni() { return vnni::Runs() ? &Run : nullptr; }

}  // namespace dl::lowbit

#else

namespace dl::lowbit {
Kernel KernelAvx512Vnni() { return nullptr; }
}  // namespace dl::lowbit

#endif
