// The n best nodes of a lattice's prefix tree: the token tree to verify under a node budget.
//
// A greedy verification call accepts the longest drafted prefix of the target's continuation, so
// a tree of drafts is worth the sum, over its nodes, of the chance that the node's prefix is
// accepted. The p best *drafts* spend nodes on the tails of unlikely drafts (every draft runs to
// the last head); the n best *prefixes* put each node where the scores say acceptance is likeliest
// (EAGLE-2's and Sequoia's trees, here over the lattice rescored by the n-gram LM).
//
// Score of a prefix d_1..d_m (one candidate for each of the first m heads):
//   total(d) = sum_t logprob(t, d_t) + alpha * ln p_LM(d_1..d_m | context)
// (no LM: the lattice term alone). Every term is <= 0, so a prefix never scores above its parent:
// the order (total desc, length asc, rank sequence lexicographic asc) puts every parent before its
// children, and its first n prefixes are a tree. That is the result, exactly: a best-first search
// pops prefixes in this order, pushing each popped prefix's k children (one batched LM call); after
// n pops the heap holds every candidate for the next one. Cost: n * k LM scores, O(n k log(n k)).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "compose.h"
#include "errors.h"
#include "lattice.h"

namespace dl {

// Options of BestNodes: total = lattice + alpha * LM (LmTerm: alpha = 0 drops the LM term).
struct NodeTreeOptions {
  // Most nodes one call may ask for (the tree's arrays are reserved up front).
  static constexpr int64_t kMaxNodes = int64_t{1} << 20;

  int64_t n = 1;       // nodes (prefixes) wanted
  double alpha = 1.0;  // LM weight, in [0, kMaxAlpha]
  bool bos = false;    // put <s> before the context

  void Validate() const {
    if (n < 1) throw InvalidArgument(Message("nodes must be >= 1, got nodes=", n));
    if (n > kMaxNodes)
      throw InvalidArgument(Message("nodes must be <= ", kMaxNodes, ", got nodes=", n));
    ValidateAlpha(alpha);
  }
};

// The chosen prefixes in the order above (best first): node i extends node parent[i] (-1: the
// root, i.e. the empty prefix) by candidate rank[i] of head depth[i] - 1, token token[i].
struct NodeTree {
  std::vector<int32_t> parent, rank, depth, token;
  std::vector<double> score;  // total of the prefix
  int64_t size() const { return static_cast<int64_t>(parent.size()); }
};

namespace best_nodes_detail {

struct Candidate {
  double total;
  int32_t parent;  // node id, -1 for the root
  int32_t rank;
  int32_t depth;  // of the candidate itself (1 = first head)
};

// Candidates in the result's order; a rank sequence is compared only on an exact tie of
// (total, depth), walking the parents' ranks.
class Order {
 public:
  explicit Order(const NodeTree& tree) : tree_(tree) {}
  // True when a comes after b (the heap's "less": the top is the first in order).
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.total != b.total) return a.total < b.total;
    if (a.depth != b.depth) return a.depth > b.depth;
    Ranks(a, &a_);
    Ranks(b, &b_);
    return std::lexicographical_compare(b_.begin(), b_.end(), a_.begin(), a_.end());
  }

 private:
  void Ranks(const Candidate& c, std::vector<int32_t>* out) const {
    out->assign(1, c.rank);
    for (int32_t p = c.parent; p >= 0; p = tree_.parent[p]) out->push_back(tree_.rank[p]);
    std::reverse(out->begin(), out->end());
  }
  const NodeTree& tree_;
  mutable std::vector<int32_t> a_, b_;
};

}  // namespace best_nodes_detail

// The min(n, k + k^2 + ... + k^h) best prefixes of `lattice`, the LM (null: none) starting in
// state `start`. Throws InvalidArgument for nodes < 1, alpha < 0 or NaN, a state of another model,
// or lattice tokens `lm` rejects. With alpha > 0 a prefix the LM gives -inf is never chosen.
template <typename Lm>
NodeTree BestNodes(const Lattice& lattice, const Lm* lm, const LmState& start,
                   const NodeTreeOptions& options) {
  using best_nodes_detail::Candidate;
  options.Validate();
  if (lm != nullptr) {
    lm->CheckState(start);
    lm->CheckTokens(lattice.tokens.data(), lattice.tokens.size(), "lattice tokens");
  }
  const int h = lattice.h, k = lattice.k;
  const double alpha = lm != nullptr ? options.alpha : 0.0;
  NodeTree tree;
  const size_t wanted = static_cast<size_t>(options.n);
  for (auto* v : {&tree.parent, &tree.rank, &tree.depth, &tree.token}) v->reserve(wanted);
  tree.score.reserve(wanted);
  std::vector<LmState> states;  // per chosen node, its LM state (with an LM)
  if (lm != nullptr) states.reserve(wanted);
  std::vector<Candidate> heap;
  heap.reserve(wanted * k + k);
  const best_nodes_detail::Order after(tree);
  std::vector<float> lm_ln(k, 0.0f);
  std::vector<LmState> next(k);

  // Pushes the k children of node `parent` (-1: the root) at `depth` (their depth).
  auto push_children = [&](int32_t parent, int depth, double base, const LmState& state) {
    if (depth > h) return;
    const int32_t* tokens = &lattice.tokens[static_cast<size_t>(depth - 1) * k];
    if (lm != nullptr) lm->ScoreTokens(state, tokens, k, lm_ln.data(), next.data());
    for (int r = 0; r < k; ++r) {
      const double total = base + lattice.logprob(depth - 1, r) + LmTerm(alpha, lm_ln[r]);
      if (total == -std::numeric_limits<double>::infinity()) continue;  // impossible under the LM
      heap.push_back({total, parent, r, depth});
      std::push_heap(heap.begin(), heap.end(), after);
    }
  };
  push_children(-1, 1, 0.0, start);
  while (tree.size() < options.n && !heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), after);
    const Candidate c = heap.back();
    heap.pop_back();
    const int32_t id = static_cast<int32_t>(tree.size());
    const int32_t token = lattice.token(c.depth - 1, c.rank);
    tree.parent.push_back(c.parent);
    tree.rank.push_back(c.rank);
    tree.depth.push_back(c.depth);
    tree.token.push_back(token);
    tree.score.push_back(c.total);
    LmState state;
    if (lm != nullptr) {
      // The child's state again (one LM step): keeping k states per pushed candidate would cost
      // more than recomputing the one of each popped node.
      const LmState& from = c.parent >= 0 ? states[c.parent] : start;
      float unused;
      lm->ScoreTokens(from, &token, 1, &unused, &state);
      states.push_back(state);
    }
    push_children(id, c.depth + 1, c.total, state);
  }
  return tree;
}

// The same after <s> (when options.bos) and `context` (token ids; only the last order-1 matter).
template <typename Lm>
NodeTree BestNodes(const Lattice& lattice, const Lm& lm, const int32_t* context,
                   size_t context_size, const NodeTreeOptions& options) {
  lm.CheckTokens(context, context_size, "context");
  return BestNodes(lattice, &lm, lm.Start(context, context_size, options.bos), options);
}

}  // namespace dl
