// Exact p best drafts of a lattice with few drafts (k^h <= kMaxEnumeratedDrafts), by enumeration.
//
// Why: the search of nbest.h pays fixed costs that do not depend on the lattice's size (the
// completion bounds, the beam, the forward and backward passes, the extraction and their arrays:
// about 7 k instructions for a 1x1 lattice, more than the Python call around it), while walking
// 16 drafts costs a few LM probes.
// Same result as the search, bit for bit: each total is summed in head order exactly as the
// search sums it (prefix total + lattice log-prob + alpha * LM log-prob), the drafts are visited
// in lexicographic rank order and sorted stably by total, so equal totals keep that order (the
// tie rule of nbest.h), and drafts whose total is -inf are impossible and left out.
// Cost: one LM Score per arc of the prefix tree (at most 2 k^h) and an insertion sort of k^h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "compose.h"
#include "drafts.h"
#include "lattice.h"
#include "scratch.h"

namespace dl {

constexpr int64_t kMaxEnumeratedDrafts = 16;

// k^h when it is at most kMaxEnumeratedDrafts, else -1.
inline int64_t EnumerableDrafts(const Lattice& lattice) {
  if (lattice.k == 1) return 1;
  int64_t drafts = 1;
  for (int t = 0; t < lattice.h; ++t) {
    drafts *= lattice.k;
    if (drafts > kMaxEnumeratedDrafts) return -1;
  }
  return drafts;
}

// Precondition: EnumerableDrafts(lattice) > 0, options validated, `start` and the tokens checked.
template <typename Lm>
Drafts EnumerateDrafts(const Lattice& lattice, const Lm& lm, const LmState& start,
                       const RescoreOptions& options) {
  const int h = lattice.h, k = lattice.k;
  const double alpha = options.alpha;
  ScratchMemory scratch;
  // Per depth t: the rank taken at head t, and the LM state and sums after heads 0..t-1.
  ScratchVector<int32_t> rank(h, 0, scratch.resource());
  ScratchVector<LmState> state(h + 1, scratch.resource());
  ScratchVector<double> total(h + 1, 0.0, scratch.resource()), head(h + 1, 0.0, scratch.resource()),
      lm_sum(h + 1, 0.0, scratch.resource());
  struct Found {
    double total, head, lm;
    int32_t first;  // index of its ranks in `ranks`
  };
  ScratchVector<Found> found(scratch.resource());
  ScratchVector<int32_t> ranks(scratch.resource());
  found.reserve(kMaxEnumeratedDrafts);
  ranks.reserve(static_cast<size_t>(kMaxEnumeratedDrafts) * h);
  state[0] = start;
  int64_t arcs = 0;
  int t = 0;
  while (t >= 0) {
    const int r = rank[t];
    const float lm_ln = lm.ScoreToken(state[t], lattice.token(t, r), &state[t + 1]);
    ++arcs;
    total[t + 1] = total[t] + lattice.logprob(t, r) + LmTerm(alpha, lm_ln);
    head[t + 1] = head[t] + lattice.logprob(t, r);
    lm_sum[t + 1] = lm_sum[t] + lm_ln;
    if (t + 1 < h) {
      rank[++t] = 0;
      continue;
    }
    if (total[h] != -std::numeric_limits<double>::infinity()) {
      found.push_back({total[h], head[h], lm_sum[h], static_cast<int32_t>(ranks.size())});
      ranks.insert(ranks.end(), rank.begin(), rank.end());
    }
    while (t >= 0 && ++rank[t] == k) --t;  // the next draft in rank order
  }
  // Insertion sort by total, descending: stable, so equal totals stay in rank order.
  for (size_t i = 1; i < found.size(); ++i)
    for (size_t j = i; j > 0 && found[j - 1].total < found[j].total; --j)
      std::swap(found[j - 1], found[j]);
  Drafts out;
  out.h = h;
  const int64_t n = std::min<int64_t>(options.p, static_cast<int64_t>(found.size()));
  out.Reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    const Found& f = found[i];
    for (int s = 0; s < h; ++s) out.tokens.push_back(lattice.token(s, ranks[f.first + s]));
    out.scores.push_back(f.total);
    out.head_scores.push_back(f.head);
    out.lm_scores.push_back(f.lm);
  }
  out.n = n;
  out.arcs_scored = arcs;
  return out;
}

}  // namespace dl
