// Per-word upper bound on ln p(w | h) over every history h, for admissible search heuristics.
//
// Under Katz backoff, ln p(w | h) = prob(m-gram "h_{m-1} .. h_1 w") + sum of the backoffs of the
// contexts h_1..h_i for i = m .. L (the contexts longer than the match; L <= order - 1). Hence
//   ln p(w | h) <= max over m of [ maxprob_m(w) + sum_{i=m}^{order-1} max(0, maxbo_i) ]
// where maxprob_m(w) is the largest log-prob of a listed m-gram ending in w and maxbo_i the
// largest backoff of a listed i-gram. Backoff weights above 1 (positive in log) are therefore
// accounted for; no assumption that the model is normalised. Unknown last words (a binary file
// of format version 1 keeps only hashed keys) go into an "any word" slot that bounds all words.
//
// Cost: O(1) per n-gram added, O(order * V) to finish. Memory: order * V floats while building.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "ngram/model.h"

namespace dl::ngram {

class WordBoundBuilder {
 public:
  WordBoundBuilder(int order, size_t vocab_size)
      : order_(order),
        vocab_size_(vocab_size),
        max_prob_(static_cast<size_t>(order) * vocab_size, kNone),
        any_word_(order, kNone),
        max_backoff_(order + 1, 0.0f) {}

  // A listed n-gram (n >= 1) ending in `last`.
  void AddProb(int n, WordIndex last, float prob_ln) {
    float& slot = max_prob_[static_cast<size_t>(n - 1) * vocab_size_ + last];
    slot = std::max(slot, prob_ln);
  }
  // A listed n-gram whose last word is not known.
  void AddProbAnyWord(int n, float prob_ln) {
    any_word_[n - 1] = std::max(any_word_[n - 1], prob_ln);
  }
  // The backoff of a listed n-gram (a context of length n).
  void AddBackoff(int n, float backoff_ln) {
    max_backoff_[n] = std::max(max_backoff_[n], backoff_ln);
  }

  // The largest backoff of the contexts of length n so far (0 when none is positive).
  float MaxBackoff(int n) const { return max_backoff_[n]; }

  // bound[w] for every word w (natural log; may exceed 0 for an unnormalised model).
  std::vector<float> Finish() const {
    // slack[m] = sum_{i=m}^{order-1} max(0, maxbo_i): the most that backing off can add.
    std::vector<double> slack(order_ + 1, 0.0);
    for (int m = order_ - 1; m >= 1; --m) slack[m] = slack[m + 1] + max_backoff_[m];
    double any = kNone;
    for (int m = 1; m <= order_; ++m)
      if (any_word_[m - 1] != kNone) any = std::max(any, any_word_[m - 1] + slack[m]);
    std::vector<float> bound(vocab_size_);
    for (size_t w = 0; w < vocab_size_; ++w) {
      double best = any;
      for (int m = 1; m <= order_; ++m) {
        const float p = max_prob_[static_cast<size_t>(m - 1) * vocab_size_ + w];
        if (p != kNone) best = std::max(best, p + slack[m]);
      }
      // Margin: Score sums these terms in float, which may round above the exact sum. A word
      // that is impossible everywhere (-inf) stays -inf (-inf + inf would be NaN).
      bound[w] = best == kNone ? kNone : static_cast<float>(best + 1e-5 * (1.0 + std::fabs(best)));
    }
    return bound;
  }

 private:
  static constexpr float kNone = -std::numeric_limits<float>::infinity();
  int order_;
  size_t vocab_size_;
  std::vector<float> max_prob_;     // [order][V]
  std::vector<float> any_word_;     // [order]
  std::vector<float> max_backoff_;  // [order + 1], index = context length; 0 = "never above 1"
};

}  // namespace dl::ngram
