// Composition of a top-k lattice with a backoff n-gram LM, as a layered DAG built on demand.
//
// Node (t, state): position t in 0..h and the LM state after the tokens of heads 0..t-1 (the
// context's state at t = 0). Prefixes reaching equal states (LmState ==, i.e. equal retained
// history) share a node, because their futures score identically. The LM is deterministic, so a
// token sequence is exactly one path: arc (node, rank r) consumes candidate r of head t, weighs
// lattice logprob(t, r) + alpha * ln p_LM(token | state), and leads to (t+1, next state).
// Arcs are scored lazily, once per (node, rank), so a search that visits few arcs calls the LM
// few times. Exact Katz backoff comes from the LM's Score.
//
// The LM type is a template parameter with
//   LmState Start(const int32_t* context, size_t n, bool bos) const;        // (context ctor)
//   float ScoreToken(const LmState& in, int32_t token, LmState* out) const;   // natural log
//   void ScoreTokens(const LmState& in, const int32_t* tokens, int n, float* lm_ln,
//                    LmState* outs) const;                                  // n at once
//   void BoundsAfter(const int32_t* prev, int rows, const int32_t* tokens, int n, float* out)
//   const; void BoundsAfter(const LmState& state, const int32_t* tokens, int n, float* out) const;
//       // out[i * n + j] >= ScoreToken(any state after a history ending in prev[i], tokens[j])
//   void BoundsAfter(const int32_t* before, int n_before, const uint8_t* may_precede,
//                    const int32_t* prev, int rows, const int32_t* tokens, int n, float* out,
//                    uint8_t* may_pair) const;
//   void BoundsAfter(const LmState& start, const int32_t* prev, int rows, const int32_t* tokens,
//                    int n, float* out, uint8_t* may_pair) const;
//       // the same for histories whose word before prev[i] is one of `before` (the start
//       // state's last word), may_pair out: whether "prev[i] tokens[j]" may be stored
// and, for the entry points that validate their input (nbest.h),
//   void CheckTokens(const int32_t* tokens, size_t n, const char* what) const;  // throws
//   void CheckState(const LmState& state) const;                                 // throws
// (dl::TokenLm, or a test model). ScoreArcs scores several arcs of one node in one ScoreTokens
// call, so that their LM probes overlap. Nodes live in flat arrays indexed by id, found through one
// open-addressing table keyed by (layer, state): one LM Score plus ~1 probe per scored arc.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory_resource>
#include <vector>

#include "errors.h"
#include "lattice.h"
#include "ngram/model.h"
#include "scratch.h"

namespace dl {

// The LM term alpha * lm_ln of a total. alpha = 0 means the LM is not used at all: the term is 0
// even where the LM gives -inf (an impossible n-gram, oov_logprob=-inf), not 0 * -inf = NaN.
// With alpha > 0 a -inf LM score makes the total -inf: that draft is impossible.
inline double LmTerm(double alpha, double lm_ln) { return alpha == 0 ? 0.0 : alpha * lm_ln; }

// Largest LM weight: LM and lattice scores are finite floats (>= -3.4e38), so with alpha <= 1e6
// every finite term, and a sum of them over any lattice, stays a finite double. A larger alpha
// (1e307) overflows alpha * ln p_LM to -inf, which would silently mark every draft impossible.
inline constexpr double kMaxAlpha = 1e6;

// Throws InvalidArgument unless 0 <= alpha <= kMaxAlpha (NaN and inf fail).
inline void ValidateAlpha(double alpha) {
  if (!(alpha >= 0 && alpha <= kMaxAlpha))
    throw InvalidArgument(Message("alpha must be finite and >= 0, at most ", kMaxAlpha,
                                  " (a larger LM weight overflows the scores), got alpha=", alpha));
}

// Options of the rescoring search and the sampler: total(d) = lattice(d) + alpha * lm(d)
// (LmTerm: alpha = 0 drops the LM term).
struct RescoreOptions {
  // Most drafts one call may ask for: the n-best search reserves per requested draft, and p near
  // 2^63 would overflow its counters, so larger requests fail before anything is allocated.
  static constexpr int64_t kMaxDrafts = int64_t{1} << 24;

