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
// The builder reports each listed n-gram (n >= 2) with ln p(w | h') (usually the listed suffix
// n-gram it already looks up) and bo(h). Contexts without a listed continuation (S(h) = bo(h)
// S(h')) are bounded from their backoff alone at the end. Memory: a 40-byte record per context
// of length >= 2 in an open-addressing table (at most 3/4 full), 40 bytes per word. For orders
// >= 3 only when a 1- or 2-gram context has a backoff above 1 (NgramBuilder decides at the first
// 3-gram): without any (Kneser-Ney: backoffs <= 1) the per-word bounds are at most about 0
// already, and the clamp could not improve them.
#pragma once

#include <cstdint>
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

// ln p(ids[n-1] | ids[0..n-1)) by the backoff rule over the tables built so far (n >= 1);
// tables[i] holds order i + 2.
double BackoffLogProb(const WordIndex* ids, int n, const std::vector<Entry>& unigrams,
                      std::vector<TableBuilder>& tables);

class ContextMassBuilder {
 public:
  ContextMassBuilder(int order, size_t vocab_size);

  void AddUnigram(float prob_ln);
  // The listed n-gram "h w" = ids[0..n) (n >= 2): its log-prob, ln p(w | h') and bo(h) (0 for a
  // context that is not listed).
  void AddNgram(const WordIndex* ids, int n, float prob_ln, double lower_ln, float context_backoff);
  // After the last n-gram: an upper bound of every ln p(w | h) the model computes in float
  // (ln Smax plus the rounding of Score's float sums).
  double LogProbBound(const std::vector<Entry>& unigrams, std::vector<TableBuilder>& tables);

 private:
  struct Context {
    uint64_t key = 0;     // stored key of h (never 0); 0 = empty slot
    uint64_t suffix = 0;  // stored key of h' (length >= 2), or h' itself as a word (length 1)
    double listed = 0;    // sum of p(h w) over the listed "h w"; S(h) once computed
    double lower = 0;     // sum of p(w | h') over the same w
    float backoff = 0;    // ln bo(h)
  };
  // Open addressing, power-of-two size, linear probing; grows at 3/4 full.
  struct ContextTable {
    std::vector<Context> slots = std::vector<Context>(16);
    size_t used = 0;
    Context* FindOrInsert(uint64_t key);
    const Context* Find(uint64_t key) const;
  };

  int order_;
  double unigram_mass_ = 0;
  std::vector<Context> word_contexts_;  // [V]: contexts of length 1
  std::vector<ContextTable> longer_;    // [m - 2]: contexts of length m
};

}  // namespace dl::ngram
