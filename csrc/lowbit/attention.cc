#include "lowbit/attention.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "lowbit/kernels.h"
#include "lowbit/spin_pool.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // see matmul_avx512.cc
#endif

#define DL_AVX512_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,popcnt")))

namespace dl::lowbit {
namespace {

// exp(x) for x <= 0, 16 lanes: vector_math.h's ExpNonPositive (2^n times a degree-7 polynomial).
DL_AVX512_BF16 inline __m512 Exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_setzero_ps());
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 f = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  f = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-6f), f);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  for (const float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f})
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(c));
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}

DL_AVX512_BF16 inline __m512 Bf16x16(const uint16_t* p) {
  const __m512i wide =
      _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

struct Scratch {
  std::vector<float> scores, sums, kept;
};

// A key the mask hides has mask -inf or bf16's lowest finite value (torch.finfo(bfloat16).min).
constexpr uint16_t kLowestBf16 = 0xFF7F;

// Query rows [r0, r1) of kv head c of batch row b (row r: query head c * g + r / tokens at token
// r % tokens). W = d / 16 float vectors a row.
template <int W>
DL_AVX512_BF16 void Rows(const AttentionProblem& pr, int64_t b, int64_t c, int64_t r0, int64_t r1,
                         Scratch& s) {
  constexpr int64_t d = 16 * W;
  const int64_t L = pr.length, R = r1 - r0, group = pr.heads / pr.kv_heads;
  s.scores.resize(R * L);
  s.sums.resize(R);
  const uint16_t* keys = pr.keys + b * pr.kv_batch + c * pr.kv_head;
  const uint16_t* values = pr.values + b * pr.kv_batch + c * pr.kv_head;
  const auto head = [&](int64_t r) { return c * group + (r0 + r) / pr.tokens; };
  const auto token = [&](int64_t r) { return (r0 + r) % pr.tokens; };
  // A row's softmax runs over its visible keys only: a masked key weighs exactly 0, and the k-th
  // visible key's weight goes to lane k % 16 of the sum (packed in order by vcompressps), not to
  // lane j % 16. So masked keys (other branches of a token tree, padding, holes) change no bit.
  s.kept.resize(L + 16);  // each store writes 16 lanes
  float* kept = s.kept.data();
  for (int64_t r = 0; r < R; ++r) {
    const uint16_t* q = pr.q + (b * pr.tokens + token(r)) * pr.q_row + head(r) * d;
    const uint16_t* mask = pr.mask + (b * pr.tokens + token(r)) * pr.mask_row;
    float* row = s.scores.data() + r * L;
    __m512i qv[W / 2];
    for (int w = 0; w < W / 2; ++w) qv[w] = _mm512_loadu_si512(q + 32 * w);
    for (int64_t j = 0; j < L; ++j) {
      __m512 acc = _mm512_setzero_ps();
      for (int w = 0; w < W / 2; ++w)
        acc = _mm512_dpbf16_ps(acc, (__m512bh)_mm512_loadu_si512(keys + j * d + 32 * w),
                               (__m512bh)qv[w]);
      row[j] = _mm512_reduce_add_ps(acc) * pr.scale + FromBf16(mask[j]);
    }
    __m512 top = _mm512_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 16 <= L; j += 16) top = _mm512_max_ps(top, _mm512_loadu_ps(row + j));
    float max = _mm512_reduce_max_ps(top);
    for (; j < L; ++j) max = std::max(max, row[j]);
    // A masked score (-inf, or about -3.4e38) is below every visible one: this is the visible
    // keys' max. With no visible key every weight below is 0, whatever the shift.
    if (!(max > -INFINITY)) max = 0.0f;
    const __m512 shift = _mm512_set1_ps(max);
    const __m512 lowest = _mm512_set1_ps(FromBf16(kLowestBf16));
    int64_t n = 0;  // visible keys so far
    for (j = 0; j < L; j += 16) {
      const __mmask16 in = j + 16 <= L ? 0xFFFF : static_cast<__mmask16>((1u << (L - j)) - 1u);
      const __m512 x = _mm512_maskz_loadu_ps(in, row + j);
      const __m512i m = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(in, mask + j));
      const __mmask16 visible = _mm512_mask_cmp_ps_mask(
          in, _mm512_castsi512_ps(_mm512_slli_epi32(m, 16)), lowest, _CMP_NLE_UQ);
      const __m512 e = _mm512_maskz_mov_ps(visible, Exp16(_mm512_sub_ps(x, shift)));
      _mm512_mask_storeu_ps(row + j, in, e);  // >= e^-87 where visible, 0 where masked
      // (vcompressps into a register, then a plain store: into memory it is microcoded on Zen 4)
      _mm512_storeu_ps(kept + n, _mm512_maskz_compress_ps(visible, e));
      n += __builtin_popcount(visible);
    }
    __m512 total = _mm512_setzero_ps();
    for (j = 0; j + 16 <= n; j += 16) total = _mm512_add_ps(total, _mm512_loadu_ps(kept + j));
    if (j < n)
      total = _mm512_add_ps(
          total, _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << (n - j)) - 1u), kept + j));
    s.sums[r] = _mm512_reduce_add_ps(total);
  }
  // Weighted values, a chunk of rows at a time so that their sums stay in registers.
  constexpr int64_t kChunk = 24 / W > 0 ? 24 / W : 1;
  for (int64_t c0 = 0; c0 < R; c0 += kChunk) {
    const int64_t n = std::min<int64_t>(kChunk, R - c0);
    __m512 acc[kChunk][W];
    for (int64_t r = 0; r < kChunk; ++r)
      for (int w = 0; w < W; ++w) acc[r][w] = _mm512_setzero_ps();
    for (int64_t j = 0; j < L; ++j) {
      __m512 v[W];
      for (int w = 0; w < W; ++w) v[w] = Bf16x16(values + j * d + 16 * w);
      for (int64_t r = 0; r < kChunk; ++r) {
        if (r >= n) break;
        // A masked key's weight, +0, leaves the sum's bits as they are for finite values (the
        // sum starts at +0 and is never -0).
        const __m512 p = _mm512_set1_ps(s.scores[(c0 + r) * L + j]);
        for (int w = 0; w < W; ++w) acc[r][w] = _mm512_fmadd_ps(p, v[w], acc[r][w]);
      }
    }
    for (int64_t r = 0; r < n; ++r) {
      const float sum = s.sums[c0 + r];
      const __m512 inverse = _mm512_set1_ps(sum > 0.0f ? 1.0f / sum : 0.0f);
      uint16_t* out = pr.out + ((b * pr.tokens + token(c0 + r)) * pr.heads + head(c0 + r)) * d;
      for (int w = 0; w < W; ++w)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16 * w),
                            (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(acc[r][w], inverse)));
    }
  }
}

}  // namespace

