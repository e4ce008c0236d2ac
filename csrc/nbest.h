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
//  1. Lower bound L: a beam search (nodes ranked by prefix total + completion bound C, below;
//     each expanding its arcs of highest bound gain) finds drafts; L = the p-th best of them
//     (-inf when it found fewer than p), and
//     for p > 1 the p-th best of every path through the nodes the beam expanded, if higher. The
//     true p-th best total is >= L.
//  2. Forward max-product pass with branch-and-bound: fwd(v) = best prefix total at node v.
//     Completion bounds C come from a relaxed LM that sees only the previous word (ArcBounds,
//     solved exactly backwards over the lattice's k x k candidate pairs per layer; admissible
//     since bound(w | v) >= ln p_LM(w | any history ending in v) and alpha >= 0). A node with
//     fwd(v) + C < L is dropped; its arcs are scanned in the order of their bound
//     gain = logprob + alpha * bound + C(next), and the scan stops at the first with
//     fwd(v) + gain < L, so those arcs are never scored; the kept ones are scored in one batched
//     LM call. Every draft with total >= L survives.
//  3. Backward pass on the surviving graph: beta(v) = best completion from v (exact).
//  4. Extraction: best-first search over prefixes with the exact priority g + beta; children are
//     visited in (value desc, rank asc) order, so each popped entry yields the next draft in
//     (total desc, ranks asc) order after O(h) pops.
// Lattices of at most kMaxEnumeratedDrafts drafts are enumerated instead (small_lattice.h: the
// same drafts without the fixed costs of the steps below).
// Cost: one LM Score per surviving arc (at most nodes * k) plus O(p * h * log(p h)) for step 4,
// plus O(h k^2 log k) for the bounds (k^2 bigram key-filter queries per layer, and a table probe
// for each candidate pair whose bigram is stored, when the model has pair bounds).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <queue>
#include <utility>
#include <vector>

#include "compose.h"
#include "drafts.h"
#include "lattice.h"
#include "scratch.h"
#include "small_lattice.h"

namespace dl {

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
  explicit TieBreaker(const ScratchVector<Prefix>& prefixes) : prefixes_(prefixes) {}
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
  const ScratchVector<Prefix>& prefixes_;
  mutable std::vector<int32_t> a_, b_;
};

// Completion bounds from a relaxed, "last word only" LM, solved exactly backwards. A node of layer
// t >= 1 belongs to the row of the candidate r of head t-1 that entered it (its LM state ends in
// that candidate's word; every candidate entering one node has the same word, or leaves the null
// state); the root is the single row of layer 0. For row (t, r) and candidate r' of head t:
//   gain(t, r, r') = logprob(t, r') + alpha * bound(token(t, r') | token(t-1, r)) + C(t+1, r'),
//   C(t, r) = max over r' of gain(t, r, r'),   C(h, .) = 0,
// where bound(w | v) >= ln p_LM(w | any history ending in v) (TokenLm::BoundsAfter: exact
// unigram after a null state; unigram + backoffs when the bigram "v w" is absent from a
// suffix-closed model, found from the bigram key filter without a table probe; when it is
// stored, the model's pair bound of "v w" (pair_bound.h: the best listed n-gram ending in "v w"
// plus the positive backoffs of v's contexts), found by one bigram table probe, or, when no
// listed n-gram "u v w" can exist for the words u before v (the candidates of head t-2, or the
// start state's last word; the pair's extension mask, format version 4), the bigram's own
// probability plus those backoffs; else the per-word bound). By induction C(t, r) bounds every
// completion of every node of the row (alpha >= 0), so a node with fwd + C < L, and an arc with
// fwd + gain < L, cannot reach the p-th best.
// Cost: (h-1) k^2 + k bounds (a key-filter query each, and a table probe and a mask read for each
// stored pair) and (h-1) k + 1 sorts of k gains per lattice.
struct ArcBounds {
  explicit ArcBounds(std::pmr::memory_resource* memory)
      : gain(memory), order(memory), best(memory) {}

