// A backoff n-gram model as the trainer builds it: per order, flat arrays of n-grams linked to
// their prefix and suffix n-grams, with natural probabilities and natural-log backoff weights.
//
// Level k-1 holds the n-grams of order k. Level 0 is indexed by word id and lists every word,
// <s> (id 0, probability 0: never predicted) and </s> (id 1). An n-gram of order k >= 2 is
// (prefix = index of its first k-1 words at level k-2, word); suffix = index of its last k-1
// words at level k-2 (for k = 2 both are word ids: prefix the first word, suffix the last).
// backoff_ln[i] is ln alpha of n-gram i used as a context, NaN when no longer n-gram continues it
// (it is then not a context).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "lmbuild/counts.h"

namespace dl::lmbuild {

struct ModelLevel {
  std::vector<uint32_t> prefix;    // order >= 2
  std::vector<WordId> word;        // order >= 2
  std::vector<uint32_t> suffix;    // order >= 2
  std::vector<uint64_t> count;     // raw count (kept for statistics)
  std::vector<double> prob;        // p(word | prefix), natural
  std::vector<double> backoff_ln;  // ln alpha as a context, NaN if not a context
  size_t size() const { return prob.size(); }
};

struct BackoffModel {
  int order = 0;
  std::vector<std::string> words;  // word id -> spelling
  std::vector<ModelLevel> levels;  // levels[k - 1]: n-grams of order k
  uint64_t NumNgrams(int k) const { return levels[k - 1].size(); }
};

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// OpenGrm's backoff cost of a complete state (kInfBackoff), a natural-log cost.
constexpr double kCompleteStateCost = 99.0;

// The word ids of n-gram `index` of order k, oldest first, into ids[0..k) (walks the prefix links).
void NgramWordIds(const BackoffModel& model, int k, uint32_t index, WordId* ids);

// Removes the n-grams of order >= 2 whose keep flag is false (keep[k - 1] for order k; keep[0]
// is ignored) and renumbers prefix/suffix links. Precondition: the prefix and suffix of every
// kept n-gram are kept.
void CompactModel(BackoffModel* model, const std::vector<std::vector<bool>>& keep);

// Recomputes every backoff weight from the probabilities, as OpenGrm's RecalcBackoff:
// alpha(h) = (1 - sum_{w in A(h)} p(w|h)) / (1 - sum_{w in A(h)} p(w|h')), each sum's neglog
// clamped to >= 1e-9; complete states (every successor of the backoff state seen) get cost 99.
void ComputeBackoffs(BackoffModel* model);

// complete[m - 1][j]: whether context j of order m (an n-gram at level m - 1) is complete,
// and successors[m - 1][j] its number of successors. Sizes follow levels 0 .. order-2.
void FindCompleteStates(const BackoffModel& model, std::vector<std::vector<bool>>* complete,
                        std::vector<std::vector<uint32_t>>* successors);

}  // namespace dl::lmbuild
