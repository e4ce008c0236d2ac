// Relative-entropy (Stolcke) pruning exactly as OpenGrm NGram's `ngramshrink
// --method=relative_entropy` with its defaults (shrink_opt=0, min_order_to_prune=2):
//   - score of n-gram hw (and of h </s>):
//       D = -p(h) { p(w|h) [ln p(w|h') + ln alpha'(h) - ln p(w|h)] + (1 - sum_A p(.|h)) [ln
//       alpha'(h) - ln alpha(h)] }
//     with p(h) the product of the ascending n-gram probabilities of h (p(<s>) = p(</s>)) and
//     alpha'(h) the backoff weight with hw removed; each n-gram's score is raised to the maximum
//     over the n-grams that extend it (prefix or suffix), so no kept n-gram loses a context;
//   - all n-grams of order >= 2 with score < theta (and no kept extension) are removed at once;
//   - theta = ln(1 + threshold), or, for a target size, halfway between the last score kept and
//     the first pruned so that the model holds `target` n-grams (all unigrams and <s> included);
//   - kept probabilities are unchanged; backoff weights are recomputed.
// Unigrams are never pruned. Cost: O(n log n) in the number of n-grams (the sort for a target).
#pragma once

#include <cstdint>
#include <optional>

#include "lmbuild/model.h"

namespace dl::lmbuild {

struct PruneOptions {
  std::optional<double> threshold;  // relative-entropy threshold, finite and >= 0
  std::optional<int64_t> target;    // total number of n-grams to keep (>= 1)
};

// Throws InvalidArgument for both set, a negative or non-finite threshold, a target < 1.
// (Neither set is valid here: no pruning.)
void CheckPruneOptions(const PruneOptions& options);

struct PruneResult {
  double theta_ln = 0;   // the threshold applied to D
  uint64_t removed = 0;  // n-grams removed
};

// Needs exactly one of threshold and target; throws InvalidArgument otherwise, or for a target
// below the number of unigrams.
PruneResult PruneRelativeEntropy(BackoffModel* model, const PruneOptions& options);

}  // namespace dl::lmbuild