  int k = 0;
  ScratchVector<double> gain;    // [rows * k]
  ScratchVector<int32_t> order;  // [rows * k]: a row's ranks by gain desc, then rank asc
  ScratchVector<double> best;    // [rows]: C of the row

  // Row id of candidate r of head t-1 for nodes of layer t >= 1; the root's row is 0.
  int32_t Row(int t, int r) const { return 1 + (t - 1) * k + r; }
  const double* Gains(int32_t row) const { return &gain[static_cast<size_t>(row) * k]; }
  const int32_t* Order(int32_t row) const { return &order[static_cast<size_t>(row) * k]; }
  int32_t Ranked(int32_t row, int i) const { return order[static_cast<size_t>(row) * k + i]; }
};

template <typename Lm>
ArcBounds BoundArcs(const Lattice& lattice, const Lm& lm, const LmState& start, double alpha,
                    std::pmr::memory_resource* memory) {
  const int h = lattice.h, k = lattice.k;
  const size_t rows = 1 + static_cast<size_t>(h - 1) * k;
  ArcBounds b(memory);
  b.k = k;
  b.gain.resize(rows * k);
  b.order.resize(rows * k);
  b.best.resize(rows);
  // LM bounds of every layer first, in head order: layer t's bigram filter answers (may_pair)
  // tell layer t + 1 which "u v" may be stored (TokenLm::BoundsAfter's refinement).
  const size_t square = static_cast<size_t>(k) * k;
  ScratchVector<float> lm_bounds(static_cast<size_t>(h) * square, memory);  // [t][row][candidate]
  ScratchVector<uint8_t> may_pair(static_cast<size_t>(h) * square, memory);
  for (int t = 0; t < h; ++t) {
    const int32_t* tokens = &lattice.tokens[static_cast<size_t>(t) * k];
    const int32_t* prev = t > 0 ? tokens - k : nullptr;
    float* out = &lm_bounds[t * square];
    if (t > 1)  // the word before prev is a candidate of head t - 2
      lm.BoundsAfter(prev - k, k, &may_pair[(t - 1) * square], prev, k, tokens, k, out,
                     &may_pair[t * square]);
    else if (t == 1)  // ... the start state's last word
      lm.BoundsAfter(start, prev, k, tokens, k, out, &may_pair[t * square]);
    else
      lm.BoundsAfter(start, tokens, k, out);
  }
  for (int t = h - 1; t >= 0; --t) {
    const float* lm_bound = &lm_bounds[t * square];
    for (int r = 0; r < (t > 0 ? k : 1); ++r) {
      const int32_t row = t > 0 ? b.Row(t, r) : 0;
      const float* bound = &lm_bound[static_cast<size_t>(r) * k];
      double* g = &b.gain[static_cast<size_t>(row) * k];
      int32_t* o = &b.order[static_cast<size_t>(row) * k];
      for (int c = 0; c < k; ++c) {
        g[c] = lattice.logprob(t, c) + LmTerm(alpha, bound[c]) +
               (t + 1 < h ? b.best[b.Row(t + 1, c)] : 0.0);
        o[c] = c;
      }
      // (gain desc, rank asc) is a total order: std::sort gives the stable order without the
      // temporary buffer std::stable_sort allocates.
      std::sort(o, o + k, [g](int32_t x, int32_t y) { return g[x] != g[y] ? g[x] > g[y] : x < y; });
      b.best[row] = g[o[0]];
    }
  }
  return b;
}

// What a pass kept (the forward pass, or the beam for BeamSubgraphBound): per node, the number of
// leading ranks of its row's order that were scored and kept (used), and its row.
struct Survivors {
  explicit Survivors(std::pmr::memory_resource* memory) : used(memory), row(memory) {}
  ScratchVector<int32_t> used, row;
};

