// Exact p best drafts of a lattice rescored by an n-gram LM (A* over the composed lattice).
//
// Score of a draft d (one candidate per head): total(d) = sum_t logprob(t, d_t)
// + alpha * ln p_LM(d | context). Returns the min(p, k^h) drafts of highest total, best first;
// equal totals are ordered by the lexicographic order of their rank sequences (rank = column of
// the candidate in its head, i.e. by lattice log-probability then token id), smallest first.
// The result equals sorting all k^h drafts by (total desc, ranks asc) and keeping the first p, up
// to double rounding of the sums; nothing is enumerated.
//
// Algorithm: best-first (A*) search over prefixes with priority f = g + H(t), g = total of the
// prefix, H(t) = sum of the best lattice log-probs of heads t..h-1. H is admissible and
// consistent because ln p_LM <= 0 and alpha >= 0. Children are generated lazily in rank order
// (an entry stands for "candidate r of this prefix" with the optimistic f of an LM cost 0; the
// LM is called only when it is popped), so arcs whose optimistic bound falls below the p-th best
// total are never scored. Prefixes reaching the same composed node (t, LM state) share their
// future, so only the p best prefixes of a node are expanded (the rest cannot be in the top p).
// Cost: O(E log E) heap work plus one LM Score per scored arc, where E <= p * nodes * k is the
// number of entries whose bound reaches the p-th best total; in practice far less.
#pragma once

#include <algorithm>
#include <cstdint>
#include <queue>
#include <vector>

#include "compose.h"
#include "lattice.h"

namespace dl {

struct Drafts {
  int64_t n = 0;                     // number of drafts returned
  int h = 0;
  std::vector<int32_t> tokens;       // [n * h]
  std::vector<int32_t> ranks;        // [n * h] candidate columns
  std::vector<double> scores;        // [n] total = head + alpha * lm
  std::vector<double> head_scores;   // [n] sum of lattice log-probs
  std::vector<double> lm_scores;     // [n] ln p_LM(draft | context), unweighted
};

namespace nbest_detail {

struct Prefix {
  int32_t parent;  // prefix id, -1 for the empty prefix
  int32_t node;    // composed node reached
  int32_t rank;    // candidate taken at the last head (-1 for the empty prefix)
  int32_t depth;
  double g;        // total so far
  float lm_ln;     // LM log-prob of the last arc
};

struct Entry {
  double f;
  int32_t prefix;  // scored prefix, or the parent of a lazy child
  int32_t rank;    // -1: scored prefix; >= 0: lazy child "prefix + rank"
};

// Rank sequences of prefixes, rebuilt only to break exact ties of f.
class TieBreaker {
 public:
  explicit TieBreaker(const std::vector<Prefix>& prefixes) : prefixes_(prefixes) {}
  // True when entry a's rank sequence is lexicographically after b's (on their common length).
  bool After(const Entry& a, const Entry& b) const {
    Sequence(a, &a_);
    Sequence(b, &b_);
    const size_t n = std::min(a_.size(), b_.size());
    for (size_t i = 0; i < n; ++i)
      if (a_[i] != b_[i]) return a_[i] > b_[i];
    return false;
  }

 private:
  void Sequence(const Entry& e, std::vector<int32_t>* out) const {
    out->clear();
    if (e.rank >= 0) out->push_back(e.rank);
    for (int32_t p = e.prefix; p >= 0 && prefixes_[p].rank >= 0; p = prefixes_[p].parent)
      out->push_back(prefixes_[p].rank);
    std::reverse(out->begin(), out->end());
  }
  const std::vector<Prefix>& prefixes_;
  mutable std::vector<int32_t> a_, b_;
};

}  // namespace nbest_detail

template <typename Lm>
Drafts BestDrafts(const Lattice& lattice, const Lm& lm, const int32_t* context, size_t context_size,
                  const RescoreOptions& options) {
  using nbest_detail::Entry;
  using nbest_detail::Prefix;
  options.Validate();
  const int h = lattice.h, k = lattice.k;
  ComposedLattice<Lm> graph(lattice, lm, context, context_size, options.bos);
  std::vector<double> rest(h + 1, 0.0);  // H(t)
  for (int t = h - 1; t >= 0; --t) rest[t] = rest[t + 1] + lattice.logprob(t, 0);

  std::vector<Prefix> prefixes;
  prefixes.push_back({-1, graph.root(), -1, 0, 0.0, 0.0f});
  std::vector<int64_t> expansions;  // per node: prefixes expanded so far
  nbest_detail::TieBreaker ties(prefixes);
  auto lower = [&ties](const Entry& a, const Entry& b) {  // heap order: a pops after b
    if (a.f != b.f) return a.f < b.f;
    return ties.After(a, b);
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(lower)> heap(lower);
  heap.push({rest[0], 0, -1});

  Drafts out;
  out.h = h;
  while (!heap.empty() && out.n < options.p) {
    const Entry entry = heap.top();
    heap.pop();
    if (entry.rank >= 0) {  // lazy child: score it, then queue its next sibling
      const Prefix parent = prefixes[entry.prefix];
      const auto& arc = graph.GetArc(parent.node, entry.rank);
      const double g = parent.g + lattice.logprob(parent.depth, entry.rank) + options.alpha * arc.lm_ln;
      prefixes.push_back({entry.prefix, arc.child, entry.rank, parent.depth + 1, g, arc.lm_ln});
      heap.push({g + rest[parent.depth + 1], static_cast<int32_t>(prefixes.size() - 1), -1});
      if (entry.rank + 1 < k)
        heap.push({parent.g + lattice.logprob(parent.depth, entry.rank + 1) + rest[parent.depth + 1],
                   entry.prefix, entry.rank + 1});
      continue;
    }
    const Prefix& prefix = prefixes[entry.prefix];
    if (prefix.depth == h) {  // a complete draft, in final order
      ++out.n;
      const size_t base = out.ranks.size();
      out.ranks.resize(base + h);
      out.tokens.resize(base + h);
      double head = 0, lm_total = 0;
      for (int32_t p = entry.prefix; prefixes[p].rank >= 0; p = prefixes[p].parent) {
        const int t = prefixes[p].depth - 1;
        out.ranks[base + t] = prefixes[p].rank;
        out.tokens[base + t] = lattice.token(t, prefixes[p].rank);
        lm_total += prefixes[p].lm_ln;
      }
      for (int t = 0; t < h; ++t) head += lattice.logprob(t, out.ranks[base + t]);
      out.scores.push_back(prefix.g);
      out.head_scores.push_back(head);
      out.lm_scores.push_back(lm_total);
      continue;
    }
    if (expansions.size() < graph.num_nodes()) expansions.resize(graph.num_nodes(), 0);
    if (expansions[prefix.node]++ >= options.p) continue;  // p better prefixes share this future
    heap.push({prefix.g + lattice.logprob(prefix.depth, 0) + rest[prefix.depth + 1], entry.prefix, 0});
  }
  return out;
}

}  // namespace dl
