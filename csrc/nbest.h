// Exact p best drafts of a lattice rescored by an n-gram LM.
//
// Score of a draft d (one candidate per head): total(d) = sum_t logprob(t, d_t)
// + alpha * ln p_LM(d | context). Returns the min(p, k^h) drafts of highest total, best first;
// equal totals are ordered by the lexicographic order of their rank sequences (rank = column of
// the candidate in its head, i.e. by lattice log-probability then token id), smallest first.
// The result equals sorting all k^h drafts by (total desc, ranks asc) and keeping the first p, up
// to double rounding of the sums; nothing is enumerated.
// The LM starts in a given state (e.g. the committed text's, advanced by the accepted tokens) or
// after a context's token ids. The entry points validate p, alpha, the state and the tokens.
//
// Algorithm, over the composed lattice (compose.h), arcs scored lazily:
//  1. Lower bound L: a beam search (width max(4, ceil(p/k))) finds >= p distinct drafts unless
//     k^h < p; L = the p-th best of them (-inf otherwise). The true p-th best total is >= L.
//  2. Forward max-product pass with branch-and-bound: fwd(v) = best prefix total at node v.
//     An arc (t, r) is worth at most gain(t, r) = logprob(t, r) + alpha * TokenBound(token)
//     (TokenBound >= ln p_LM of the token after any state, alpha >= 0), so
//     H(t) = sum over heads t..h-1 of max_r gain bounds any completion. A node with
//     fwd(v) + H(t) < L is dropped; its arcs are scanned in gain order and the scan stops at
//     the first with fwd(v) + gain(t, r) + H(t+1) < L, so those arcs are never scored; the kept
//     ones are scored in one batched LM call. Every draft with total >= L survives.
//  3. Backward pass on the surviving graph: beta(v) = best completion from v (exact).
//  4. Extraction: best-first search over prefixes with the exact priority g + beta; children are
//     visited in (value desc, rank asc) order, so each popped entry yields the next draft in
//     (total desc, ranks asc) order after O(h) pops.
// Cost: one LM Score per surviving arc (at most nodes * k) plus O(p * h * log(p h)) for step 4,
// plus O(h k log k) to sort the gains.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <queue>
#include <utility>
#include <vector>

#include "compose.h"
#include "lattice.h"

namespace dl {

struct Drafts {
  int64_t n = 0;                     // number of drafts returned
  int h = 0;
  std::vector<int32_t> tokens;       // [n * h]
  std::vector<double> scores;        // [n] total = head + alpha * lm
  std::vector<double> head_scores;   // [n] sum of lattice log-probs
  std::vector<double> lm_scores;     // [n] ln p_LM(draft | context), unweighted
  // Work done (for benchmarks): composed nodes created, arcs scored by the LM, heap pops.
  int64_t nodes = 0, arcs_scored = 0, pops = 0;
};

namespace nbest_detail {

constexpr double kNone = -std::numeric_limits<double>::infinity();

struct Prefix {
  int32_t parent;  // prefix id, -1 for the empty prefix
  int32_t node;    // composed node reached
  int32_t rank;    // candidate taken at the last head (-1 for the empty prefix)
  double g;        // total so far
};

struct Entry {
  double f;        // exact best total of the drafts this entry stands for
  int32_t prefix;  // the parent prefix
  int32_t child;   // index into the parent node's sorted children
  int32_t rank;    // rank of that child (tie breaking)
};

// Rank sequences of entries, rebuilt only to break exact ties of f.
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
    out->push_back(e.rank);
    for (int32_t p = e.prefix; prefixes_[p].rank >= 0; p = prefixes_[p].parent)
      out->push_back(prefixes_[p].rank);
    std::reverse(out->begin(), out->end());
  }
  const std::vector<Prefix>& prefixes_;
  mutable std::vector<int32_t> a_, b_;
};

