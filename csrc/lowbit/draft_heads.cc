#include "lowbit/draft_heads.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "errors.h"
#include "lowbit/kernels.h"
#include "vector_math.h"

namespace dl::lowbit {

namespace {

// Rows [first, first + count) of `w` (first a multiple of kLanes): a view, nothing copied.
LowbitWeights RowsOf(const LowbitWeights& w, int64_t first, int64_t count) {
  const int64_t groups = w.k / kGroup, block = first / kLanes;
  LowbitWeights part = w;
  part.codes = w.codes + block * groups * (kGroup / 2) * PairBytes(w.format);
  part.scales = w.scales + block * groups * kLanes;
  if (w.mins != nullptr) part.mins = w.mins + block * groups * kLanes;
  part.n = count;
  return part;
}

// PyTorch's exact GELU, x * (1 + erf(x / sqrt 2)) / 2, over a row, each result rounded to bf16:
// out[j] = GELU(in[j] + bias[j]). erf by Abramowitz and Stegun's 7.1.26 (absolute error below
// 1.5e-7, PyTorch's own vectorized erf), through a branch-free exponential: the loop vectorizes,
// where std::erf cost ~60 us for the default model's 4,608 hidden units, a fifth of the call.
DL_VECTOR_CLONES
void GeluRow(const uint16_t* in, const float* bias, int64_t n, uint16_t* out) {
  for (int64_t j = 0; j < n; ++j) {
    const float x = FromBf16(in[j]) + bias[j];
    const float a = std::fabs(x) * 0.70710678118654752f;
    const float t = 1.0f / (1.0f + 0.3275911f * a);
    const float poly =
        t * (0.254829592f +
             t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    const float erf_abs = 1.0f - poly * ExpNonPositive(-a * a);
    const float erf = x < 0.0f ? -erf_abs : erf_abs;
    out[j] = ToBf16(0.5f * x * (1.0f + erf));
  }
}

}  // namespace

void CheckDraftHeads(const DraftHeadsWeights& w) {
  const int64_t in = w.embedding != nullptr ? 2 * w.hidden : w.hidden;
  if (w.count <= 0 || w.hidden <= 0 || w.width <= 0 || w.hidden % kLanes != 0)
    throw InvalidArgument(Message("draft heads: ", w.count, " heads of width ", w.width,
                                  " on hidden size ", w.hidden, " (a multiple of ", kLanes, ")"));
  if (w.up.n != w.count * w.width || w.up.k != in)
    throw InvalidArgument(Message("draft heads: up product ", w.up.n, " x ", w.up.k, ", expected ",
                                  w.count * w.width, " x ", in));
  if (w.down.n != w.count * w.hidden || w.down.k != w.width)
    throw InvalidArgument(Message("draft heads: down product ", w.down.n, " x ", w.down.k,
                                  ", expected ", w.count * w.hidden, " x ", w.width));
  if (w.rows.k != w.hidden || w.rows.n <= 0 || w.rows.n > w.vocab ||
      (w.row_tokens == nullptr && w.rows.n != w.vocab))
    throw InvalidArgument(Message("draft heads: ", w.rows.n, " output rows of width ", w.rows.k,
                                  " for a vocabulary of ", w.vocab, " and hidden size ", w.hidden));
}

void RunDraftHeads(const DraftHeadsWeights& w, const uint16_t* z, const int64_t* next,
                   int64_t batch, float* logits, int threads, const std::string& kernel) {
  CheckDraftHeads(w);
  if (batch <= 0) return;
  const int64_t d = w.hidden, in = w.up.k, c = w.count, R = w.rows.n;
  std::vector<uint16_t> x(batch * in), up(batch * c * w.width), hid(batch * c * w.width),
      own(batch * d), states(batch * c * d), out(batch * c * R);
  for (int64_t b = 0; b < batch; ++b) {
    std::memcpy(&x[b * in], z + b * d, d * sizeof(uint16_t));
    if (w.embedding == nullptr) continue;
    if (next[b] < 0 || next[b] >= w.vocab)
      throw InvalidArgument(
          Message("draft heads: next token ", next[b], " outside the vocabulary of ", w.vocab));
    std::memcpy(&x[b * in + d], w.embedding + next[b] * d, d * sizeof(uint16_t));
  }
  LowbitMatmul(x.data(), batch, w.up, up.data(), threads, kernel);
  // hid as [head][row][width]: each head's down product reads its rows contiguously.
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < c; ++i)
      GeluRow(&up[(b * c + i) * w.width], w.up_bias + i * w.width, w.width,
              &hid[(i * batch + b) * w.width]);
  for (int64_t i = 0; i < c; ++i) {
    LowbitMatmul(&hid[i * batch * w.width], batch, RowsOf(w.down, i * d, d), own.data(), threads,
                 kernel);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < d; ++j)
        states[(b * c + i) * d + j] =
            ToBf16(FromBf16(z[b * d + j]) + FromBf16(own[b * d + j]) + w.down_bias[i * d + j]);
  }
  LowbitMatmul(states.data(), batch * c, w.rows, out.data(), threads, kernel);
  const float minus_inf = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < batch * c; ++r) {
    float* row = logits + r * w.vocab;
    const uint16_t* values = &out[r * R];
    if (w.row_tokens == nullptr) {
      for (int64_t v = 0; v < R; ++v) row[v] = FromBf16(values[v]);
      continue;
    }
    std::fill(row, row + w.vocab, minus_inf);
    for (int64_t v = 0; v < R; ++v) row[w.row_tokens[v]] = FromBf16(values[v]);
  }
}

}  // namespace dl::lowbit