// Step 1: the p-th best total among the drafts of a beam search, or kNone. The beam keeps the
// nodes of highest prefix total + completion bound C of their row (an A*-style estimate: on the
// plausible 8x16 lattices it found better drafts than the prefix total alone, -13% arcs scored
// later). Unless `expanded` is null, the nodes it expanded are marked there (used = the number
// of leading ranks of their row's order it scored, and that row), for BeamSubgraphBound.
template <typename Lm>
double BeamLowerBound(ComposedLattice<Lm>& graph, const ArcBounds& bounds, double alpha, int64_t p,
                      Survivors* expanded) {
  const Lattice& lattice = graph.lattice();
  const int h = lattice.h, k = lattice.k;
  // For p = 1, width k / 4 clamped to [2, 4]. With the A*-style ranking, width 2 beat 4 on the
  // decoder's own 7x8 lattices (-10% time, bench/search_work.py's decoder set) and at 4x4 (-14%);
  // at k = 16, 4 beat 2 (unigram 8x16 -8%, 16x16 -5%); at 8x8 they tie. For p > 1 the p best
  // drafts of the beam's subgraph (BeamSubgraphBound) set the bound, and a wider beam makes it much
  // tighter: p / 2 + 2 cut the arcs scored at 8x16 p=16 by 20% against width 4; p / m (m arcs
  // per node, below) keeps at least p finals, capped at 4 k beyond that (the subgraph then holds
  // far more than p paths).
  // A beam node expands its m arcs of highest bound gain (its row's order), all of them when
  // k <= 8. At k = 16, 8 of the 16 found bounds as tight for fewer arcs (arcs scored -2% to -8%
  // on bench/search_work.py's 8x16 and 16x16 sets; A/B unigram 8x16 -3% to -8%, plausible and
  // 16x16 within noise); 4 or 6 left the plausible lattices' bound looser (+3% to +5% arcs).
  const int m = k <= 8 ? k : std::max(8, k / 2);
  const int64_t width =
      p == 1 ? std::clamp(k / 4, 2, 4)
             : std::max<int64_t>((p + m - 1) / m, std::min<int64_t>(p / 2 + 2, 4 * k));
  struct Candidate {
    double g;         // best prefix total reaching the node
    double estimate;  // g + C of the node's row
    int32_t node, rank;
  };
  std::pmr::memory_resource* memory = graph.memory();
  ScratchVector<Candidate> beam(1, {0.0, 0.0, graph.root(), -1}, memory), next(memory);
  ScratchVector<double> best(memory);  // per node id: best value this layer
  ScratchVector<double> finals(memory);
  next.reserve(static_cast<size_t>(width) * m);  // no regrowth inside the loop
  finals.reserve(static_cast<size_t>(width) * m);
  best.reserve(1 + static_cast<size_t>(h) * m * width);
  for (int t = 0; t < h; ++t) {
    next.clear();
    for (const Candidate& c : beam) {
      const int32_t row = t == 0 ? 0 : bounds.Row(t, c.rank);
      const int32_t* ranks = bounds.Order(row);
      graph.ScoreArcs(c.node, ranks, m);
      if (expanded != nullptr) {
        if (expanded->used.size() <= static_cast<size_t>(c.node)) {
          expanded->used.resize(graph.num_nodes(), 0);
          expanded->row.resize(graph.num_nodes(), 0);
        }
        expanded->used[c.node] = m;
        expanded->row[c.node] = row;  // its order lists the m scored ranks first
      }
      for (int j = 0; j < m; ++j) {
        const int r = ranks[j];
        const auto& arc = graph.GetArc(c.node, r);
        const double value = c.g + lattice.logprob(t, r) + LmTerm(alpha, arc.lm_ln);
        if (t == h - 1) {
          finals.push_back(value);
          continue;
        }
        if (best.size() < graph.num_nodes()) best.resize(graph.num_nodes(), kNone);
        if (best[arc.child] == kNone) next.push_back({0.0, 0.0, arc.child, r});
        best[arc.child] = std::max(best[arc.child], value);
      }
    }
    if (t == h - 1) break;
    for (Candidate& c : next) {
      c.g = best[c.node];
      best[c.node] = kNone;
      c.estimate = c.g + bounds.best[bounds.Row(t + 1, c.rank)];
    }
    if (static_cast<int64_t>(next.size()) > width) {
      std::nth_element(
          next.begin(), next.begin() + width, next.end(),
          [](const Candidate& a, const Candidate& b) { return a.estimate > b.estimate; });
      next.resize(width);
    }
    beam.swap(next);
  }
  if (static_cast<int64_t>(finals.size()) < p) return kNone;
  std::nth_element(finals.begin(), finals.begin() + (p - 1), finals.end(), std::greater<double>());
  return finals[p - 1];
}

