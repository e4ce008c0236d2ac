#include "head_topk.h"

#include <cfloat>
#include <cmath>
#include <cstring>

// On x86-64 with GCC, copies for AVX2 + FMA and AVX-512 machines, picked at load time (ifunc):
// two and four times the vector width of the baseline build. Not under ThreadSanitizer: the
// ifunc resolver runs while the program is relocated, before the TSan runtime is initialised,
// and the instrumented resolver crashes there (`make tsan`).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#define DL_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DL_VECTOR_CLONES
#endif

namespace dl {
namespace {

// Logits are scanned in blocks of this many: a block whose largest logit does not beat the
// current k-th best (the usual case) is skipped after one branch-free, vectorizable max.
constexpr int kBlock = 16;

// Places `candidate` into best[0..filled) (highest first, earlier tokens first among equals).
void Insert(HeadCandidate candidate, HeadCandidate* best, int* filled, int k) {
  int i = *filled < k ? (*filled)++ : k - 1;
  while (i > 0 && best[i - 1].logit < candidate.logit) {
    best[i] = best[i - 1];
    --i;
  }
  best[i] = candidate;
}

// The largest of row[0..kBlock) by a tree of element-wise maxima (vectorized; a float max
// reduction loop is not, without -ffast-math). NaN logits are caught by SumExp.
inline float BlockMax(const float* row) {
  static_assert(kBlock == 16, "the tree below has 4 levels");
  float m[8];
  for (int j = 0; j < 8; ++j) m[j] = row[j] > row[j + 8] ? row[j] : row[j + 8];
  for (int j = 0; j < 4; ++j) m[j] = m[j] > m[j + 4] ? m[j] : m[j + 4];
  for (int j = 0; j < 2; ++j) m[j] = m[j] > m[j + 2] ? m[j] : m[j + 2];
  return m[0] > m[1] ? m[0] : m[1];
}

// exp(x) for x <= 0: exp(x) = 2^n exp(f) with n = round(x / ln 2) and |f| <= ln(2) / 2, exp(f)
// by its degree-7 Taylor polynomial (truncation below 1e-8). Arguments below -87 (-inf included)
// give about 1e-38 instead of less: in a sum that is >= 1 that is nothing. No branch, so the
// compiler vectorizes a loop of these.
inline float ExpNonPositive(float x) {
  // Written so that NaN (from an invalid logit, reported by the caller) becomes -87 and nothing
  // positive gets through: the int conversion and the shift below stay defined for any input.
  const float low = x >= -87.0f ? x : -87.0f;
  const float clamped = low <= 0.0f ? low : 0.0f;
  // Round to nearest by adding 1.5 * 2^23: the float's rounding does it.
  const float n = (clamped * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float f = (clamped - n * 0.693145751953125f) - n * 1.428606765330187e-6f;
  float p = 1.0f / 5040;
  p = p * f + 1.0f / 720;
  p = p * f + 1.0f / 120;
  p = p * f + 1.0f / 24;
  p = p * f + 1.0f / 6;
  p = p * f + 0.5f;
  p = p * f + 1.0f;
  p = p * f + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // n >= -126: a normal 2^n
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

}  // namespace

DL_VECTOR_CLONES
void ScanHead(const float* row, int vocab, int k, HeadCandidate* best) {
  int filled = 0;
  for (int start = 0; start < vocab; start += kBlock) {
    const int end = start + kBlock < vocab ? start + kBlock : vocab;
    if (filled == k && end - start == kBlock && !(BlockMax(row + start) > best[k - 1].logit))
      continue;
    for (int v = start; v < end; ++v)
      if (filled < k || row[v] > best[k - 1].logit) Insert({row[v], v}, best, &filled, k);
  }
}

DL_VECTOR_CLONES
double SumExp(const float* row, int vocab, float max_logit, double inv_temperature, bool* invalid) {
  // (logit - max) in float is exact or off by one rounding; a temperature so small that
  // 1/T overflows a float still maps every logit below the max to -inf, and the max to 0.
  const float scale = inv_temperature < FLT_MAX ? static_cast<float>(inv_temperature) : FLT_MAX;
  constexpr int kLanes = 8, kChunk = 64;  // float lanes, folded into double every chunk
  double total = 0;
  int v = 0;
  alignas(32) float terms[kChunk];
  int bad = 0;  // NaN or +inf seen: an integer reduction, so the loop still vectorizes
  for (; v + kChunk <= vocab; v += kChunk) {
    for (int i = 0; i < kChunk; ++i) {
      const float x = row[v + i];
      bad |= (x != x) | (x == INFINITY);
      terms[i] = ExpNonPositive((x - max_logit) * scale);
    }
    float lane[kLanes] = {};
    for (int i = 0; i < kChunk; i += kLanes)
      for (int j = 0; j < kLanes; ++j) lane[j] += terms[i + j];
    double chunk = 0;
    for (int j = 0; j < kLanes; ++j) chunk += lane[j];
    total += chunk;
  }
  for (; v < vocab; ++v) {
    bad |= (row[v] != row[v]) | (row[v] == INFINITY);
    total += ExpNonPositive((row[v] - max_logit) * scale);
  }
  *invalid = bad != 0;
  return total;
}

}  // namespace dl
