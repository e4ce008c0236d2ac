#include "head_topk.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "errors.h"

#include "vector_math.h"

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

// Names the first NaN or +inf logit of a head that SumExp found invalid.
[[noreturn]] void ThrowInvalidLogit(const float* row, int vocab, int head) {
  int v = 0;
  while (v + 1 < vocab && !(std::isnan(row[v]) || row[v] == INFINITY)) ++v;
  throw InvalidArgument(
      Message("logits must be finite or -inf: head ", head, " token ", v, " is ", row[v]));
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

void TopkLogprobs(const float* logits, int rows, int vocab, int k, float temperature,
                  int32_t* tokens, float* logprobs) {
  if (k < 1) throw InvalidArgument(Message("k must be >= 1, got k=", k));
  if (k > vocab) throw InvalidArgument(Message("k=", k, " > vocabulary size V=", vocab));
  if (!(temperature > 0) || !std::isfinite(temperature))
    throw InvalidArgument(Message("temperature must be finite and > 0, got ", temperature));
  std::vector<HeadCandidate> best(k);
  const double inv_temperature = 1.0 / static_cast<double>(temperature);
  for (int t = 0; t < rows; ++t) {
    const float* row = logits + static_cast<size_t>(t) * vocab;
    ScanHead(row, vocab, k, best.data());
    const float max_logit = best[0].logit;
    bool invalid = false;
    // All -inf: skip the sum, whose (x - max) would be NaN, and report the real cause below.
    const double sum =
        max_logit == -INFINITY ? 0.0 : SumExp(row, vocab, max_logit, inv_temperature, &invalid);
    if (invalid || max_logit == INFINITY || std::isnan(max_logit)) ThrowInvalidLogit(row, vocab, t);
    if (max_logit == -INFINITY)
      throw InvalidArgument(Message("head ", t, " has no logit above -inf"));
    const double log_normalizer = std::log(sum);
    for (int i = 0; i < k; ++i) {
      tokens[static_cast<size_t>(t) * k + i] = best[i].token;
      const double logprob =
          (static_cast<double>(best[i].logit) - max_logit) * inv_temperature - log_normalizer;
      logprobs[static_cast<size_t>(t) * k + i] = static_cast<float>(std::min(0.0, logprob));
    }
  }
}

}  // namespace dl