// Step 2: forward max-product pass with branch-and-bound against `bound`.
template <typename Lm>
Survivors ForwardPass(ComposedLattice<Lm>& graph, const ArcBounds& bounds, double alpha,
                      double bound) {
  const Lattice& lattice = graph.lattice();
  const int h = lattice.h, k = lattice.k;
  ScratchVector<double> fwd(graph.num_nodes(), kNone, graph.memory());
  Survivors s(graph.memory());
  s.used.assign(graph.num_nodes(), 0);
  s.row.assign(graph.num_nodes(), -1);
  fwd[graph.root()] = 0;
  s.row[graph.root()] = 0;
  for (int t = 0; t < h; ++t) {
    for (const int32_t v : graph.LayerNodes(t)) {
      if (fwd[v] == kNone) continue;
      const int32_t row = s.row[v];
      if (fwd[v] + bounds.best[row] < bound) continue;
      const double* g = bounds.Gains(row);
      const int32_t* o = bounds.Order(row);
      int n = 0;
      while (n < k && fwd[v] + g[o[n]] >= bound) ++n;
      graph.ScoreArcs(v, o, n);
      if (fwd.size() < graph.num_nodes()) {
        fwd.resize(graph.num_nodes(), kNone);
        s.used.resize(graph.num_nodes(), 0);
        s.row.resize(graph.num_nodes(), -1);
      }
      for (int j = 0; j < n; ++j) {
        const auto& arc = graph.GetArc(v, o[j]);
        const double value = fwd[v] + lattice.logprob(t, o[j]) + LmTerm(alpha, arc.lm_ln);
        fwd[arc.child] = std::max(fwd[arc.child], value);
        if (t + 1 < h && s.row[arc.child] < 0) s.row[arc.child] = bounds.Row(t + 1, o[j]);
      }
      s.used[v] = n;
    }
  }
  return s;
}

// Value of the (already scored) arc (v, r) of layer t plus the best completion after it.
template <typename Lm>
double ArcValue(ComposedLattice<Lm>& graph, const ScratchVector<double>& beta, double alpha,
                int32_t v, int t, int r) {
  const auto& arc = graph.GetArc(v, r);
  return graph.lattice().logprob(t, r) + LmTerm(alpha, arc.lm_ln) + beta[arc.child];
}

// Step 3: beta(v) = best completion from v over the kept arcs, kNone where the search dropped v.
template <typename Lm>
ScratchVector<double> BackwardPass(ComposedLattice<Lm>& graph, const ArcBounds& bounds,
                                   const Survivors& kept, double alpha) {
  const int h = graph.lattice().h;
  ScratchVector<double> beta(graph.num_nodes(), kNone, graph.memory());
  for (int32_t v : graph.LayerNodes(h)) beta[v] = 0;
  for (int t = h - 1; t >= 0; --t)
    for (int32_t v : graph.LayerNodes(t))
      for (int i = 0; i < kept.used[v]; ++i)
        beta[v] =
            std::max(beta[v], ArcValue(graph, beta, alpha, v, t, bounds.Ranked(kept.row[v], i)));
  return beta;
}