// Step 1: the p-th best total among the drafts of a beam search, or kNone.
template <typename Lm>
double BeamLowerBound(ComposedLattice<Lm>& graph, double alpha, int64_t p) {
  const Lattice& lattice = graph.lattice();
  const int h = lattice.h, k = lattice.k;
  const int64_t width = std::max<int64_t>(4, (p + k - 1) / k);  // 4: measured best on wt2_kn4
  std::vector<std::pair<double, int32_t>> beam{{0.0, graph.root()}}, next;
  std::vector<double> best;   // per node id: best value this layer
  std::vector<double> finals;
  std::vector<int32_t> all_ranks(k);
  for (int r = 0; r < k; ++r) all_ranks[r] = r;
  next.reserve(static_cast<size_t>(width) * k);  // no regrowth inside the loop
  finals.reserve(static_cast<size_t>(width) * k);
  best.reserve(1 + static_cast<size_t>(h) * k * width);
  for (int t = 0; t < h; ++t) {
    next.clear();
    for (const auto& [g, node] : beam) {
      graph.ScoreArcs(node, all_ranks.data(), k);
      for (int r = 0; r < k; ++r) {
        const auto& arc = graph.GetArc(node, r);
        const double value = g + lattice.logprob(t, r) + LmTerm(alpha, arc.lm_ln);
        if (t == h - 1) {
          finals.push_back(value);
          continue;
        }
        if (best.size() < graph.num_nodes()) best.resize(graph.num_nodes(), kNone);
        if (best[arc.child] == kNone) next.push_back({0.0, arc.child});
        best[arc.child] = std::max(best[arc.child], value);
      }
    }
    if (t == h - 1) break;
    for (auto& [g, node] : next) g = best[node], best[node] = kNone;
    if (static_cast<int64_t>(next.size()) > width) {
      std::nth_element(next.begin(), next.begin() + width, next.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      next.resize(width);
    }
    beam.swap(next);
  }
  if (static_cast<int64_t>(finals.size()) < p) return kNone;
  std::nth_element(finals.begin(), finals.begin() + (p - 1), finals.end(), std::greater<double>());
  return finals[p - 1];
}

// gain(t, r) = logprob(t, r) + alpha * TokenBound(token) bounds the value of arc (t, r);
// H(t) = sum over heads t..h-1 of max_r gain bounds any completion from layer t.
struct ArcBounds {
  int k = 0;
  std::vector<double> gain;     // [h * k]
  std::vector<int32_t> order;   // [h * k]: the ranks of head t by gain desc, then rank asc
  std::vector<double> rest;     // [h + 1]: H(t), H(h) = 0

  const double* Gains(int t) const { return &gain[static_cast<size_t>(t) * k]; }
  const int32_t* Order(int t) const { return &order[static_cast<size_t>(t) * k]; }
  int32_t Ranked(int t, int i) const { return order[static_cast<size_t>(t) * k + i]; }
};

template <typename Lm>
ArcBounds BoundArcs(const Lattice& lattice, const Lm& lm, double alpha) {
  const int h = lattice.h, k = lattice.k;
  ArcBounds b;
  b.k = k;
  b.gain.resize(static_cast<size_t>(h) * k);
  b.order.resize(static_cast<size_t>(h) * k);
  b.rest.assign(h + 1, 0.0);
  for (int t = h - 1; t >= 0; --t) {
    double* g = &b.gain[static_cast<size_t>(t) * k];
    int32_t* o = &b.order[static_cast<size_t>(t) * k];
    for (int r = 0; r < k; ++r) {
      g[r] = lattice.logprob(t, r) + LmTerm(alpha, lm.TokenBound(lattice.token(t, r)));
      o[r] = r;
    }
    std::stable_sort(o, o + k, [g](int32_t a, int32_t b) { return g[a] > g[b]; });
    b.rest[t] = b.rest[t + 1] + g[o[0]];
  }
  return b;
}

// Step 2: forward max-product pass with branch-and-bound against `bound`. Returns used[v]: the
// number of leading ranks (in gain order) of node v that were scored and kept.
template <typename Lm>
std::vector<int32_t> ForwardPass(ComposedLattice<Lm>& graph, const ArcBounds& bounds, double alpha,
                                 double bound) {
  const Lattice& lattice = graph.lattice();
  const int h = lattice.h, k = lattice.k;
  std::vector<double> fwd(graph.num_nodes(), kNone);
  std::vector<int32_t> used(graph.num_nodes(), 0);
  fwd[graph.root()] = 0;
  for (int t = 0; t < h; ++t) {
    const auto& nodes = graph.LayerNodes(t);
    const double* g = bounds.Gains(t);
    const int32_t* o = bounds.Order(t);
    for (size_t i = 0; i < nodes.size(); ++i) {
      const int32_t v = nodes[i];
      if (fwd[v] == kNone || fwd[v] + bounds.rest[t] < bound) continue;
      int n = 0;
      while (n < k && fwd[v] + g[o[n]] + bounds.rest[t + 1] >= bound) ++n;
      graph.ScoreArcs(v, o, n);
      if (fwd.size() < graph.num_nodes()) {
        fwd.resize(graph.num_nodes(), kNone);
        used.resize(graph.num_nodes(), 0);
      }
      for (int j = 0; j < n; ++j) {
        const auto& arc = graph.GetArc(v, o[j]);
        const double value = fwd[v] + lattice.logprob(t, o[j]) + LmTerm(alpha, arc.lm_ln);
        fwd[arc.child] = std::max(fwd[arc.child], value);
      }
      used[v] = n;
    }
  }
  return used;
}

// Value of the (already scored) arc (v, r) of layer t plus the best completion after it.
template <typename Lm>
double ArcValue(ComposedLattice<Lm>& graph, const std::vector<double>& beta, double alpha,
                int32_t v, int t, int r) {
  const auto& arc = graph.GetArc(v, r);
  return graph.lattice().logprob(t, r) + LmTerm(alpha, arc.lm_ln) + beta[arc.child];
}

// Step 3: beta(v) = best completion from v over the kept arcs, kNone where the search dropped v.
template <typename Lm>
std::vector<double> BackwardPass(ComposedLattice<Lm>& graph, const ArcBounds& bounds,
                                 const std::vector<int32_t>& used, double alpha) {
  const int h = graph.lattice().h;
  std::vector<double> beta(graph.num_nodes(), kNone);
  for (int32_t v : graph.LayerNodes(h)) beta[v] = 0;
  for (int t = h - 1; t >= 0; --t)
    for (int32_t v : graph.LayerNodes(t))
      for (int i = 0; i < used[v]; ++i)
        beta[v] = std::max(beta[v], ArcValue(graph, beta, alpha, v, t, bounds.Ranked(t, i)));
  return beta;
}

// Step 4: best-first extraction over prefixes with the exact priority g + beta. Each node's live
// children are sorted by (value desc, rank asc) when first needed, so every pop of a complete
// prefix yields the next draft in (total desc, ranks asc) order.
template <typename Lm>
class DraftExtractor {
 public:
  DraftExtractor(ComposedLattice<Lm>& graph, const ArcBounds& bounds,
                 const std::vector<int32_t>& used, const std::vector<double>& beta, double alpha)
      : graph_(graph), bounds_(bounds), used_(used), beta_(beta), alpha_(alpha),
        children_(graph.num_nodes()), prefixes_{{-1, graph.root(), -1, 0.0}}, ties_(prefixes_),
        heap_(HeapOrder{&ties_}) {
    Push(0, 0);
  }

  // Appends the next best draft to `out`; false when none is left.
  bool Next(Drafts* out) {
    const int h = graph_.lattice().h;
    while (!heap_.empty()) {
      const Entry entry = heap_.top();
      heap_.pop();
      ++out->pops;
      Push(entry.prefix, entry.child + 1);
      const Prefix parent = prefixes_[entry.prefix];
      const int t = graph_.layer(parent.node);
      const auto& arc = graph_.GetArc(parent.node, entry.rank);
      const double g =
          parent.g + graph_.lattice().logprob(t, entry.rank) + LmTerm(alpha_, arc.lm_ln);
      prefixes_.push_back({entry.prefix, arc.child, entry.rank, g});
      const int32_t id = static_cast<int32_t>(prefixes_.size() - 1);
      if (t + 1 < h) {
        Push(id, 0);
        continue;
      }
      Emit(id, g, out);
      return true;
    }
    return false;
  }

 private:
  using Child = std::pair<double, int32_t>;  // (value, rank)
  struct HeapOrder {  // a pops after b
    const TieBreaker* ties;
    bool operator()(const Entry& a, const Entry& b) const {
      return a.f != b.f ? a.f < b.f : ties->After(a, b);
    }
  };

  const std::vector<Child>& Children(int32_t v) {
    auto& list = children_[v];
    if (list.empty() && used_[v] > 0) {
      const int t = graph_.layer(v);
      for (int i = 0; i < used_[v]; ++i) {
        const int r = bounds_.Ranked(t, i);
        const double value = ArcValue(graph_, beta_, alpha_, v, t, r);
        if (value != kNone) list.push_back({value, r});
      }
      std::sort(list.begin(), list.end(), [](const Child& a, const Child& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
    }
    return list;
  }

  void Push(int32_t prefix, int32_t index) {
    const auto& list = Children(prefixes_[prefix].node);
    if (index < static_cast<int32_t>(list.size()))
      heap_.push({prefixes_[prefix].g + list[index].first, prefix, index, list[index].second});
  }

  // Re-walks the complete prefix `id` (total g) to report its tokens and score parts.
  void Emit(int32_t id, double g, Drafts* out) {
    const Lattice& lattice = graph_.lattice();
    ranks_.resize(lattice.h);
    for (int32_t p = id; prefixes_[p].rank >= 0; p = prefixes_[p].parent)
      ranks_[graph_.layer(prefixes_[p].node) - 1] = prefixes_[p].rank;
    double head = 0, lm_total = 0;
    int32_t node = graph_.root();
    for (int s = 0; s < lattice.h; ++s) {
      const auto& step = graph_.GetArc(node, ranks_[s]);
      head += lattice.logprob(s, ranks_[s]);
      lm_total += step.lm_ln;
      node = step.child;
      out->tokens.push_back(lattice.token(s, ranks_[s]));
    }
    ++out->n;
    out->scores.push_back(g);
    out->head_scores.push_back(head);
    out->lm_scores.push_back(lm_total);
  }

  ComposedLattice<Lm>& graph_;
  const ArcBounds& bounds_;
  const std::vector<int32_t>& used_;
  const std::vector<double>& beta_;
  const double alpha_;
  std::vector<std::vector<Child>> children_;
  std::vector<Prefix> prefixes_;
  TieBreaker ties_;
  std::priority_queue<Entry, std::vector<Entry>, HeapOrder> heap_;
  std::vector<int32_t> ranks_;
};

}  // namespace nbest_detail

// The p best drafts with the LM starting in state `start` (a state of `lm`, e.g. lm.Start(...)
// advanced by the committed tokens). Throws InvalidArgument for p < 1, alpha < 0 or NaN, a state
// of another model, or lattice tokens `lm` rejects.
template <typename Lm>
Drafts BestDrafts(const Lattice& lattice, const Lm& lm, const LmState& start,
                  const RescoreOptions& options) {
  using namespace nbest_detail;
  options.Validate();
  lm.CheckState(start);
  lm.CheckTokens(lattice.tokens.data(), lattice.tokens.size(), "lattice tokens");
  const double alpha = options.alpha;
  ComposedLattice<Lm> graph(lattice, lm, start);
  const ArcBounds bounds = BoundArcs(lattice, lm, alpha);

  // 1. Lower bound, lowered by a rounding margin so that drafts scoring exactly L survive.
  double bound = BeamLowerBound(graph, alpha, options.p);
  if (bound != kNone) bound -= 1e-9 * (1.0 + std::fabs(bound));
  const std::vector<int32_t> used = ForwardPass(graph, bounds, alpha, bound);   // 2.
  const std::vector<double> beta = BackwardPass(graph, bounds, used, alpha);    // 3.
  Drafts out;                                                                   // 4.
  out.h = lattice.h;
  DraftExtractor<Lm> extract(graph, bounds, used, beta, alpha);
  while (out.n < options.p && extract.Next(&out)) {
  }
  out.nodes = static_cast<int64_t>(graph.num_nodes());
  out.arcs_scored = graph.arcs_scored();
  return out;
}

// The p best drafts after <s> (when options.bos) and `context` (token ids; only the last order-1
// matter). Throws InvalidArgument as above, or for context ids `lm` rejects.
template <typename Lm>
Drafts BestDrafts(const Lattice& lattice, const Lm& lm, const int32_t* context, size_t context_size,
                  const RescoreOptions& options) {
  lm.CheckTokens(context, context_size, "context");
  return BestDrafts(lattice, lm, lm.Start(context, context_size, options.bos), options);
}

}  // namespace dl