  int64_t p = 1;       // number of drafts (nbest.h); ignored by sampling
  double alpha = 1.0;  // LM weight, in [0, kMaxAlpha] (nbest.h's admissible bound needs >= 0)
  bool bos = false;    // put <s> before the context

  void Validate() const {
    if (p < 1) throw InvalidArgument(Message("p must be >= 1, got p=", p));
    if (p > kMaxDrafts) throw InvalidArgument(Message("p must be <= ", kMaxDrafts, ", got p=", p));
    ValidateAlpha(alpha);
  }
};

template <typename Lm>
class ComposedLattice {
 public:
  struct Arc {
    float lm_ln = 0;     // ln p_LM(token | node's state), unweighted
    int32_t child = -1;  // node id at t + 1, or -1 while unscored
  };

  // The root is the LM state `start` (e.g. the state of the committed text, advanced token by
  // token by its owner); precondition: a state of `lm` (TokenLm::CheckState). Its arrays live in
  // `memory` (a call's ScratchMemory, or the heap).
  ComposedLattice(const Lattice& lattice, const Lm& lm, const LmState& start,
                  std::pmr::memory_resource* memory = std::pmr::get_default_resource())
      : lattice_(lattice),
        lm_(lm),
        layers_(lattice.h + 1, memory),
        layer_of_(memory),
        states_(memory),
        hashes_(memory),
        slots_(memory),
        arcs_(memory),
        pending_ranks_(memory),
        pending_tokens_(memory),
        pending_ln_(memory),
        pending_states_(memory) {
    // Capacity for one layer of k nodes per head up front: at small shapes the growth of these
    // arrays (reallocation, rehashing) cost about as much as the LM probes (callgrind, 4x4).
    const size_t nodes = 1 + static_cast<size_t>(lattice.h) * lattice.k;
    size_t slots = 64;
    while (slots < 2 * nodes) slots *= 2;
    slots_.assign(slots, -1);
    layer_of_.reserve(nodes);
    states_.reserve(nodes);
    hashes_.reserve(nodes);
    arcs_.reserve(nodes * lattice.k);
    for (auto& layer : layers_) layer.reserve(lattice.k);
    AddNode(0, start);
  }
  // The root is the state after <s> (when bos) and the context tokens.
  ComposedLattice(const Lattice& lattice, const Lm& lm, const int32_t* context, size_t context_size,
                  bool bos, std::pmr::memory_resource* memory = std::pmr::get_default_resource())
      : ComposedLattice(lattice, lm, lm.Start(context, context_size, bos), memory) {}

  const Lattice& lattice() const { return lattice_; }
  // Where this graph's arrays live; the search's other arrays use it too.
  std::pmr::memory_resource* memory() const { return layer_of_.get_allocator().resource(); }
  int32_t root() const { return 0; }
  size_t num_nodes() const { return layer_of_.size(); }
  int64_t arcs_scored() const { return arcs_scored_; }
  int layer(int32_t node) const { return layer_of_[node]; }

