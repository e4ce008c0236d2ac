// Katz backoff estimation exactly as OpenGrm NGram 1.3.11 `ngrammake --method=katz` with its
// defaults (see shared/docs/katz-opengrm.md):
//   - count-of-counts n_1..n_6 per order (n-grams ending in </s> included, <s> excluded);
//   - Good-Turing discounts d_1..d_5 per order with OpenGrm's normaliser and quirks, counts
//     above 5 multiplied by 0.999, out-of-range discounts replaced by 0.999;
//   - unigrams unsmoothed: p(w) = c(w) / N, N = all word counts + sentences;
//   - p(w|h) = d(c(hw)) c(hw) / c(h) with c(h) the sum of h's successor counts (</s> included);
//   - complete states get their reserved mass on </s> and backoff cost 99;
//   - backoff weights from ComputeBackoffs.
// Optional minimum counts per order remove n-grams (orders >= 2) before count-of-counts are
// taken; c(h) keeps the removed counts, so their mass goes to the backoff (as SRILM's gtmin).
// Cost: O(number of n-grams) time plus one hash probe per n-gram (suffix links).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "lmbuild/counts.h"
#include "lmbuild/model.h"

namespace dl::lmbuild {

struct KatzOptions {
  // min_counts[k - 1]: n-grams of order k with a smaller count are removed. Empty = all 1.
  // Must have one entry per order, min_counts[0] == 1, non-decreasing.
  std::vector<int64_t> min_counts;
  int bins = 5;  // OpenGrm --bins default
};

struct KatzStats {
  // count_of_counts[k - 1][r] = number of order-k n-grams with count r, r = 1..bins+1.
  std::vector<std::vector<uint64_t>> count_of_counts;
  // discounts[k - 1][r - 1], r = 1..bins+1 (the last one is for counts above bins).
  std::vector<std::vector<double>> discounts;
};

// Validates options against the counter's order; throws InvalidArgument.
void CheckKatzOptions(const KatzOptions& options, int order);

// Builds the model. Consumes the counter's records (the counter is left empty).
BackoffModel EstimateKatz(NgramCounter* counter, const KatzOptions& options, KatzStats* stats);

// OpenGrm's Katz discounts for one order from n_1..n_{bins+1} (index r - 1).
std::vector<double> KatzDiscounts(const std::vector<uint64_t>& n, int bins);

}  // namespace dl::lmbuild