bool Avx512AttentionRuns(int64_t d) {
  return (d == 64 || d == 128) && KernelAvx512Bf16() != nullptr;
}

void Avx512Attention(const AttentionProblem& pr, int threads) {
  ForEachQueryShare(pr, threads, [&](int64_t b, int64_t c, int64_t r0, int64_t r1) {
    thread_local Scratch scratch;  // kept between calls: one per layer, 30 a step
    if (pr.d == 64)
      Rows<4>(pr, b, c, r0, r1, scratch);
    else
      Rows<8>(pr, b, c, r0, r1, scratch);
  });
}

}  // namespace dl::lowbit

#else

namespace dl::lowbit {
bool Avx512AttentionRuns(int64_t) { return false; }
void Avx512Attention(const AttentionProblem&, int) {}
}  // namespace dl::lowbit

#endif

namespace dl::lowbit {

namespace {
// Whether `kernel` is one of the AVX-512 product kernels ("auto": the one LowbitMatmul takes).
bool Avx512Kernel(const std::string& kernel) {
  const std::string name = kernel == "auto" ? LowbitKernels().front() : kernel;
  return name.rfind("avx512", 0) == 0 || name == "amx-int8";  // AMX's kernel needs AVX-512 too
}
}  // namespace

AttentionFn ChooseAttention(int64_t d, const std::string& kernel) {
  if (Avx512Kernel(kernel) && Avx512AttentionRuns(d)) return &Avx512Attention;
  return PortableAttentionRuns(d) ? &PortableAttention : nullptr;
}

void ForEachQueryShare(const AttentionProblem& pr, int threads,
                       const std::function<void(int64_t, int64_t, int64_t, int64_t)>& rows) {
  const int64_t group_rows = pr.tokens * (pr.heads / pr.kv_heads);  // query rows per kv head
  const int64_t units = pr.batch * pr.kv_heads;
  if (units * group_rows <= 0) return;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Work split as (batch row, kv head, share of its query rows), every thread taking as many
  // pieces: the kv heads alone are too few to share evenly (the default model has 3).
  const int64_t shares = std::min<int64_t>(group_rows, threads);
  // Each piece a task, claimed by whichever thread is free (spin_pool.h).
  const int64_t pieces = units * shares;
  SpinPool::Instance().Run(static_cast<int>(pieces), threads, [&](int piece) {
    const int64_t unit = piece / shares, share = piece % shares;
    rows(unit / pr.kv_heads, unit % pr.kv_heads, group_rows * share / shares,
         group_rows * (share + 1) / shares);
  });
}

}  // namespace dl::lowbit
