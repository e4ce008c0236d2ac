// Relative-entropy (Stolcke) pruning exactly as OpenGrm NGram's `ngramshrink
// --method=relative_entropy` with its defaults (shrink_opt=0, min_order_to_prune=2):
//   - score of n-gram hw (and of h </s>):
//       D = -p(h) { p(w|h) [ln p(w|h') + ln alpha'(h) - ln p(w|h)] + (1 - sum_A p(.|h)) [ln alpha'(h) - ln alpha(h)] }
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

#include "lmbuild/model.h"

namespace dl::lmbuild {

struct PruneOptions {
  double threshold = -1;  // relative-entropy threshold (>= 0), or < 0 when target is used
  int64_t target = -1;    // total number of n-grams to keep, or < 0
};

struct PruneResult {
  double theta_ln = 0;      // the threshold applied to D
  uint64_t removed = 0;     // n-grams removed
};

PruneResult PruneRelativeEntropy(BackoffModel* model, const PruneOptions& options);

}  // namespace dl::lmbuild
