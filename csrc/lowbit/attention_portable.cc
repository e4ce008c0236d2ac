// The fused step's attention in plain C++ (attention.h), for the product kernels that are not
// AVX-512 ones (AVX2, portable): the compiler vectorizes it for the CPU (vector_math.h's clones).
//
// The same contract as the AVX-512 BF16 attention: a row's bits depend on its query and its
// visible keys alone, in their order. q . k sums its products in 8 partial sums by dimension
// (each product of two bf16 values is exact in float32, so a fused multiply-add rounds as a
// multiply then an add would); the softmax's sum puts the n-th visible key's weight in partial sum
// n % 8; the weighted values skip masked keys. So a drafted token gets the bits a one-token step
// gives it, in a chain or a tree, on any CPU this runs on.
#include <algorithm>
#include <cmath>
#include <vector>

#include "lowbit/attention.h"
#include "lowbit/kernels.h"
#include "vector_math.h"

namespace dl::lowbit {

namespace {

constexpr int kPartial = 8;  // partial sums of a dot product and of the softmax's sum

// A key the mask hides: -inf or bf16's lowest finite value (torch.finfo(bfloat16).min) or below.
inline bool Hidden(uint16_t mask_bits) { return !(FromBf16(mask_bits) > FromBf16(0xFF7F)); }

inline float Reduce(const float* partial) {
  return ((partial[0] + partial[4]) + (partial[2] + partial[6])) +
         ((partial[1] + partial[5]) + (partial[3] + partial[7]));
}

DL_VECTOR_CLONES
float Dot(const float* q, const uint16_t* key, int64_t d) {
  float partial[kPartial] = {};
  for (int64_t i = 0; i < d; i += kPartial)
    for (int l = 0; l < kPartial; ++l) partial[l] += q[i + l] * FromBf16(key[i + l]);
  return Reduce(partial);
}

DL_VECTOR_CLONES
void AddWeighted(float* acc, float weight, const uint16_t* value, int64_t d) {
  for (int64_t i = 0; i < d; ++i) acc[i] += weight * FromBf16(value[i]);
}

struct Scratch {
  std::vector<float> q, scores, acc;
};

// Query rows [r0, r1) of kv head c of batch row b (row r: query head c * g + r / tokens at token
// r % tokens).
void Rows(const AttentionProblem& pr, int64_t b, int64_t c, int64_t r0, int64_t r1, Scratch& s) {
  const int64_t L = pr.length, d = pr.d, group = pr.heads / pr.kv_heads;
  const uint16_t* keys = pr.keys + b * pr.kv_batch + c * pr.kv_head;
  const uint16_t* values = pr.values + b * pr.kv_batch + c * pr.kv_head;
  s.q.resize(d);
  s.acc.resize(d);
  s.scores.resize(L);
  float* scores = s.scores.data();
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t head = c * group + r / pr.tokens, token = r % pr.tokens;
    const uint16_t* q = pr.q + (b * pr.tokens + token) * pr.q_row + head * d;
    const uint16_t* mask = pr.mask + (b * pr.tokens + token) * pr.mask_row;
    for (int64_t i = 0; i < d; ++i) s.q[i] = FromBf16(q[i]);
    float max = -INFINITY;
    for (int64_t j = 0; j < L; ++j) {
      if (Hidden(mask[j])) continue;
      scores[j] = Dot(s.q.data(), keys + j * d, d) * pr.scale + FromBf16(mask[j]);
      max = std::max(max, scores[j]);
    }
    float partial[kPartial] = {};
    int64_t visible = 0;
    for (int64_t j = 0; j < L; ++j) {
      if (Hidden(mask[j])) continue;
      scores[j] = ExpNonPositive(scores[j] - max);
      partial[visible++ % kPartial] += scores[j];
    }
    const float sum = Reduce(partial);
    std::fill(s.acc.begin(), s.acc.end(), 0.0f);
    for (int64_t j = 0; j < L; ++j)
      if (!Hidden(mask[j])) AddWeighted(s.acc.data(), scores[j], values + j * d, d);
    const float inverse = sum > 0.0f ? 1.0f / sum : 0.0f;  // no visible key: zeros
    uint16_t* out = pr.out + ((b * pr.tokens + token) * pr.heads + head) * d;
    for (int64_t i = 0; i < d; ++i) out[i] = ToBf16(s.acc[i] * inverse);
  }
}

}  // namespace

bool PortableAttentionRuns(int64_t d) { return d > 0 && d % kPartial == 0; }

void PortableAttention(const AttentionProblem& pr, int threads) {
  ForEachQueryShare(pr, threads, [&](int64_t b, int64_t c, int64_t r0, int64_t r1) {
    thread_local Scratch scratch;
    Rows(pr, b, c, r0, r1, scratch);
  });
}

}  // namespace dl::lowbit
