// Per-bigram upper bound on ln p(w | h) over every history h that ends in v, for the stored
// bigrams "v w" of a suffix-closed model: a tighter completion bound for the search (nbest.h)
// than the per-word bound (word_bound.h), which is near 0 for frequent words.
//
// Under Katz backoff (model.h), with h_1 = v the most recent word, ln p(w | h) is either
//   m >= 1: prob(listed n-gram "h_m .. h_1 w", n = m + 1 >= 2, which ends in "v w")
//           + the backoffs of the contexts h_i .. h_1 for i = n .. L (L <= order - 1), or
//   m = 0:  prob("w") + bo(v) + the backoffs of the contexts of length 2 .. L (only when no
//           listed n-gram of order >= 2 ends in the history and w; never when "v w" is listed).
// Every context added ends in v, so its backoff is at most maxbo_i(v) = max(0, the largest
// backoff of a stored i-gram ending in v); with slack_v(n) = sum_{i=n}^{order-1} maxbo_i(v),
//   ln p(w | h) <= max over listed n-grams g ending in "v w" of prob(g) + slack_v(order(g)),
// the stored pair bound (plus the float margin of word_bound.h). The m = 0 case (a blank "v w",
// stored only as the prefix of a longer n-gram, or an absent one) is bounded at query time by
// prob("w") + bo(v) + slack_v(2), from the per-word slack kept beside the pair bounds
// (NgramLM::BoundsAfter). Per word rather than one maximum per order: Katz models have backoffs
// up to e^6 (the shipped katz4: 12.7 nats over orders 2 and 3), while most words' are <= 1.
//
// Only n-grams whose words are known give their last word and suffix bigram (keys are one-way
// hashes), so the bounds are built with the model (builder.h) and kept by the binary format
// (version >= 3); a model loaded without them keeps the per-word bound and the global slack.
//
// Cost while building: one probe per listed n-gram into an open-addressing accumulator of the
// bigram keys (8 + 4 + 4 (order - 1) bytes per slot, 1.5 slots per bigram) and (order - 2) floats
// per word. Result: one float per bucket of the bigram table (6 bytes per bigram at load factor
// 1.5), indexed like the table so that a table probe gives its slot, and one float per word.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "ngram/hash_table.h"
#include "ngram/model.h"

namespace dl::ngram {

class PairBoundBuilder {
 public:
  PairBoundBuilder(int order, size_t vocab_size, uint64_t expected_bigrams)
      : order_(order),
        vocab_size_(vocab_size),
        max_backoff_(static_cast<size_t>(std::max(order - 2, 0)) * vocab_size, 0.0f) {
    Allocate(BucketsFor(expected_bigrams));
  }

  // A listed n-gram (n >= 2) "... u v w", whose bigram key is `pair_key` (raw key); u is its
  // word before v (n >= 3; ignored for n = 2).
  void AddProb(int n, WordIndex u, WordIndex v, uint64_t pair_key, float prob_ln) {
    const uint64_t slot = Slot(StoredKey(pair_key), v);
    float& max_prob = maxima_[slot * (order_ - 1) + (n - 2)];
    max_prob = std::max(max_prob, prob_ln);
    if (n >= 3) masks_[slot] |= ExtensionBit(u);
  }
  // The bit of word u in a pair's extension mask: the mask of "v w" has the bits of every u
  // such that a listed n-gram of order >= 3 ends in "u v w". Part of the binary format.
  static uint64_t ExtensionBit(WordIndex u) {
    return uint64_t{1} << ((uint64_t{u} * 0x9E3779B97F4A7C15ull) >> 58);
  }
  // A stored n-gram of order 2 <= n < order, ending in `last`, with this backoff.
  void AddBackoff(int n, WordIndex last, float backoff_ln) {
    float& slot = max_backoff_[static_cast<size_t>(n - 2) * vocab_size_ + last];
    slot = std::max(slot, backoff_ln);
  }

