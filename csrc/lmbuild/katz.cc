#include "lmbuild/katz.h"

#include <cmath>
#include <utility>

#include "errors.h"

namespace dl::lmbuild {
namespace {
constexpr double kNormEps = 0.001;  // OpenGrm's fixed kNormEps
}

void CheckKatzOptions(const KatzOptions& options, int order) {
  if (options.bins < 1) throw InvalidArgument(Message("bins must be >= 1, got ", options.bins));
  if (options.min_counts.empty()) return;
  if (static_cast<int>(options.min_counts.size()) != order) {
    throw InvalidArgument(Message("min counts need one entry per order (", order, "), got ",
                                  options.min_counts.size()));
  }
  if (options.min_counts[0] != 1) {
    throw InvalidArgument(
        Message("the unigram min count must be 1 (unigrams are never removed), got ",
                options.min_counts[0]));
  }
  for (int k = 1; k < order; ++k) {
    if (options.min_counts[k] < 1) {
      throw InvalidArgument(
          Message("min counts must be >= 1, got ", options.min_counts[k], " for order ", k + 1));
    }
    if (options.min_counts[k] < options.min_counts[k - 1]) {
      throw InvalidArgument(Message("min counts must not decrease with the order, got ",
                                    options.min_counts[k - 1], " then ", options.min_counts[k]));
    }
  }
}

std::vector<double> KatzDiscounts(const std::vector<uint64_t>& n, int bins) {
  // n[r - 1] = n_r for r = 1..bins+1.
  auto nr = [&](int r) { return static_cast<double>(n[r - 1]); };
  double rnorm = 0.0;
  for (int j = 1; j <= bins; ++j) {
    if (n[j - 1] > 0) {
      rnorm = (bins + 1) * nr(bins + 1) / (j * nr(j));
      break;
    }
  }
  std::vector<double> d(bins + 1, 1.0 - kNormEps);
  for (int r = 1; r <= bins; ++r) {
    double rstar = r + 1;
    if (n[r] > 0) rstar *= nr(r + 1);
    if (n[r - 1] > 0) rstar /= nr(r);
    double value = rstar / r - rnorm;
    if (1.0 - rnorm > 0) value /= 1.0 - rnorm;
    d[r - 1] = (value <= 0 || value >= 1) ? 1.0 - kNormEps : value;
  }
  return d;
}

namespace {

using ContextTotals = std::vector<std::vector<double>>;  // [k - 2]: c(h) of the contexts of order k

// Level 0: every word with p(w) = c(w) / N (N = all word counts + sentences, i.e. </s> included);
// <s> gets probability 0 (never predicted).
void EstimateUnigrams(const NgramCounter& counter, BackoffModel* model) {
  ModelLevel& uni = model->levels[0];
  uni.count = counter.unigram_counts();
  double total = 0;
  for (size_t w = 1; w < uni.count.size(); ++w) total += static_cast<double>(uni.count[w]);
  uni.prob.resize(uni.count.size());
  uni.prob[kBos] = 0.0;
  for (size_t w = 1; w < uni.count.size(); ++w) uni.prob[w] = uni.count[w] / total;
}

// Levels 1..N-1: the counter's records, their suffix links (one probe each) and the context
// totals c(h) = the sum of h's successor counts.
ContextTotals LinkHigherOrders(const NgramCounter& counter, BackoffModel* model) {
  const int order = model->order;
  ContextTotals context_total(order);
  for (int k = 2; k <= order; ++k) {
    const CountTable& table = counter.table(k);
    ModelLevel& level = model->levels[k - 1];
    level.prefix = table.prefix;
    level.word = table.word;
    level.count = table.count;
    level.prob.assign(table.size(), 0.0);
    level.suffix.resize(table.size());
    if (k == 2) {
      level.suffix = table.word;
    } else {
      const ModelLevel& prev = model->levels[k - 2];
      const CountTable& lower = counter.table(k - 1);
      for (size_t i = 0; i < table.size(); ++i) {
        const uint32_t s = lower.index.Find(prev.suffix[table.prefix[i]], table.word[i]);
        if (s == PairIndex::kAbsent) throw InvalidArgument("internal: missing suffix n-gram");
        level.suffix[i] = s;
      }
    }
    std::vector<double>& ctx = context_total[k - 2];
    ctx.assign(model->levels[k - 2].size(), 0.0);
    for (size_t i = 0; i < table.size(); ++i) ctx[table.prefix[i]] += table.count[i];
  }
  return context_total;
}

// Removes the n-grams below their order's minimum count; the context totals keep their counts
// (so their mass goes to the backoff) and follow their contexts' renumbering.
void ApplyMinCounts(const std::vector<int64_t>& min_counts, BackoffModel* model,
                    ContextTotals* context_total) {
  const int order = model->order;
  std::vector<std::vector<bool>> keep(order);
  bool any = false;
  for (int k = 2; k <= order; ++k) {
    const ModelLevel& level = model->levels[k - 1];
    keep[k - 1].resize(level.size());
    for (size_t i = 0; i < level.size(); ++i) {
      keep[k - 1][i] = level.count[i] >= static_cast<uint64_t>(min_counts[k - 1]);
      any |= !keep[k - 1][i];
    }
  }
  if (!any) return;
  for (int k = 2; k < order; ++k) {
    std::vector<double>& ctx = (*context_total)[k - 1];
    size_t out = 0;
    for (size_t i = 0; i < ctx.size(); ++i)
      if (keep[k - 1][i]) ctx[out++] = ctx[i];
    ctx.resize(out);
  }
  CompactModel(model, keep);
}

// Count-of-counts n_1..n_{bins+1} per order (<s> excluded) and their Katz discounts.
void CountOfCounts(const BackoffModel& model, int bins, KatzStats* stats) {
  const int order = model.order;
  stats->discounts.assign(order, {});
  stats->count_of_counts.assign(order, std::vector<uint64_t>(bins + 1, 0));
  for (int k = 1; k <= order; ++k) {
    const ModelLevel& level = model.levels[k - 1];
    std::vector<uint64_t>& coc = stats->count_of_counts[k - 1];
    for (size_t i = (k == 1 ? 1 : 0); i < level.count.size(); ++i) {
      const uint64_t r = level.count[i];
      if (r >= 1 && r <= static_cast<uint64_t>(bins + 1)) ++coc[r - 1];
    }
    stats->discounts[k - 1] = KatzDiscounts(coc, bins);
  }
}

// p(w|h) = d(c(hw)) c(hw) / c(h) for orders >= 2.
void EstimateHigherOrders(const ContextTotals& context_total, const KatzStats& stats, int bins,
                          BackoffModel* model) {
  for (int k = 2; k <= model->order; ++k) {
    ModelLevel& level = model->levels[k - 1];
    const std::vector<double>& ctx = context_total[k - 2];
    const std::vector<double>& d = stats.discounts[k - 1];
    level.prob.resize(level.size());
    for (size_t i = 0; i < level.size(); ++i) {
      const uint64_t r = level.count[i];
      const double discount = d[r > static_cast<uint64_t>(bins) ? bins : r - 1];
      level.prob[i] = discount * static_cast<double>(r) / ctx[level.prefix[i]];
    }
  }
}

// Complete states (every successor of the backoff state seen) give their reserved mass to </s>.
void GiveCompleteStatesMassToEos(BackoffModel* model) {
  std::vector<std::vector<bool>> complete;
  std::vector<std::vector<uint32_t>> successors;
  FindCompleteStates(*model, &complete, &successors);
  for (int k = 2; k <= model->order; ++k) {
    ModelLevel& level = model->levels[k - 1];
    const std::vector<bool>& comp = complete[k - 2];
    bool any = false;
    for (size_t j = 0; j < comp.size() && !any; ++j) any = comp[j];
    if (!any) continue;
    std::vector<double> mass(comp.size(), 0.0);
    for (size_t i = 0; i < level.size(); ++i) mass[level.prefix[i]] += level.prob[i];
    for (size_t i = 0; i < level.size(); ++i) {
      if (level.word[i] == kEos && comp[level.prefix[i]])
        level.prob[i] += 1.0 - mass[level.prefix[i]];
    }
  }
}

}  // namespace

BackoffModel EstimateKatz(NgramCounter* counter, const KatzOptions& options, KatzStats* stats) {
  const int order = counter->order();
  CheckKatzOptions(options, order);
  if (counter->sentences() == 0) throw InvalidArgument("no sentences were counted (empty corpus)");
  BackoffModel model;
  model.order = order;
  model.levels.resize(order);
  model.words.reserve(counter->vocab_size());
  for (WordId w = 0; w < counter->vocab_size(); ++w) model.words.push_back(counter->Word(w));

  EstimateUnigrams(*counter, &model);
  ContextTotals context_total = LinkHigherOrders(*counter, &model);
  counter->FreeIndices();
  if (!options.min_counts.empty()) ApplyMinCounts(options.min_counts, &model, &context_total);
  KatzStats local;
  KatzStats& counted = stats ? *stats : local;
  CountOfCounts(model, options.bins, &counted);
  EstimateHigherOrders(context_total, counted, options.bins, &model);
  GiveCompleteStatesMassToEos(&model);
  ComputeBackoffs(&model);
  return model;
}

}  // namespace dl::lmbuild
