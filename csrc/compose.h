// Composition of a top-k lattice with a backoff n-gram LM, as a layered DAG built on demand.
//
// Node (t, state): position t in 0..h and the LM state after the tokens of heads 0..t-1 (the
// context's state at t = 0). Prefixes reaching equal states (LmState ==, i.e. equal retained
// history) share a node, because their futures score identically. The LM is deterministic, so a
// token sequence is exactly one path: arc (node, rank r) consumes candidate r of head t, weighs
// lattice logprob(t, r) + alpha * ln p_LM(token | state), and leads to (t+1, next state).
// Arcs are scored lazily, once per (node, rank) (Arc::child < 0 until scored), so a search that
// visits few nodes calls the LM few times. Exact Katz backoff comes from the LM's Score.
//
// The LM type is a template parameter with
//   LmState Start(const int32_t* context, size_t n, bool bos) const;
//   float ScoreToken(const LmState& in, int32_t token, LmState* out) const;   // natural log
// (dl::TokenLm, or a test model). Cost: one hash probe per scored arc plus the LM's Score.
#pragma once

#include <cmath>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "errors.h"
#include "lattice.h"
#include "ngram/model.h"

namespace dl {

// Options of the rescoring search and the sampler: total(d) = lattice(d) + alpha * lm(d).
struct RescoreOptions {
  int64_t p = 1;       // number of drafts (nbest.h); ignored by sampling
  double alpha = 1.0;  // LM weight, >= 0 (the admissible bound of nbest.h needs it)
  bool bos = false;    // put <s> before the context

  void Validate() const {
    if (p < 1) throw InvalidArgument(Message("p must be >= 1, got p=", p));
    if (!(alpha >= 0) || !std::isfinite(alpha))
      throw InvalidArgument(Message("alpha must be finite and >= 0, got alpha=", alpha));
  }
};

template <typename Lm>
class ComposedLattice {
 public:
  struct Arc {
    float lm_ln = 0;    // ln p_LM(token | node's state), unweighted
    int32_t child = -1; // node id at t + 1, or -1 while unscored
  };

  ComposedLattice(const Lattice& lattice, const Lm& lm, const int32_t* context, size_t context_size,
                  bool bos)
      : lattice_(lattice), lm_(lm), layers_(lattice.h + 1) {
    AddNode(0, lm.Start(context, context_size, bos));
  }

  const Lattice& lattice() const { return lattice_; }
  int32_t root() const { return 0; }
  size_t num_nodes() const { return layer_of_.size(); }
  int layer(int32_t node) const { return layer_of_[node]; }

  // The arc of `node` taking candidate `rank` of its head; scores it on first use.
  const Arc& GetArc(int32_t node, int rank) {
    const size_t slot = static_cast<size_t>(node) * lattice_.k + rank;
    if (arcs_[slot].child < 0) {
      const int t = layer_of_[node];
      LmState next;
      const float lm_ln = lm_.ScoreToken(states_[node], lattice_.token(t, rank), &next);
      const int32_t child = AddNode(t + 1, next);  // may grow arcs_: index again below
      arcs_[slot] = {lm_ln, child};
    }
    return arcs_[slot];
  }

  // Nodes of layer t in creation order (for full passes: sampling).
  const std::vector<int32_t>& LayerNodes(int t) const { return layers_[t].ids; }

 private:
  struct Layer {
    std::unordered_map<LmState, int32_t, LmStateHash> index;
    std::vector<int32_t> ids;
  };

  int32_t AddNode(int t, const LmState& state) {
    Layer& layer = layers_[t];
    auto [it, inserted] = layer.index.try_emplace(state, static_cast<int32_t>(layer_of_.size()));
    if (inserted) {
      layer.ids.push_back(it->second);
      layer_of_.push_back(t);
      states_.push_back(state);
      arcs_.resize(arcs_.size() + lattice_.k);  // final nodes keep unused arcs: ids stay aligned
    }
    return it->second;
  }

  const Lattice& lattice_;
  const Lm& lm_;
  std::vector<Layer> layers_;
  std::vector<int> layer_of_;
  std::vector<LmState> states_;
  std::vector<Arc> arcs_;  // [num_nodes * k]
};

}  // namespace dl
