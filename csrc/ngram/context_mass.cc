#include "ngram/context_mass.h"

#include <algorithm>
#include <cmath>

namespace dl::ngram {
namespace {

// ln p(ids[n-1] | ids[0..n-1)) by the backoff rule over the tables built so far (n >= 1).
double BackoffLogProb(const WordIndex* ids, int n, const std::vector<Entry>& unigrams,
                      std::vector<TableBuilder>& tables) {
  double backoff = 0;
  for (int j = 0; j + 1 < n; ++j) {  // the (n - j)-gram ids[j..n), longest first
    const Entry* gram = tables[n - j - 2].Find(KeyOfWords(ids + j, n - j));
    if (gram != nullptr && gram->listed()) return backoff + gram->prob_ln;
    const int m = n - j - 1;  // back off past the context ids[j..n-1)
    if (m == 1) {
      backoff += unigrams[ids[j]].backoff_ln;
    } else {
      const Entry* context = tables[m - 2].Find(KeyOfWords(ids + j, m));
      if (context != nullptr && context->listed()) backoff += context->backoff_ln;
    }
  }
  return backoff + unigrams[ids[n - 1]].prob_ln;
}

}  // namespace

ContextMassBuilder::ContextMassBuilder(int order, size_t vocab_size)
    : order_(order), word_contexts_(order > 1 ? vocab_size : 0) {
  for (int m = 2; m < order; ++m) longer_.emplace_back();
}

void ContextMassBuilder::AddUnigram(float prob_ln) { unigram_mass_ += std::exp(double{prob_ln}); }

void ContextMassBuilder::AddNgram(const WordIndex* ids, int n, float prob_ln,
                                  const std::vector<Entry>& unigrams,
                                  std::vector<TableBuilder>& tables) {
  const int m = n - 1;  // the context h = ids[0..m)
  Context* context;
  if (m == 1) {
    context = &word_contexts_[ids[0]];
  } else {
    context = &longer_[m - 2][StoredKey(KeyOfWords(ids, m))];
    context->suffix = m == 2 ? ids[1] : StoredKey(KeyOfWords(ids + 1, m - 1));
  }
  context->listed += std::exp(double{prob_ln});
  context->lower += std::exp(BackoffLogProb(ids + 1, n - 1, unigrams, tables));
}

double ContextMassBuilder::LogProbBound(const std::vector<Entry>& unigrams,
                                        std::vector<TableBuilder>& tables) {
  // Every S(h) computed, and for the contexts without records (no listed continuation, so
  // S(h) = bo(h) S(h') with h' unknown here) bo(h) times the largest S of the shorter contexts.
  double most = unigram_mass_;  // the largest S over contexts of the lengths done so far
  // Overflowing or undefined sums (huge backoffs) bound nothing: +inf, the clamp is then a no-op.
  auto mass = [](const Context& c, double backoff_ln, double suffix_mass) {
    const double s = c.listed + std::exp(backoff_ln) * std::max(0.0, suffix_mass - c.lower);
    return std::isfinite(s) && std::isfinite(suffix_mass) && std::isfinite(c.lower) ? s : INFINITY;
  };
  if (!std::isfinite(most)) return INFINITY;
  std::vector<double> word_mass(word_contexts_.size());
  std::unordered_map<uint64_t, double> masses, shorter;  // S by stored key: length m, m - 1
  for (int m = 1; m < order_; ++m) {
    const double most_shorter = most;
    if (m == 1) {
      for (size_t v = 0; v < word_contexts_.size(); ++v) {
        word_mass[v] = mass(word_contexts_[v], unigrams[v].backoff_ln, unigram_mass_);
        most = std::max(most, word_mass[v]);  // with no continuation: bo(v) S(empty)
      }
    } else {
      masses.clear();
      for (const auto& [key, c] : longer_[m - 2]) {
        const Entry* stored = tables[m - 2].Find(key);
        const double backoff = stored != nullptr && stored->listed() ? stored->backoff_ln : 0.0;
        double suffix_mass = most_shorter;  // h' not stored: bounded by every shorter context
        if (m == 2) {
          suffix_mass = word_mass[c.suffix];
        } else if (const auto it = shorter.find(c.suffix); it != shorter.end()) {
          suffix_mass = it->second;
        }
        masses[key] = mass(c, backoff, suffix_mass);
        most = std::max(most, masses[key]);
      }
      for (const Entry& e : tables[m - 2].buckets())
        if (e.key != 0 && e.listed() && e.backoff_ln > 0 && !masses.count(e.key & ~kFlagMask))
          most = std::max(most, std::exp(double{e.backoff_ln}) * most_shorter);
      if (!std::isfinite(most)) return INFINITY;
      shorter.swap(masses);
    }
  }
  // Score adds a log-prob and up to order - 1 backoffs in float: each addition may round up by
  // half an ulp of a partial sum, at most (order) * (largest |term|) in magnitude.
  double largest = 0;
  auto see = [&largest](float x) {
    if (std::isfinite(x)) largest = std::max(largest, double{std::fabs(x)});
  };
  for (const Entry& e : unigrams) see(e.prob_ln), see(e.backoff_ln);
  for (auto& table : tables)
    for (const Entry& e : table.buckets())
      if (e.key != 0) see(e.prob_ln), see(e.backoff_ln);
  return std::log(most) + 1e-6 * order_ * (1.0 + order_ * largest);
}

}  // namespace dl::ngram
