#include "ngram/context_mass.h"

#include <algorithm>
#include <cmath>

namespace dl::ngram {

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

ContextMassBuilder::Context* ContextMassBuilder::ContextTable::FindOrInsert(uint64_t key) {
  if (4 * (used + 1) > 3 * slots.size()) {  // grow past 3/4 full: rehash into twice the slots
    std::vector<Context> old(2 * slots.size());
    old.swap(slots);
    for (const Context& c : old)
      if (c.key != 0) {
        size_t i = Mix64(c.key) & (slots.size() - 1);
        while (slots[i].key != 0) i = (i + 1) & (slots.size() - 1);
        slots[i] = c;
      }
  }
  size_t i = Mix64(key) & (slots.size() - 1);
  while (slots[i].key != 0 && slots[i].key != key) i = (i + 1) & (slots.size() - 1);
  if (slots[i].key == 0) slots[i].key = key, ++used;
  return &slots[i];
}

const ContextMassBuilder::Context* ContextMassBuilder::ContextTable::Find(uint64_t key) const {
  size_t i = Mix64(key) & (slots.size() - 1);
  while (slots[i].key != 0 && slots[i].key != key) i = (i + 1) & (slots.size() - 1);
  return slots[i].key == key ? &slots[i] : nullptr;
}

ContextMassBuilder::ContextMassBuilder(int order, size_t vocab_size)
    : order_(order), word_contexts_(order > 1 ? vocab_size : 0) {
  for (int m = 2; m < order; ++m) longer_.emplace_back();
}

void ContextMassBuilder::AddUnigram(float prob_ln) { unigram_mass_ += std::exp(double{prob_ln}); }

void ContextMassBuilder::AddNgram(const WordIndex* ids, int n, float prob_ln, double lower_ln,
                                  float context_backoff) {
  const int m = n - 1;  // the context h = ids[0..m)
  Context* context;
  if (m == 1) {
    context = &word_contexts_[ids[0]];
  } else {
    context = longer_[m - 2].FindOrInsert(StoredKey(KeyOfWords(ids, m)));
    context->suffix = m == 2 ? ids[1] : StoredKey(KeyOfWords(ids + 1, m - 1));
  }
  context->backoff = context_backoff;
  context->listed += std::exp(double{prob_ln});
  context->lower += std::exp(lower_ln);
}

double ContextMassBuilder::LogProbBound(const std::vector<Entry>& unigrams,
                                        std::vector<TableBuilder>& tables) {
  // Overflowing or undefined sums (huge backoffs) bound nothing: +inf, the clamp is then a no-op.
  auto mass = [](const Context& c, double backoff_ln, double suffix_mass) {
    const double s = c.listed + std::exp(backoff_ln) * std::max(0.0, suffix_mass - c.lower);
    return std::isfinite(s) && std::isfinite(suffix_mass) && std::isfinite(c.lower) ? s : INFINITY;
  };
  // S of every context with records, by length; the largest S so far over all contexts, where a
  // context without records (no listed continuation: S(h) = bo(h) S(h'), h' unknown here) counts
  // as bo(h) times the largest S of the shorter contexts.
  double most = unigram_mass_;
  std::vector<double> word_mass(word_contexts_.size());
  for (size_t v = 0; v < word_contexts_.size(); ++v) {
    word_mass[v] = mass(word_contexts_[v], unigrams[v].backoff_ln, unigram_mass_);
    most = std::max(most, word_mass[v]);  // records or not: bo(v) S(empty) is exact here
  }
  for (int m = 2; m < order_; ++m) {
    const double most_shorter = most;
    ContextTable& table = longer_[m - 2];
    for (Context& c : table.slots) {  // S(h) replaces c.listed (read by the next length)
      if (c.key == 0) continue;
      double suffix_mass = most_shorter;  // h' not stored: bounded by every shorter context
      if (m == 2) {
        suffix_mass = word_mass[c.suffix];
      } else if (const Context* s = longer_[m - 3].Find(c.suffix)) {
        suffix_mass = s->listed;
      }
      c.listed = mass(c, c.backoff, suffix_mass);
      most = std::max(most, c.listed);
    }
    for (const Entry& e : tables[m - 2].buckets())
      if (e.key != 0 && e.listed() && e.backoff_ln > 0 && !table.Find(e.key & ~kFlagMask))
        most = std::max(most, std::exp(double{e.backoff_ln}) * most_shorter);
    if (!std::isfinite(most)) return INFINITY;
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