  // The extension mask of every bucket of the final bigram table (0 for an empty bucket).
  std::vector<uint64_t> Masks(const TableView& bigrams) const {
    std::vector<uint64_t> masks(bigrams.size(), 0);
    for (uint64_t b = 0; b < bigrams.size(); ++b) {
      const uint64_t key = bigrams.data()[b].key;
      if (key == 0) continue;
      const uint64_t slot = Find(key & ~kFlagMask);
      if (slot != kAbsent) masks[b] = masks_[slot];
    }
    return masks;
  }
  // slack_v(2) for every word v (natural log, >= 0).
  std::vector<float> WordSlack() const {
    std::vector<float> slack(vocab_size_, 0.0f);
    for (size_t v = 0; v < vocab_size_; ++v) slack[v] = static_cast<float>(Slack(v, 2));
    return slack;
  }
  // The bound of every bucket of the final bigram table `bigrams` (-inf for an empty bucket or
  // a stored bigram no listed n-gram ends in).
  std::vector<float> Finish(const TableView& bigrams) const {
    std::vector<float> bound(bigrams.size(), kNone);
    for (uint64_t b = 0; b < bigrams.size(); ++b) {
      const uint64_t key = bigrams.data()[b].key;
      if (key == 0) continue;
      const uint64_t slot = Find(key & ~kFlagMask);
      if (slot == kAbsent) continue;
      const float* maxima = &maxima_[slot * (order_ - 1)];
      double best = kNone;
      for (int n = 2; n <= order_; ++n)
        if (maxima[n - 2] != kNone) best = std::max(best, maxima[n - 2] + Slack(words_[slot], n));
      // Margin: Score sums these terms in float, which may round above the exact sum.
      if (best != kNone) bound[b] = static_cast<float>(best + 1e-5 * (1.0 + std::fabs(best)));
    }
    return bound;
  }

 private:
  static constexpr float kNone = -std::numeric_limits<float>::infinity();
  static constexpr uint64_t kAbsent = ~uint64_t{0};

  // slack_v(n) = sum_{i=n}^{order-1} maxbo_i(v).
  double Slack(size_t v, int n) const {
    double sum = 0;
    for (int i = std::max(n, 2); i < order_; ++i)
      sum += max_backoff_[static_cast<size_t>(i - 2) * vocab_size_ + v];
    return sum;
  }
  uint64_t Slot(uint64_t want, WordIndex v) {
    while (true) {
      uint64_t i = Home(want);
      while (keys_[i] != 0 && keys_[i] != want)
        if (++i == keys_.size()) i = 0;
      if (keys_[i] == want) return i;
      if (used_ + 1 > static_cast<uint64_t>(static_cast<double>(keys_.size()) / kLoadFactor)) {
        Rehash(BucketsFor(keys_.size()));
        continue;
      }
      keys_[i] = want;
      words_[i] = v;
      ++used_;
      return i;
    }
  }
  uint64_t Find(uint64_t want) const {
    for (uint64_t i = Home(want);; i = i + 1 == keys_.size() ? 0 : i + 1) {
      if (keys_[i] == want) return i;
      if (keys_[i] == 0) return kAbsent;
    }
  }
  uint64_t Home(uint64_t want) const {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(want) * keys_.size()) >> 64);
  }
  void Allocate(uint64_t size) {
    keys_.assign(size, 0);
    words_.assign(size, 0);
    maxima_.assign(size * (order_ - 1), kNone);
    masks_.assign(size, 0);
  }
  void Rehash(uint64_t size) {
    std::vector<uint64_t> keys;
    std::vector<WordIndex> words;
    std::vector<float> maxima;
    std::vector<uint64_t> masks;
    keys.swap(keys_);
    words.swap(words_);
    maxima.swap(maxima_);
    masks.swap(masks_);
    Allocate(size);
    for (uint64_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == 0) continue;
      uint64_t j = Home(keys[i]);
      while (keys_[j] != 0)
        if (++j == keys_.size()) j = 0;
      keys_[j] = keys[i];
      words_[j] = words[i];
      masks_[j] = masks[i];
      std::copy_n(&maxima[i * (order_ - 1)], order_ - 1, &maxima_[j * (order_ - 1)]);
    }
  }

  int order_;
  size_t vocab_size_;
  std::vector<uint64_t> keys_;    // stored bigram keys (StoredKey), 0 = empty slot
  std::vector<WordIndex> words_;  // [slot]: the bigram's first word v
  std::vector<float> maxima_;     // [slot][n - 2]: largest prob_ln of a listed n-gram ending there
  std::vector<uint64_t> masks_;   // [slot]: extension mask (ExtensionBit)
  std::vector<float> max_backoff_;  // [n - 2][v]: maxbo_n(v), orders 2 .. order - 1
  uint64_t used_ = 0;
};

}  // namespace dl::ngram
