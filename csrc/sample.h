// Exact sampling of drafts from a lattice rescored by an n-gram LM (forward-backward).
//
// Target distribution over the k^h drafts: P(d) = exp(total(d)) / Z with
// total(d) = sum_t logprob(t, d_t) + alpha * ln p_LM(d | context) (nbest.h's total).
// The whole composed lattice (compose.h) is built, then a backward pass computes
// beta(node) = ln sum over completions of exp(remaining total) (beta = 0 at layer h), so
// ln Z = beta(root). Drafts are drawn left to right: at node v of layer t candidate r has the
// exact conditional probability q(r) = exp(logprob(t, r) + alpha * lm(v, r) + beta(child) -
// beta(v)), which is returned for every position (the verifier scatters it over the vocabulary);
// the product of a draft's q equals P(d).
//
// Full support (other_ln != nullptr): every position also has an "other" arc, rank k, standing
// for all the vocabulary outside the head's top-k. Its lattice log-prob is other_ln[t] (the
// head's mass outside the top-k, natural log; -inf = no mass). Its LM log-prob is the LM's
// probability of that event, ln(1 - sum_r p_LM(candidate r | state)), floored at
// kOtherLmFloor (an inconsistent LM can give the candidates a mass >= 1). After it the LM state
// restarts from an empty context (no <s>), as after an unknown word, so the weights of the later
// positions do not depend on which concrete token the arc stands for: the caller draws that
// token from the head restricted to the complement of the top-k, and the proposal law of the
// concrete draft is q(other) * head(token) / head mass outside the top-k, exactly.
// Sampled "other" positions have rank k and token -1; q has k + 1 columns.
//
// Cost: one LM Score per arc of the composed lattice (nodes * k, nodes <= 1 + sum_t k^min(t, n-1),
// plus one restarted-state node per layer with full support) plus O(n_samples * h * k).
// Randomness: a 64-bit seed (splitmix64 -> xoshiro-style stream), identical on every platform.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "compose.h"
#include "hash.h"
#include "lattice.h"

namespace dl {

struct DraftSamples {
  int64_t n = 0;
  int h = 0, k = 0;              // k: columns of q (the lattice's k, plus 1 with full support)
  std::vector<int32_t> tokens;   // [n * h], -1 where the "other" arc was drawn
  std::vector<int32_t> ranks;    // [n * h]
  std::vector<double> q;         // [n * h * k] conditional distribution of each head's candidates
  std::vector<double> logprobs;  // [n] ln P(d) of each sampled draft (sum of ln q)
  double log_z = 0;              // ln Z, the log-partition of the rescored lattice
};

// LM probability given to an "other" arc when the LM's candidates already hold all its mass.
constexpr double kOtherLmFloor = 1e-10;

// Deterministic 64-bit generator (splitmix64): small, fast, platform-independent.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return Mix64(state_ += 0x9E3779B97F4A7C15ull); }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)

 private:
  uint64_t state_;
};

constexpr double kMaxSampleCells = 268435456.0;  // 2^28, see SampleDrafts

