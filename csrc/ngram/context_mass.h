// An upper bound on every conditional probability of a backoff model: the largest total mass the
// model gives after any history.
//
// For a stored context h (a listed n-gram with a backoff, or a prefix of a listed n-gram) the
// probabilities after h sum to
//   S(h) = sum_{w: "h w" listed} p(h w) + bo(h) * (S(h') - sum_{w: "h w" listed} p(w | h')),
// h' = h without its oldest word, S(empty) = the sum of the unigram probabilities. Any other
// history scores like its longest stored suffix (its backoff is 1), so every p(w | h) is at most
// Smax, the largest S over the stored contexts. Nothing is assumed about the model: a Katz model
// is normalised (Smax = 1 up to rounding), an arbitrary ARPA file gets its own Smax.
//
// Why: the per-word bounds of word_bound.h add the largest backoff of every order, which for a
// pruned Katz model is large (the shipped 4-gram: +9 to +12 nats per word, where every real
// log-probability is <= 0), and the rescoring search (nbest.h) then prunes almost nothing.
// NgramBuilder clamps every word's bound to ln Smax.
//
// The builder reports each listed n-gram (n >= 2) with ln p(w | h') computed from the lower
// orders, which are complete by then. Contexts without a listed continuation (S(h) = bo(h) S(h'))
// are bounded from their backoff alone (ForEachBackoff). Memory: one 32-byte record per context.
// Cost: O(1) per n-gram here, plus the builder's backoff lookups (at most 2(n-1) probes).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "ngram/hash_table.h"
#include "ngram/model.h"

namespace dl::ngram {

// The key of the n-gram ids[0..n) (hash_table.h: built from the last word backwards).
inline uint64_t KeyOfWords(const WordIndex* ids, int n) {
  uint64_t key = SeedKey(ids[n - 1]);
  for (int i = n - 2; i >= 0; --i) key = ExtendKey(key, ids[i]);
  return key;
}

class ContextMassBuilder {
 public:
  ContextMassBuilder(int order, size_t vocab_size);

  void AddUnigram(float prob_ln);
  // The listed n-gram ids[0..n) (n >= 2), once inserted; the orders below n are complete.
  void AddNgram(const WordIndex* ids, int n, float prob_ln, const std::vector<Entry>& unigrams,
                std::vector<TableBuilder>& tables);
  // After the last n-gram: an upper bound of every ln p(w | h) the model computes in float
  // (ln Smax plus the rounding of Score's float sums). tables[i] holds order i + 2.
  double LogProbBound(const std::vector<Entry>& unigrams, std::vector<TableBuilder>& tables);

 private:
  struct Context {
    double listed = 0;    // sum of p(h w) over the listed "h w"
    double lower = 0;     // sum of p(w | h') over the same w
    uint64_t suffix = 0;  // stored key of h' (length >= 2), or h' itself as a word (length 1)
  };
  int order_;
  double unigram_mass_ = 0;
  std::vector<Context> word_contexts_;                         // [V]: contexts of length 1
  std::vector<std::unordered_map<uint64_t, Context>> longer_;  // [m - 2]: length m, by stored key
};

}  // namespace dl::ngram