// Step 4: best-first extraction over prefixes with the exact priority g + beta. Each node's live
// children are sorted by (value desc, rank asc) when first needed, so every pop of a complete
// prefix yields the next draft in (total desc, ranks asc) order.
template <typename Lm>
class DraftExtractor {
 public:
  DraftExtractor(ComposedLattice<Lm>& graph, const ArcBounds& bounds, const Survivors& kept,
                 const ScratchVector<double>& beta, double alpha)
      : graph_(graph),
        bounds_(bounds),
        kept_(kept),
        beta_(beta),
        alpha_(alpha),
        children_(graph.num_nodes(), graph.memory()),
        prefixes_(1, {-1, graph.root(), -1, 0.0}, graph.memory()),
        ties_(prefixes_),
        heap_(HeapOrder{&ties_}, ScratchVector<Entry>(graph.memory())),
        ranks_(graph.memory()) {
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
  struct HeapOrder {                         // a pops after b
    const TieBreaker* ties;
    bool operator()(const Entry& a, const Entry& b) const {
      return a.f != b.f ? a.f < b.f : ties->After(a, b);
    }
  };

  const ScratchVector<Child>& Children(int32_t v) {
    auto& list = children_[v];
    if (list.empty() && kept_.used[v] > 0) {
      const int t = graph_.layer(v);
      for (int i = 0; i < kept_.used[v]; ++i) {
        const int r = bounds_.Ranked(kept_.row[v], i);
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
  const Survivors& kept_;
  const ScratchVector<double>& beta_;
  const double alpha_;
  ScratchVector<ScratchVector<Child>> children_;
  ScratchVector<Prefix> prefixes_;
  TieBreaker ties_;
  std::priority_queue<Entry, ScratchVector<Entry>, HeapOrder> heap_;
  ScratchVector<int32_t> ranks_;
};

// Step 1, for p > 1: the p-th best total over every path of the beam's expanded subgraph (steps 3
// and 4 on it), or kNone when it has fewer than p paths. These are real drafts, so the true p-th
// best is >= this; and their set contains the beam's finals, so it is >= BeamLowerBound. Why: the
// finals differ only in their last tokens, while the p best drafts usually differ earlier too.
template <typename Lm>
double BeamSubgraphBound(ComposedLattice<Lm>& graph, const ArcBounds& bounds, Survivors expanded,
                         double alpha, int64_t p) {
  expanded.used.resize(graph.num_nodes(), 0);
  expanded.row.resize(graph.num_nodes(), 0);
  const ScratchVector<double> beta = BackwardPass(graph, bounds, expanded, alpha);
  Drafts drafts;
  drafts.h = graph.lattice().h;
  drafts.Reserve(std::min<int64_t>(p, kReservedDrafts));
  DraftExtractor<Lm> extract(graph, bounds, expanded, beta, alpha);
  while (drafts.n < p && extract.Next(&drafts)) {
  }
  return drafts.n == p ? drafts.scores.back() : kNone;
}

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
  if (EnumerableDrafts(lattice) > 0) return EnumerateDrafts(lattice, lm, start, options);
  const double alpha = options.alpha;
  ScratchMemory scratch;  // every array below, released at return (the drafts are copied out)
  ComposedLattice<Lm> graph(lattice, lm, start, scratch.resource());
  const ArcBounds bounds = BoundArcs(lattice, lm, start, alpha, scratch.resource());

  // 1. Lower bound, lowered by a rounding margin so that drafts scoring exactly L survive.
  Survivors expanded(scratch.resource());  // read only for p > 1
  double bound =
      BeamLowerBound(graph, bounds, alpha, options.p, options.p > 1 ? &expanded : nullptr);
  if (options.p > 1)
    bound =
        std::max(bound, BeamSubgraphBound(graph, bounds, std::move(expanded), alpha, options.p));
  if (bound != kNone) bound -= 1e-9 * (1.0 + std::fabs(bound));
  const Survivors kept = ForwardPass(graph, bounds, alpha, bound);              // 2.
  const ScratchVector<double> beta = BackwardPass(graph, bounds, kept, alpha);  // 3.
  Drafts out;                                                                   // 4.
  out.h = lattice.h;
  out.Reserve(std::min<int64_t>(options.p, kReservedDrafts));
  DraftExtractor<Lm> extract(graph, bounds, kept, beta, alpha);
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