// The LM starts in `start` (a state of `lm`, checked): a decoder keeps its committed text's state
// and pays per step only for the tokens it accepted. The overload below starts after a context.
template <typename Lm>
DraftSamples SampleDrafts(const Lattice& lattice, const Lm& lm, const LmState& start,
                          const RescoreOptions& options, int64_t n, uint64_t seed,
                          const double* other_ln = nullptr) {
  options.Validate();
  lm.CheckState(start);
  if (n < 0) throw InvalidArgument(Message("number of samples must be >= 0, got ", n));
  const int h = lattice.h, k = lattice.k;
  const bool other = other_ln != nullptr;
  // The result holds n * h * (k + 1) conditionals: bound it before allocating (2^28 doubles,
  // 2 GiB), so a typo like n = 2**31 is an error, not a machine out of memory.
  if (static_cast<double>(n) * h * (k + 1) > kMaxSampleCells)
    throw InvalidArgument(Message("n=", n, " samples of ", h, " x ", k + (other ? 1 : 0),
                                  " conditionals exceed the limit of ", kMaxSampleCells,
                                  " values; draw them in batches"));
  if (other)
    for (int t = 0; t < h; ++t)
      if (std::isnan(other_ln[t]) || other_ln[t] > 1e-9)
        throw InvalidArgument(Message("other-mass log-prob of position ", t,
                                      " must be <= 0 or -inf, got ", other_ln[t]));
  const int columns = k + (other ? 1 : 0);
  ComposedLattice<Lm> graph(lattice, lm, start);
  const LmState restart = lm.Start(nullptr, 0, false);
  std::vector<int32_t> all_ranks(k);
  for (int r = 0; r < k; ++r) all_ranks[r] = r;
  for (int t = 0; t < h; ++t)
    for (size_t i = 0; i < graph.LayerNodes(t).size(); ++i) {  // the layer after t grows meanwhile
      graph.ScoreArcs(graph.LayerNodes(t)[i], all_ranks.data(), k);
      if (other) graph.NodeAt(t + 1, restart);
    }

  std::vector<double> beta(graph.num_nodes(), 0.0);
  std::vector<double> weight(columns);
  auto arc_weights = [&](int32_t node, int t) {  // weight[r] = total of arc r + beta(child)
    double lm_mass = 0;
    for (int r = 0; r < k; ++r) {
      const auto& arc = graph.GetArc(node, r);
      weight[r] = lattice.logprob(t, r) + LmTerm(options.alpha, arc.lm_ln) + beta[arc.child];
      lm_mass += std::exp(static_cast<double>(arc.lm_ln));
    }
    if (other) {
      const double lm_other = std::log(std::max(1.0 - lm_mass, kOtherLmFloor));
      weight[k] =
          other_ln[t] + LmTerm(options.alpha, lm_other) + beta[graph.NodeAt(t + 1, restart)];
    }
  };
  auto child_of = [&](int32_t node, int t, int r) {
    return r < k ? graph.GetArc(node, r).child : graph.NodeAt(t + 1, restart);
  };
  for (int t = h - 1; t >= 0; --t)
    for (int32_t node : graph.LayerNodes(t)) {
      arc_weights(node, t);
      const double top = *std::max_element(weight.begin(), weight.end());
      double sum = 0;
      for (double w : weight) sum += std::exp(w - top);
      // A node whose every continuation is impossible (-inf: the LM's -inf with alpha > 0) has
      // beta -inf, not -inf - -inf = NaN; its arcs then get probability 0 from the parent.
      beta[node] = top == -std::numeric_limits<double>::infinity() ? top : top + std::log(sum);
    }
  if (beta[graph.root()] == -std::numeric_limits<double>::infinity())
    throw InvalidArgument(
        Message("every draft has probability 0 (the LM gives -inf to a token of "
                "each and alpha=",
                options.alpha, " > 0): nothing to sample"));

  DraftSamples out;
  out.n = n;
  out.h = h;
  out.k = columns;
  out.log_z = beta[graph.root()];
  out.tokens.resize(static_cast<size_t>(n) * h);
  out.ranks.resize(static_cast<size_t>(n) * h);
  out.q.resize(static_cast<size_t>(n) * h * columns);
  out.logprobs.assign(n, 0.0);
  SplitMix64 rng(seed);
  for (int64_t s = 0; s < n; ++s) {
    int32_t node = graph.root();
    for (int t = 0; t < h; ++t) {
      arc_weights(node, t);
      double* q = &out.q[(static_cast<size_t>(s) * h + t) * columns];
      double sum = 0;
      for (int r = 0; r < columns; ++r) sum += (q[r] = std::exp(weight[r] - beta[node]));
      for (int r = 0; r < columns; ++r) q[r] /= sum;  // removes the rounding of beta
      const double u = rng.Uniform();
      int chosen = columns - 1;
      double cumulative = 0;
      for (int r = 0; r < columns; ++r) {
        cumulative += q[r];
        if (u < cumulative && q[r] > 0) {
          chosen = r;
          break;
        }
      }
      while (q[chosen] <= 0 && chosen > 0) --chosen;  // u beyond the rounded total mass
      out.ranks[s * h + t] = chosen;
      out.tokens[s * h + t] = chosen < k ? lattice.token(t, chosen) : -1;
      out.logprobs[s] += std::log(q[chosen]);
      node = child_of(node, t, chosen);
    }
  }
  return out;
}

template <typename Lm>
DraftSamples SampleDrafts(const Lattice& lattice, const Lm& lm, const int32_t* context,
                          size_t context_size, const RescoreOptions& options, int64_t n,
                          uint64_t seed, const double* other_ln = nullptr) {
  return SampleDrafts(lattice, lm, lm.Start(context, context_size, options.bos), options, n, seed,
                      other_ln);
}

}  // namespace dl