  // The arc of `node` (not in the last layer) taking candidate `rank` of its head; scored on
  // first use. The reference stays valid until the next GetArc.
  const Arc& GetArc(int32_t node, int rank) {
    const size_t slot = static_cast<size_t>(node) * lattice_.k + rank;
    if (arcs_[slot].child < 0) {
      const int t = layer_of_[node];
      LmState next;
      const float lm_ln = lm_.ScoreToken(states_[node], lattice_.token(t, rank), &next);
      const int32_t child = AddNode(t + 1, next);  // may grow arcs_: index again below
      arcs_[slot] = {lm_ln, child};
      ++arcs_scored_;
    }
    return arcs_[slot];
  }
  // Scores the not yet scored arcs among ranks[0..n) of `node` (one batched LM call).
  void ScoreArcs(int32_t node, const int32_t* ranks, int n) {
    const int t = layer_of_[node];
    const size_t base = static_cast<size_t>(node) * lattice_.k;
    pending_ranks_.clear();
    pending_tokens_.clear();
    for (int i = 0; i < n; ++i)
      if (arcs_[base + ranks[i]].child < 0) {
        pending_ranks_.push_back(ranks[i]);
        pending_tokens_.push_back(lattice_.token(t, ranks[i]));
      }
    const int m = static_cast<int>(pending_ranks_.size());
    if (m == 0) return;
    pending_ln_.resize(m);
    pending_states_.resize(m);
    const LmState in = states_[node];  // AddNode may grow states_
    lm_.ScoreTokens(in, pending_tokens_.data(), m, pending_ln_.data(), pending_states_.data());
    for (int i = 0; i < m; ++i) {
      const int32_t child = AddNode(t + 1, pending_states_[i]);  // may grow arcs_
      arcs_[base + pending_ranks_[i]] = {pending_ln_[i], child};
    }
    arcs_scored_ += m;
  }
  bool IsScored(int32_t node, int rank) const {
    return arcs_[static_cast<size_t>(node) * lattice_.k + rank].child >= 0;
  }

  // The node (t, state), created if new (sample.h's "other" arcs lead to a fixed state).
  int32_t NodeAt(int t, const LmState& state) { return AddNode(t, state); }

  // Nodes of layer t in creation order.
  const ScratchVector<int32_t>& LayerNodes(int t) const { return layers_[t]; }

 private:
  static uint64_t Hash(int t, const LmState& state) {
    return (LmStateHash()(state) ^ (static_cast<uint64_t>(t) * 0xD6E8FEB86659FD93ull)) *
           0x9E3779B97F4A7C15ull;
  }

  int32_t AddNode(int t, const LmState& state) {
    const uint64_t hash = Hash(t, state);
    size_t mask = slots_.size() - 1;
    for (size_t i = (hash >> 20) & mask;; i = (i + 1) & mask) {
      const int32_t id = slots_[i];
      if (id < 0) break;
      if (hashes_[id] == hash && layer_of_[id] == t && states_[id] == state) return id;
    }
    const int32_t id = static_cast<int32_t>(layer_of_.size());
    layers_[t].push_back(id);
    layer_of_.push_back(t);
    states_.push_back(state);
    hashes_.push_back(hash);
    // Arcs [id * k, (id + 1) * k), unscored (final nodes keep theirs unused: ids stay aligned).
    // Grown in doubling steps, not by k per node: a resize is an out-of-line call.
    const size_t arcs_needed = (static_cast<size_t>(id) + 1) * lattice_.k;
    if (arcs_.size() < arcs_needed) arcs_.resize(std::max(arcs_needed, 2 * arcs_.size()));
    if (2 * layer_of_.size() > slots_.size()) {
      slots_.assign(slots_.size() * 2, -1);  // rehash everything, the new node included
      mask = slots_.size() - 1;
      for (int32_t n = 0; n <= id; ++n) Insert(n, mask);
    } else {
      Insert(id, mask);
    }
    return id;
  }

  void Insert(int32_t id, size_t mask) {
    size_t i = (hashes_[id] >> 20) & mask;
    while (slots_[i] >= 0) i = (i + 1) & mask;
    slots_[i] = id;
  }

  const Lattice& lattice_;
  const Lm& lm_;
  ScratchVector<ScratchVector<int32_t>> layers_;
  ScratchVector<int> layer_of_;
  ScratchVector<LmState> states_;
  ScratchVector<uint64_t> hashes_;
  ScratchVector<int32_t> slots_;  // open addressing, power-of-two size, -1 = empty
  ScratchVector<Arc> arcs_;       // [>= num_nodes * k]
  ScratchVector<int32_t> pending_ranks_, pending_tokens_;  // ScoreArcs scratch
  ScratchVector<float> pending_ln_;
  ScratchVector<LmState> pending_states_;
  int64_t arcs_scored_ = 0;
};

}  // namespace dl
