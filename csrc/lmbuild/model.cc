#include "lmbuild/model.h"

#include <algorithm>

#include "errors.h"

namespace dl::lmbuild {

void CompactModel(BackoffModel* model, const std::vector<std::vector<bool>>& keep) {
  std::vector<uint32_t> remap_prev;  // old index -> new index at the previous level
  for (int k = 2; k <= model->order; ++k) {
    ModelLevel& level = model->levels[k - 1];
    const std::vector<bool>& mask = keep[k - 1];
    std::vector<uint32_t> remap(level.size(), PairIndex::kAbsent);
    size_t out = 0;
    const bool has_counts = !level.count.empty();
    const bool has_backoffs = !level.backoff_ln.empty();
    for (size_t i = 0; i < level.size(); ++i) {
      if (!mask[i]) continue;
      remap[i] = static_cast<uint32_t>(out);
      uint32_t prefix = level.prefix[i], suffix = level.suffix[i];
      if (k > 2) {
        prefix = remap_prev[prefix];
        suffix = remap_prev[suffix];
        if (prefix == PairIndex::kAbsent || suffix == PairIndex::kAbsent) {
          throw InvalidArgument("internal: kept n-gram whose prefix or suffix was removed");
        }
      }
      level.prefix[out] = prefix;
      level.suffix[out] = suffix;
      level.word[out] = level.word[i];
      level.prob[out] = level.prob[i];
      if (has_counts) level.count[out] = level.count[i];
      if (has_backoffs) level.backoff_ln[out] = level.backoff_ln[i];
      ++out;
    }
    level.prefix.resize(out);
    level.suffix.resize(out);
    level.word.resize(out);
    level.prob.resize(out);
    if (has_counts) level.count.resize(out);
    if (has_backoffs) level.backoff_ln.resize(out);
    level.prefix.shrink_to_fit();
    level.suffix.shrink_to_fit();
    level.word.shrink_to_fit();
    level.prob.shrink_to_fit();
    remap_prev.swap(remap);
  }
}

void FindCompleteStates(const BackoffModel& model, std::vector<std::vector<bool>>* complete,
                        std::vector<std::vector<uint32_t>>* successors) {
  complete->assign(model.order - 1, {});
  successors->assign(model.order - 1, {});
  // Successors of the unigram state: every word but <s>, plus </s>.
  const uint32_t unigram_successors = static_cast<uint32_t>(model.words.size() - 1);
  for (int m = 1; m < model.order; ++m) {
    const ModelLevel& next = model.levels[m];  // n-grams of order m + 1
    std::vector<uint32_t>& succ = (*successors)[m - 1];
    succ.assign(model.levels[m - 1].size(), 0);
    for (size_t i = 0; i < next.size(); ++i) ++succ[next.prefix[i]];
    std::vector<bool>& comp = (*complete)[m - 1];
    comp.assign(succ.size(), false);
    for (size_t j = 0; j < succ.size(); ++j) {
      if (succ[j] == 0) continue;
      if (m == 1) {
        comp[j] = succ[j] == unigram_successors;
      } else {
        const uint32_t b = model.levels[m - 1].suffix[j];
        comp[j] = (*complete)[m - 2][b] && succ[j] == (*successors)[m - 2][b];
      }
    }
  }
}

void ComputeBackoffs(BackoffModel* model) {
  std::vector<std::vector<bool>> complete;
  std::vector<std::vector<uint32_t>> successors;
  FindCompleteStates(*model, &complete, &successors);
  const double min_neglog = 1e-9;  // kNormEps * kFloatEps
  for (int m = 1; m <= model->order; ++m) {
    ModelLevel& ctx = model->levels[m - 1];
    ctx.backoff_ln.assign(ctx.size(), kNaN);
    if (m == model->order) continue;
    const ModelLevel& next = model->levels[m];
    const ModelLevel& lower = model->levels[m - 1];  // holds the suffixes of `next`
    std::vector<double> hi(ctx.size(), 0.0), lo(ctx.size(), 0.0);
    for (size_t i = 0; i < next.size(); ++i) {
      const uint32_t j = next.prefix[i];
      hi[j] += next.prob[i];
      lo[j] += lower.prob[next.suffix[i]];  // p(w | h')
    }
    for (size_t j = 0; j < ctx.size(); ++j) {
      if (successors[m - 1][j] == 0) continue;
      if (complete[m - 1][j]) {
        ctx.backoff_ln[j] = -kCompleteStateCost;
        continue;
      }
      double nh = hi[j] > 0 ? -std::log(hi[j]) : 1e300;
      double nl = lo[j] > 0 ? -std::log(lo[j]) : 1e300;
      nh = std::max(nh, min_neglog);
      nl = std::max(nl, min_neglog);
      const double num = nh > 99.0 ? 0.0 : -std::log(-std::expm1(-nh));
      const double denom = nl > 99.0 ? 0.0 : -std::log(-std::expm1(-nl));
      ctx.backoff_ln[j] = denom - num;
    }
  }
}

void NgramWordIds(const BackoffModel& model, int k, uint32_t index, WordId* ids) {
  for (int m = k; m >= 2; --m) {
    const ModelLevel& level = model.levels[m - 1];
    ids[m - 1] = level.word[index];
    index = level.prefix[index];
  }
  ids[0] = index;
}

}  // namespace dl::lmbuild
