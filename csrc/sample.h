// Exact sampling of drafts from a lattice rescored by an n-gram LM (forward-backward).
//
// Target distribution over the k^h drafts: P(d) = exp(total(d)) / Z with
// total(d) = sum_t logprob(t, d_t) + alpha * ln p_LM(d | context) (nbest.h's total).
// The whole composed lattice (compose.h) is built, then a backward pass computes
// beta(node) = ln sum over completions of exp(remaining total) (beta = 0 at layer h), so
// ln Z = beta(root). Drafts are drawn left to right: at node v of layer t candidate r has the
// exact conditional probability q(r) = exp(logprob(t, r) + alpha * lm(v, r) + beta(child) - beta(v)),
// which is returned for every position (the verifier scatters it over the vocabulary); the
// product of a draft's q equals P(d).
// Cost: one LM Score per arc of the composed lattice (nodes * k, nodes <= 1 + sum_t k^min(t, n-1))
// plus O(n_samples * h * k). Randomness: a 64-bit seed (splitmix64 -> xoshiro-style stream),
// identical on every platform.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "hash.h"
#include "compose.h"
#include "lattice.h"

namespace dl {

struct DraftSamples {
  int64_t n = 0;
  int h = 0, k = 0;
  std::vector<int32_t> tokens;  // [n * h]
  std::vector<int32_t> ranks;   // [n * h]
  std::vector<double> q;        // [n * h * k] conditional distribution of each head's candidates
  std::vector<double> logprobs; // [n] ln P(d) of each sampled draft (sum of ln q)
  double log_z = 0;             // ln Z, the log-partition of the rescored lattice
};

// Deterministic 64-bit generator (splitmix64): small, fast, platform-independent.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return Mix64(state_ += 0x9E3779B97F4A7C15ull); }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)

 private:
  uint64_t state_;
};

// Most q values (n * h * k doubles, 1 GiB) one SampleDrafts call may return.
inline constexpr int64_t kMaxSampleValues = int64_t{1} << 27;

template <typename Lm>
DraftSamples SampleDrafts(const Lattice& lattice, const Lm& lm, const int32_t* context,
                          size_t context_size, const RescoreOptions& options, int64_t n,
                          uint64_t seed) {
  options.Validate();
  if (n < 0) throw InvalidArgument(Message("number of samples must be >= 0, got ", n));
  const int h = lattice.h, k = lattice.k;
  // q holds n * h * k doubles: bound it before the composed lattice or any output is allocated.
  if (n > kMaxSampleValues / (static_cast<int64_t>(h) * k))
    throw InvalidArgument(Message("n=", n, " samples of h=", h, " heads with k=", k,
                                  " candidates exceed the limit of ", kMaxSampleValues,
                                  " q values per call; sample in smaller batches"));
  ComposedLattice<Lm> graph(lattice, lm, context, context_size, options.bos);
  std::vector<int32_t> all_ranks(k);
  for (int r = 0; r < k; ++r) all_ranks[r] = r;
  for (int t = 0; t < h; ++t)
    for (size_t i = 0; i < graph.LayerNodes(t).size(); ++i)  // the layer after t grows meanwhile
      graph.ScoreArcs(graph.LayerNodes(t)[i], all_ranks.data(), k);

  std::vector<double> beta(graph.num_nodes(), 0.0);
  std::vector<double> weight(k);
  auto arc_weights = [&](int32_t node, int t) {  // weight[r] = total of arc r + beta(child)
    for (int r = 0; r < k; ++r) {
      const auto& arc = graph.GetArc(node, r);
      weight[r] = lattice.logprob(t, r) + options.alpha * arc.lm_ln + beta[arc.child];
    }
  };
  for (int t = h - 1; t >= 0; --t)
    for (int32_t node : graph.LayerNodes(t)) {
      arc_weights(node, t);
      const double top = *std::max_element(weight.begin(), weight.end());
      double sum = 0;
      for (double w : weight) sum += std::exp(w - top);
      beta[node] = top + std::log(sum);
    }

  DraftSamples out;
  out.n = n;
  out.h = h;
  out.k = k;
  out.log_z = beta[graph.root()];
  out.tokens.resize(static_cast<size_t>(n) * h);
  out.ranks.resize(static_cast<size_t>(n) * h);
  out.q.resize(static_cast<size_t>(n) * h * k);
  out.logprobs.assign(n, 0.0);
  SplitMix64 rng(seed);
  for (int64_t s = 0; s < n; ++s) {
    int32_t node = graph.root();
    for (int t = 0; t < h; ++t) {
      arc_weights(node, t);
      double* q = &out.q[(static_cast<size_t>(s) * h + t) * k];
      double sum = 0;
      for (int r = 0; r < k; ++r) sum += (q[r] = std::exp(weight[r] - beta[node]));
      for (int r = 0; r < k; ++r) q[r] /= sum;  // removes the rounding of beta
      const double u = rng.Uniform();
      int chosen = k - 1;
      double cumulative = 0;
      for (int r = 0; r < k; ++r) {
        cumulative += q[r];
        if (u < cumulative && q[r] > 0) { chosen = r; break; }
      }
      while (q[chosen] <= 0 && chosen > 0) --chosen;  // u beyond the rounded total mass
      out.ranks[s * h + t] = chosen;
      out.tokens[s * h + t] = lattice.token(t, chosen);
      out.logprobs[s] += std::log(q[chosen]);
      node = graph.GetArc(node, chosen).child;
    }
  }
  return out;
}

}  // namespace dl
