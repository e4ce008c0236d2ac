// The drafts a rescoring call returns (nbest.h, small_lattice.h), best first.
#pragma once

#include <cstdint>
#include <vector>

namespace dl {

struct Drafts {
  int64_t n = 0;  // number of drafts returned
  int h = 0;
  std::vector<int32_t> tokens;      // [n * h]
  std::vector<double> scores;       // [n] total = head + alpha * lm
  std::vector<double> head_scores;  // [n] sum of lattice log-probs
  std::vector<double> lm_scores;    // [n] ln p_LM(draft | context), unweighted
  // Work done (for benchmarks): composed nodes created, arcs scored by the LM, heap pops.
  int64_t nodes = 0, arcs_scored = 0, pops = 0;

  // Room for n drafts, so that appending them does not regrow the arrays draft by draft.
  void Reserve(int64_t n) {
    tokens.reserve(static_cast<size_t>(n) * h);
    scores.reserve(n);
    head_scores.reserve(n);
    lm_scores.reserve(n);
  }
};

// Drafts reserved up front (p may be up to RescoreOptions::kMaxDrafts; past this the arrays grow).
constexpr int64_t kReservedDrafts = 256;

}  // namespace dl
