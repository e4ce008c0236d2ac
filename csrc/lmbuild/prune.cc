#include "lmbuild/prune.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "errors.h"

namespace dl::lmbuild {
namespace {

// -ln(e^-a + e^-b)
inline double NegLogSum(double a, double b) {
  if (a > b) std::swap(a, b);
  return a - std::log1p(std::exp(a - b));
}

}  // namespace

PruneResult PruneRelativeEntropy(BackoffModel* model, const PruneOptions& options) {
  const bool by_target = options.target >= 0;
  if (by_target == (options.threshold >= 0)) {
    throw InvalidArgument("give exactly one of a pruning threshold and a target size");
  }
  if (!by_target && !std::isfinite(options.threshold)) {
    throw InvalidArgument(Message("pruning threshold must be finite, got ", options.threshold));
  }
  PruneResult result;
  const int order = model->order;
  const uint64_t unigrams = model->NumNgrams(1);
  if (by_target && static_cast<uint64_t>(options.target) < unigrams) {
    throw InvalidArgument(Message("prune target ", options.target, " is below the number of unigrams (",
                                  unigrams, " including <s>), which are never pruned"));
  }
  if (order < 2) return result;

  // p(h) for every context: state_prob[m - 1][j], j an n-gram of order m.
  std::vector<std::vector<double>> state_prob(order - 1);
  {
    const ModelLevel& uni = model->levels[0];
    state_prob[0] = uni.prob;
    state_prob[0][kBos] = uni.prob[kEos];
    for (int m = 2; m < order; ++m) {
      const ModelLevel& level = model->levels[m - 1];
      std::vector<double>& sp = state_prob[m - 1];
      sp.resize(level.size());
      for (size_t j = 0; j < level.size(); ++j) sp[j] = state_prob[m - 2][level.prefix[j]] * level.prob[j];
    }
  }

  // Own scores, per level (orders 2..N).
  const double min_neglog = 1e-9;
  std::vector<std::vector<double>> score(order);
  for (int k = 2; k <= order; ++k) {
    const ModelLevel& level = model->levels[k - 1];
    const ModelLevel& lower = model->levels[k - 2];
    const size_t contexts = model->levels[k - 2].size();
    std::vector<double> hi(contexts, 0.0), lo(contexts, 0.0);
    for (size_t i = 0; i < level.size(); ++i) {
      hi[level.prefix[i]] += level.prob[i];
      lo[level.prefix[i]] += lower.prob[level.suffix[i]];
    }
    std::vector<double>& s = score[k - 1];
    s.resize(level.size());
    for (size_t i = 0; i < level.size(); ++i) {
      const uint32_t j = level.prefix[i];
      const double p_hi = level.prob[i];
      const double p_lo = lower.prob[level.suffix[i]];
      const double p_h = state_prob[k - 2][j];
      if (p_hi <= 0 || p_h <= 0) {
        s[i] = -std::numeric_limits<double>::infinity();
        continue;
      }
      double nh = std::max(hi[j] > 0 ? -std::log(hi[j]) : 1e300, min_neglog);
      double nl = std::max(lo[j] > 0 ? -std::log(lo[j]) : 1e300, min_neglog);
      const double num = nh > 99.0 ? 0.0 : -std::log(-std::expm1(-nh));
      const double denom = nl > 99.0 ? 0.0 : -std::log(-std::expm1(-nl));
      const double new_log_backoff = NegLogSum(denom, -std::log(p_lo)) - NegLogSum(num, -std::log(p_hi));
      double d = std::log(p_lo) + new_log_backoff - std::log(p_hi);
      d *= p_hi;
      d += (new_log_backoff + (num - denom)) * std::exp(-num);
      s[i] = -p_h * d;
    }
  }
  // Raise each n-gram's score to the maximum over its extensions (highest order first).
  for (int k = order; k >= 3; --k) {
    const ModelLevel& level = model->levels[k - 1];
    std::vector<double>& below = score[k - 2];
    const std::vector<double>& s = score[k - 1];
    for (size_t i = 0; i < level.size(); ++i) {
      below[level.prefix[i]] = std::max(below[level.prefix[i]], s[i]);
      below[level.suffix[i]] = std::max(below[level.suffix[i]], s[i]);
    }
  }

  // Threshold.
  double theta;
  if (by_target) {
    std::vector<double> all;
    for (int k = 2; k <= order; ++k) all.insert(all.end(), score[k - 1].begin(), score[k - 1].end());
    const uint64_t keep = static_cast<uint64_t>(options.target) - unigrams;
    if (keep >= all.size()) {
      theta = -std::numeric_limits<double>::infinity();
    } else {
      std::sort(all.begin(), all.end());
      size_t index = all.size() - keep - 1;  // largest score to prune
      theta = all[index];
      while (index < all.size() && all[index] == theta) ++index;
      theta = index >= all.size() ? theta + 1 : (theta + all[index]) / 2;
    }
  } else {
    theta = std::log1p(options.threshold);
  }
  result.theta_ln = theta;

  // Decide, highest order first: pruned if below theta and no kept extension needs it.
  std::vector<std::vector<bool>> keep(order);
  std::vector<bool> needed;
  for (int k = order; k >= 2; --k) {
    const ModelLevel& level = model->levels[k - 1];
    std::vector<bool>& kk = keep[k - 1];
    kk.assign(level.size(), true);
    std::vector<bool> needed_below(k > 2 ? model->levels[k - 2].size() : 0, false);
    for (size_t i = 0; i < level.size(); ++i) {
      const bool is_needed = !needed.empty() && needed[i];
      if (!is_needed && score[k - 1][i] < theta) {
        kk[i] = false;
        ++result.removed;
      } else if (k > 2) {
        needed_below[level.prefix[i]] = true;
        needed_below[level.suffix[i]] = true;
      }
    }
    needed.swap(needed_below);
  }
  if (result.removed > 0) CompactModel(model, keep);
  ComputeBackoffs(model);
  return result;
}

}  // namespace dl::lmbuild
